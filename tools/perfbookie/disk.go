package perfbookie

import (
	"fmt"

	"github.com/magnetar-io/magnetar/tools/perfdisk"
)

// diskBlockUnit is what group sizes are rounded to before the disk is
// measured at them: the journal's block.
const diskBlockUnit = 4096

// seqReadMin is the smallest file the sequential-read limit is taken on;
// smaller ones finish within the disk's own readahead.
const seqReadMin = 8 << 20

// diskBaseline measures one datasync's latency and cold sequential reads
// on the journal's directory, through the run's backend.
func (r *runner) diskBaseline() error {
	if r.cfg.DiskDuration == 0 {
		r.note("disk limits not measured (disk duration 0)")
		return nil
	}
	readFile := max(r.cfg.BacklogBytes, seqReadMin)
	readFile = (readFile + 1<<20 - 1) &^ (1<<20 - 1)
	rep, err := perfdisk.Run(perfdisk.Config{Dir: r.dirs.journal, Backends: []string{r.fs.Backend()},
		Duration: r.cfg.DiskDuration, ReadFile: readFile, ReadBlock: 1 << 20}, nil)
	if err != nil {
		return err
	}
	d := &DiskLimits{Dir: r.dirs.journal}
	var found int
	for _, res := range rep.Results {
		switch res.Test {
		case "datasync":
			d.Datasync = res
			found++
		case "seqread":
			d.SeqRead = res
			found++
		}
	}
	if found != 2 {
		return fmt.Errorf("perfdisk returned %d results without a datasync and a seqread", len(rep.Results))
	}
	r.rep.Disk = d
	return nil
}

// addDiskLimit measures write+datasync at the group size p reached, one
// group at a time as the journal writes them (cached by size), and sets
// p's share of it. For a remote bookie, whose groups are not seen, it uses
// 1 MiB blocks: close to the disk's ceiling for synced writes.
func (r *runner) addDiskLimit(p *Point) error {
	if r.cfg.DiskDuration == 0 {
		return nil
	}
	block := 1 << 20
	if r.cfg.Addr == "" {
		if p.JournalSyncs == 0 {
			return nil // no group finished in the window: nothing to compare with
		}
		block = max(diskBlockUnit, int(p.BytesPerSync+diskBlockUnit/2)/diskBlockUnit*diskBlockUnit)
	}
	res, ok := r.diskAt[block]
	if !ok {
		var err error
		fmt.Fprintf(r.cfg.Live, "  .. measuring the disk's write+datasync at %s\n", perfdisk.SizeName(block))
		res, err = perfdisk.WriteSync(r.fs, perfdisk.Config{Dir: r.dirs.journal, Duration: r.cfg.DiskDuration}, "append", block)
		if err != nil {
			return fmt.Errorf("disk write+datasync at %s: %w", perfdisk.SizeName(block), err)
		}
		r.diskAt[block] = res
	}
	p.DiskBlock, p.Disk = block, &res
	if res.MiBPerSec > 0 {
		p.DiskFraction = p.MiBPerSec / res.MiBPerSec
	}
	return nil
}
