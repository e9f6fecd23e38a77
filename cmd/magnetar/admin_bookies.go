package main

// magnetar admin bookies, as pulsar-admin's (pulsaradmin has no calls for
// any of them, so they go through its rest client):
//   - list-bookies: every bookie registered in the cluster's metadata
//     store, writable and read-only (GET /admin/v2/bookies/all). Text
//     output is a table with each bookie's mode and, for a read-only one,
//     why; --output json prints the answer as pulsar-admin does
//     (BookiesClusterInfo, with readOnly, reason and outOfSpace added).
//   - racks-placement: the rack map (GET bookies/racks-info), a table of
//     group, bookie, rack, hostname; JSON as Pulsar's
//     BookiesRackConfiguration.
//   - set-bookie-rack --bookie host:port --rack /region/rack [--hostname]
//     [--group default]; get-bookie-rack --bookie; delete-bookie-rack
//     --bookie (POST, GET, DELETE bookies/racks-info/{bookie}).

import (
	"flag"
	"fmt"
	"io"
	"sort"
)

// bookieRackInfo is Pulsar's BookieInfo of the rack map.
type bookieRackInfo struct {
	Rack     string `json:"rack"`
	Hostname string `json:"hostname,omitempty"`
}

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
		{"racks-placement", nil, "show the bookie rack map (group, bookie, rack, hostname)",
			noFlags(func(env *adminEnv, _ []string) (adminReply, error) {
				racks := map[string]map[string]bookieRackInfo{}
				err := env.raw.Get(adminPath("bookies", "racks-info"), &racks)
				return replyText(racks, func(w io.Writer) { writeRacks(w, racks) }), err
			})},
		{"set-bookie-rack", nil, "place a bookie: --bookie host:port --rack /region/rack [--hostname h] [--group default]",
			func(fs *flag.FlagSet) adminAction {
				bookie := fs.String("bookie", "", "bookie id, host:port (required)")
				rack := fs.String("rack", "", "network location /region/rack or /rack (required)")
				hostname := fs.String("hostname", "", "the bookie's host name")
				group := fs.String("group", "default", "bookie affinity group")
				return func(env *adminEnv, _ []string) (adminReply, error) {
					if *bookie == "" || *rack == "" {
						return replyNone(), usageErrorf("--bookie and --rack are required")
					}
					return replyNone(), env.raw.PostWithQueryParams(adminPath("bookies", "racks-info", *bookie),
						bookieRackInfo{Rack: *rack, Hostname: *hostname}, map[string]string{"group": *group})
				}
			}},
		{"get-bookie-rack", nil, "show where a bookie is placed: --bookie host:port", func(fs *flag.FlagSet) adminAction {
			bookie := fs.String("bookie", "", "bookie id, host:port (required)")
			return func(env *adminEnv, _ []string) (adminReply, error) {
				if *bookie == "" {
					return replyNone(), usageErrorf("--bookie is required")
				}
				var info bookieRackInfo
				err := env.raw.Get(adminPath("bookies", "racks-info", *bookie), &info)
				return replyObject(info), err
			}
		}},
		{"delete-bookie-rack", nil, "remove a bookie from the rack map: --bookie host:port", func(fs *flag.FlagSet) adminAction {
			bookie := fs.String("bookie", "", "bookie id, host:port (required)")
			return func(env *adminEnv, _ []string) (adminReply, error) {
				if *bookie == "" {
					return replyNone(), usageErrorf("--bookie is required")
				}
				return replyNone(), env.raw.Delete(adminPath("bookies", "racks-info", *bookie))
			}
		}},
	}
}

// writeRacks prints the rack map as a table sorted by group and bookie.
func writeRacks(w io.Writer, racks map[string]map[string]bookieRackInfo) {
	var rows [][]string
	for g, bookies := range racks {
		for b, info := range bookies {
			rows = append(rows, []string{g, b, info.Rack, info.Hostname})
		}
	}
	sort.Slice(rows, func(i, j int) bool {
		if rows[i][0] != rows[j][0] {
			return rows[i][0] < rows[j][0]
		}
		return rows[i][1] < rows[j][1]
	})
	writeTable(w, []string{"GROUP", "BOOKIE", "RACK", "HOSTNAME"}, rows)
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
