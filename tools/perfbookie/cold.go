package perfbookie

import (
	"errors"
	"fmt"
	"time"

	"github.com/magnetar-io/magnetar/tools/perfdisk"
	"github.com/magnetar-io/magnetar/tools/perfkit"
)

// coldRead writes a backlog to a fresh in-process bookie, restarts it so
// that nothing is cached, and reads the backlog back as catching-up
// consumers do: each ledger from its first entry to its last.
func (r *runner) coldRead() (err error) {
	switch {
	case r.cfg.BacklogBytes == 0:
		r.note("cold read not measured (backlog 0)")
		return nil
	case r.cfg.Addr != "":
		r.note("cold read not measured: it restarts the bookie, which only an in-process bookie allows (no --addr)")
		return nil
	}
	t, err := r.startTarget("cold")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, t.close()) }()
	size, n := r.cfg.BacklogEntrySize, r.cfg.BacklogLedgers
	perLedger := max(1, (r.cfg.BacklogBytes/int64(size)+int64(n)-1)/int64(n))
	c := &ColdRead{Ledgers: n, EntrySize: size, Entries: perLedger * int64(n), Bytes: perLedger * int64(n) * int64(size)}
	ledgers := r.ledgers(n)
	if err := r.writeBacklog(t.addr, ledgers, perLedger, c); err != nil {
		return err
	}
	fmt.Fprintln(r.cfg.Live, "  .. restarting the bookie and evicting its files from the page cache")
	begin := time.Now()
	dropErr, err := t.local.restart()
	if err != nil {
		return err
	}
	c.RestartSeconds = time.Since(begin).Seconds()
	c.PageCacheDropped = dropErr == nil
	if dropErr != nil {
		c.PageCacheNote = "the page cache may be warm: evicting the bookie's files failed: " + dropErr.Error()
	}
	// The restarted bookie listens on a new port.
	if c.Read, err = r.readBacklog(t.local.addr(), ledgers, perLedger); err != nil {
		return err
	}
	if r.rep.Disk != nil && r.rep.Disk.SeqRead.MiBPerSec > 0 {
		c.DiskFraction = c.Read.MiBPerSec / r.rep.Disk.SeqRead.MiBPerSec
	}
	r.rep.Cold = c
	fmt.Fprintln(r.progress, FormatCold(c))
	return nil
}

func (r *runner) writeBacklog(addr string, ledgers []int64, perLedger int64, c *ColdRead) error {
	conns, err := dial(addr, len(ledgers))
	if err != nil {
		return err
	}
	defer closeAll(conns)
	ph := perfkit.NewPhase()
	ws := make([]*writer, len(ledgers))
	runs := make([]func(), len(ledgers))
	for i, l := range ledgers {
		ws[i] = newWriter(ph, conns[i], r.pat, l, c.EntrySize, r.cfg.Outstanding, perLedger)
		runs[i] = ws[i].run
	}
	elapsed, err := r.measureAll(ph, fmt.Sprintf("backlog %d ledgers %s", len(ledgers), perfdisk.SizeName(int(c.Bytes))), runs)
	if err != nil {
		return err
	}
	for _, w := range ws {
		if got := w.written(); got != perLedger {
			return fmt.Errorf("ledger %d: %d of %d backlog entries acknowledged", w.ledger, got, perLedger)
		}
	}
	c.WriteSeconds = elapsed.Seconds()
	c.WriteMiBPerSec = float64(c.Bytes) / elapsed.Seconds() / (1 << 20)
	return nil
}

// readBacklog reads every ledger once, in order, one client per ledger,
// timing the whole catch-up (no warm-up: the first reads are the coldest).
func (r *runner) readBacklog(addr string, ledgers []int64, perLedger int64) (Point, error) {
	conns, err := dial(addr, len(ledgers))
	if err != nil {
		return Point{}, err
	}
	defer closeAll(conns)
	ph := perfkit.NewPhase()
	size := r.cfg.BacklogEntrySize
	tallies := make([]*perfkit.Tally, len(ledgers))
	runs := make([]func(), len(ledgers))
	for i, l := range ledgers {
		rd := newReader(ph, conns[i], r.pat, l, size, r.cfg.Outstanding, 0, perLedger-1, false)
		tallies[i], runs[i] = rd.tally, rd.run
	}
	elapsed, err := r.measureAll(ph, fmt.Sprintf("cold read %d ledgers", len(ledgers)), runs)
	if err != nil {
		return Point{}, err
	}
	p := r.pointOf("read", len(ledgers), size, tallies, elapsed)
	if want := perLedger * int64(len(ledgers)); p.Entries != want {
		return p, fmt.Errorf("read %d of the %d backlog entries", p.Entries, want)
	}
	return p, nil
}
