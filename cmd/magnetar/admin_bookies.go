package main

// magnetar admin bookies list-bookies, as pulsar-admin's: every bookie
// registered in the cluster's metadata store, writable and read-only
// (GET /admin/v2/bookies/all, which pulsaradmin has no call for). Text
// output is a table with each bookie's mode and, for a read-only one,
// why; --output json prints the answer as pulsar-admin does
// (BookiesClusterInfo, with readOnly, reason and outOfSpace added).

import (
	"fmt"
	"io"
)

// bookiesClusterInfo is Pulsar's BookiesClusterInfo with Magnetar's
// additions (broker/admin_bookies.go).
type bookiesClusterInfo struct {
	Bookies []rawBookieInfo `json:"bookies"`
}

type rawBookieInfo struct {
	BookieID   string `json:"bookieId"`
	ReadOnly   bool   `json:"readOnly"`
	Reason     string `json:"reason,omitempty"`
	OutOfSpace bool   `json:"outOfSpace,omitempty"`
}

func bookieCmds() []adminCmd {
	return []adminCmd{
		{"list-bookies", nil, "list the registered bookies, writable and read-only (with why: a full disk, failed storage)",
			noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
				var info bookiesClusterInfo
				err := env.raw.Get(adminPath("bookies", "all"), &info)
				if info.Bookies == nil {
					info.Bookies = []rawBookieInfo{}
				}
				return replyText(info, func(w io.Writer) { writeBookies(w, info.Bookies) }), err
			})},
	}
}

// writeBookies prints a table of the bookies: id, mode, whether a full
// disk is why, and the reason.
func writeBookies(w io.Writer, bookies []rawBookieInfo) {
	rows := make([][]string, 0, len(bookies))
	for _, b := range bookies {
		mode := "writable"
		if b.ReadOnly {
			mode = "read-only"
		}
		rows = append(rows, []string{b.BookieID, mode, fmt.Sprint(b.OutOfSpace), b.Reason})
	}
	writeTable(w, []string{"BOOKIE", "MODE", "OUT-OF-SPACE", "REASON"}, sortedRows(rows))
}
