package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/tools/perfdisk"
)

// journalGroupBytes is the journal's largest group
// (journalBufferedWritesThreshold): under full load each datasync covers
// about this much, so it is the block size the disk's write+datasync
// bandwidth is measured at.
const journalGroupBytes = 512 << 10

func describeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	if mib, err := procMeminfoMiB("MemTotal:"); err == nil {
		m.MemMiB = mib
	}
	if out, err := exec.Command("uname", "-r").Output(); err == nil {
		m.Kernel = strings.TrimSpace(string(out))
	}
	return m
}

func procMeminfoMiB(key string) (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		var kb int64
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			_, err := fmt.Sscan(f[1], &kb)
			return kb / 1024, err
		}
	}
	return 0, fmt.Errorf("/proc/meminfo has no %s", key)
}

// measureDisk runs magnetar perf disk in dir and keeps what the report
// compares against.
func (r *runner) measureDisk(ctx context.Context, dir string) (Disk, error) {
	fmt.Fprintln(os.Stderr, "== machine: magnetar perf disk")
	cmd := exec.CommandContext(ctx, r.o.magnetar, "perf", "disk", "--dir", dir, "--json", "--sizes", "512k",
		"--modes", "overwrite", "--backends", "uring,std", "--duration", "3s", "--read-file", "512m")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return Disk{}, fmt.Errorf("perf disk: %w: %s", err, truncate(stderr.String(), 500))
	}
	var rep perfdisk.Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		return Disk{}, fmt.Errorf("perf disk report: %w", err)
	}
	return diskOf(rep), nil
}

// diskOf picks the best backend's figures: the targets are set against
// what the disk can do, not what one backend reached.
func diskOf(rep perfdisk.Report) Disk {
	d := Disk{GroupBytes: journalGroupBytes}
	for _, res := range rep.Results {
		switch {
		case res.Test == "write+datasync" && res.BlockSize == journalGroupBytes && res.MiBPerSec > d.SyncMiBPerSec:
			d.SyncMiBPerSec, d.SyncBackend = res.MiBPerSec, res.Backend
		case res.Test == "datasync" && res.LatencyUS != nil && (d.SyncP50Micros == 0 || res.LatencyUS.P50 < d.SyncP50Micros):
			d.SyncP50Micros, d.SyncP99Micros = res.LatencyUS.P50, res.LatencyUS.P99
		case res.Test == "seqread" && res.MiBPerSec > d.ColdReadMiBSec:
			d.ColdReadMiBSec = res.MiBPerSec
		}
	}
	return d
}

// measureLoopback is the bandwidth of one TCP connection over loopback:
// 1 MiB writes for two seconds, read and discarded by the other end.
func measureLoopback() (float64, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	done := make(chan int64, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			done <- 0
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		done <- n
	}()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return 0, err
	}
	buf := make([]byte, 1<<20)
	start := time.Now()
	for time.Since(start) < 2*time.Second {
		if _, err := c.Write(buf); err != nil {
			c.Close()
			return 0, fmt.Errorf("loopback: %w", err)
		}
	}
	c.Close()
	n := <-done
	return float64(n) / (1 << 20) / time.Since(start).Seconds(), nil
}
