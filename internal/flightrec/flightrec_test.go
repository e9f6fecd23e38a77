package flightrec

import (
	"path/filepath"
	"testing"
	"time"
)

func TestDumpsOnSlowPublishOncePerInterval(t *testing.T) {
	dir := t.TempDir()
	r, err := Start(Config{Dir: dir, Threshold: 10 * time.Millisecond, MinInterval: time.Hour, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	r.Observe(time.Millisecond) // fast: nothing
	for range 5 {
		r.Observe(50 * time.Millisecond) // slow: one trace, the rest within the interval
	}
	r.Stop()
	files, _ := filepath.Glob(filepath.Join(dir, "publish-*-50ms.trace"))
	if len(files) != 1 {
		t.Fatalf("%d traces written, want 1: %v", len(files), files)
	}
	var nilRec *Recorder
	nilRec.Observe(time.Hour) // a nil recorder is off
	nilRec.Stop()
}

func TestKeepsNewest(t *testing.T) {
	dir := t.TempDir()
	r, err := Start(Config{Dir: dir, Threshold: time.Millisecond, MinInterval: time.Nanosecond, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		r.Observe(time.Duration(i+2) * time.Millisecond)
		r.wg.Wait()
		time.Sleep(2 * time.Millisecond) // distinct millisecond names
	}
	r.Stop()
	files, _ := filepath.Glob(filepath.Join(dir, "publish-*.trace"))
	if len(files) != 2 {
		t.Fatalf("%d traces kept, want 2: %v", len(files), files)
	}
}
