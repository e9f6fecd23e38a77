package perfdisk

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestRunSmall(t *testing.T) {
	cfg := DefaultConfig(t.TempDir())
	cfg.BlockSizes = []int{4096, 65536}
	cfg.Duration = 50 * time.Millisecond
	cfg.ReadFile, cfg.ReadBlock = 8<<20, 1<<20
	rep, err := Run(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 2 backends x (2 modes x 2 sizes + datasync + seqread)
	if len(rep.Results) != 12 {
		t.Fatalf("%d results, want 12", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Ops == 0 || r.OpsPerSec <= 0 || r.LatencyUS == nil || r.LatencyUS.P50 <= 0 && r.Test != "seqread" {
			t.Fatalf("empty measurement: %+v", r)
		}
		if r.Test == "seqread" && r.Ops != 8 {
			t.Fatalf("read %d blocks, want 8", r.Ops)
		}
	}
	var out bytes.Buffer
	Format(&out, rep)
	if !strings.Contains(out.String(), "uring   write+datasync") || !strings.Contains(out.String(), "std     seqread") {
		t.Fatalf("table:\n%s", out.String())
	}
}

func TestRunRejectsMissingDir(t *testing.T) {
	cfg := DefaultConfig("/nonexistent/magnetar")
	if _, err := Run(cfg, nil); err == nil || !strings.Contains(err.Error(), "/nonexistent/magnetar") {
		t.Fatalf("missing dir: %v", err)
	}
}
