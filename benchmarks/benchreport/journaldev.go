package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The journal on a device of its own (issue 37). TUNING.md tells users
// to give the journal a fast device with power-loss protection; this
// machine has one disk, but also /dev/zram0, a RAM-backed block device,
// which stands for that device: the section formats it (ext4), mounts it,
// puts journalDirectories there and the entry logs on the work directory,
// and measures the software path's own cost against in-memory storage at
// the same rates. It needs root; the device is reset when the section
// ends, also after a failure.

// zramDevice is the block device the section uses; zramSize its size
// (RAM it may take: the journal's files are recycled once the entry logs
// have the data, so a run needs far less).
const (
	zramDevice = "zram0"
	zramSize   = "8G"
)

// runJournalDevice runs the 1 KiB maximum, the durable standalone's 50%
// rate and the common rates with the journal on zram, each on a fresh
// standalone and a freshly emptied journal directory.
func (r *runner) runJournalDevice(ctx context.Context) error {
	d := &r.res.JournalDev
	journal, unmount, err := r.zramJournal("journaldev-mnt", "journal device")
	if err != nil {
		d.Skipped = err.Error()
		return nil
	}
	defer unmount()
	d.Ran = true
	d.Setup = fmt.Sprintf("the standalone with journalDirectories on /dev/%s (RAM-backed, ext4, standing for a journal device of its own) "+
		"and the entry logs and index on the work directory's disk; a fresh process and emptied directories for each run", zramDevice)
	d.CacheMiB = standaloneCacheMiB(r.o.config)
	conf := filepath.Join(r.o.work, "journaldev.conf")
	if err := withKeys(r.o.config, conf, "journalDirectories="+journal); err != nil {
		return err
	}
	plain := r.standaloneOn("journal-dev", conf)
	start := func(dir string) (target, func() error, error) {
		if err := os.RemoveAll(journal); err != nil {
			return target{}, nil, fmt.Errorf("emptying %s: %w", journal, err)
		}
		return plain(dir)
	}
	dir := filepath.Join(r.o.work, "journaldev")
	if err := r.fresh(start, dir, d, func(t target) error { return r.maxRun(ctx, t, d, 1024, false) }); err != nil {
		return err
	}
	rate := d.maxOf(1024).Report.PublishPS / 2
	if half := r.res.Standalone.fixedAt(50); half != nil {
		rate = half.Report.TargetRate // the rate the in-memory 50% point ran at
	}
	if err := r.fresh(start, dir, d, func(t target) error {
		return r.fixedRun(ctx, t, d, "journal on its own device e2e at the standalone's 50%", 50, rate)
	}); err != nil {
		return err
	}
	return r.ratesOn(ctx, start, dir, d, "journal on its own device", commonRates[:])
}

// zramJournal mounts /dev/zram0 at mntName under the work directory and
// returns the journal directory on it; unmount undoes it, noting a failure
// in the report under what. An error means the section cannot run (its
// Skipped reason).
func (r *runner) zramJournal(mntName, what string) (journal string, unmount func(), err error) {
	mnt := filepath.Join(r.o.work, mntName)
	undo, err := mountZram(mnt)
	if err != nil {
		return "", nil, err
	}
	return filepath.Join(mnt, "journal"), func() {
		if err := undo(); err != nil {
			r.res.Notes = append(r.res.Notes, what+": "+err.Error())
		}
	}, nil
}

// mountZram formats /dev/zram0 and mounts it on mnt; undo unmounts it
// and resets the device. A device already in use is left alone.
func mountZram(mnt string) (undo func() error, err error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("not run: formatting and mounting /dev/" + zramDevice + " needs root")
	}
	sys := "/sys/block/" + zramDevice
	if _, err := os.Stat(sys); err != nil {
		return nil, fmt.Errorf("not run: no /dev/%s (modprobe zram)", zramDevice)
	}
	if size, _ := os.ReadFile(sys + "/disksize"); strings.TrimSpace(string(size)) != "0" {
		return nil, fmt.Errorf("not run: /dev/%s is in use (disksize %s)", zramDevice, strings.TrimSpace(string(size)))
	}
	reset := func() error { return os.WriteFile(sys+"/reset", []byte("1"), 0) }
	if err := os.WriteFile(sys+"/disksize", []byte(zramSize), 0); err != nil {
		return nil, fmt.Errorf("setting /dev/%s's size: %w", zramDevice, err)
	}
	steps := [][]string{{"mkfs.ext4", "-q", "-F", "/dev/" + zramDevice}, {"mount", "/dev/" + zramDevice, mnt}}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return nil, errors.Join(err, reset())
	}
	for _, s := range steps {
		if out, err := exec.Command(s[0], s[1:]...).CombinedOutput(); err != nil {
			return nil, errors.Join(fmt.Errorf("%s: %w: %s", strings.Join(s, " "), err, out), reset())
		}
	}
	return func() error {
		var errs []error
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("umount %s: %w: %s", mnt, err, out))
		}
		errs = append(errs, reset(), os.Remove(mnt))
		return errors.Join(errs...)
	}, nil
}

// journalDevTargetRows compare the journal on its own device with
// in-memory storage in the same run: p99 within 1 ms at each shared rate,
// and the maximum at least 0.9 of memory's.
func journalDevTargetRows(res *Results) []targetRow {
	jd, mem := res.JournalDev, res.Memory
	if !jd.Ran {
		return nil
	}
	var rows []targetRow
	pair := func(name string, j, m *Run) {
		if j == nil || m == nil {
			return
		}
		jp, mp := lat(j.Report.PublishLatency).P99, lat(m.Report.PublishLatency).P99
		limit := float64(mp)/1000 + journalDevSlackMs
		row := targetRow{name: name, measured: fmt.Sprintf("p99 %s vs in-memory %s + 1 ms", us(jp), us(mp)),
			ratio: fmt.Sprintf("%.2f", float64(jp)/1000/limit), met: float64(jp)/1000 <= limit, ran: true}
		if !row.met {
			row.why = stagesWhy(j.Stages, nil)
		}
		rows = append(rows, row)
	}
	pair("journal on its own device: publish p99 at the standalone's 50% ≤ in-memory p99 + 1 ms", jd.fixedAt(50), mem.fixedAt(50))
	for _, rate := range commonRates {
		pair(fmt.Sprintf("journal on its own device: publish p99 at %.0f msg/s ≤ in-memory p99 + 1 ms", rate),
			jd.fixedAtRate(rate), mem.fixedAtRate(rate))
	}
	if j, m := jd.maxOf(1024), mem.maxOf(1024); j != nil && m != nil {
		ratio := j.Report.PublishPS / m.Report.PublishPS
		rows = append(rows, targetRow{name: "journal on its own device: 1 KiB maximum ≥ 0.9 × in-memory",
			measured: fmt.Sprintf("%.0f vs %.0f msg/s", j.Report.PublishPS, m.Report.PublishPS),
			ratio:    fmt.Sprintf("%.2f", ratio), met: ratio >= 0.9, ran: true, why: throughputWhy(res, j)})
	}
	return rows
}

// journalDevSlackMs is what the journal on its own device may add to the
// in-memory publish p99 at the same rate.
const journalDevSlackMs = 1.0
