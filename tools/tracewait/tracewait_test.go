package tracewait

import (
	"bytes"
	"runtime"
	"runtime/trace"
	"strings"
	"sync"
	"testing"
	"time"
)

//go:noinline
func tracedWorker(wg *sync.WaitGroup) { wg.Done() }

//go:noinline
func tracedSleeper(started, ch chan struct{}, wg *sync.WaitGroup) {
	started <- struct{}{} // the receiver is waiting: this goroutine goes on to block on ch
	<-ch
	wg.Done()
}

// A trace recorded here, with goroutines of known start functions: each
// created worker is counted once it runs, and the focused sleeper's wait
// on its channel is found with its reason and stack.
func TestAnalyzeAttributesWaitsToStartFunctions(t *testing.T) {
	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatalf("start tracing: %v", err)
	}
	const workers = 50
	var wg sync.WaitGroup
	started, ch := make(chan struct{}), make(chan struct{})
	wg.Add(workers + 1)
	go tracedSleeper(started, ch, &wg)
	<-started
	waitBlockedInReceive(t, "tracedSleeper") // the sleeper blocks on ch before it is closed
	for range workers {
		go tracedWorker(&wg)
	}
	close(ch)
	wg.Wait()
	trace.Stop()

	rep, err := Analyze(&buf, "tracedSleeper")
	if err != nil {
		t.Fatal(err)
	}
	var worker *Waits
	for i, k := range rep.Kinds {
		if strings.HasSuffix(k.Kind, "tracewait.tracedWorker") {
			worker = &rep.Kinds[i]
		}
	}
	if worker == nil || len(worker.Delays) < workers {
		t.Fatalf("tracedWorker: %+v, want at least %d delays (kinds: %v)", worker, workers, kinds(rep))
	}
	found := false
	for _, f := range rep.Focus {
		if strings.Contains(f.Kind, "tracedSleeper") && strings.Contains(f.Kind, "chan receive") {
			found = true
		}
	}
	if !found {
		t.Fatalf("focus on the sleeper has no channel wait: %v", kinds(Report{Kinds: rep.Focus}))
	}
	var out bytes.Buffer
	Format(&out, rep, 5)
	if !strings.Contains(out.String(), "started in") || !strings.Contains(out.String(), "focus:") {
		t.Fatalf("format:\n%s", out.String())
	}
}

func TestAnalyzeRejectsANonTrace(t *testing.T) {
	if _, err := Analyze(strings.NewReader("not a trace"), ""); err == nil {
		t.Fatal("no error for a file that is not a trace")
	}
}

func kinds(r Report) []string {
	var out []string
	for _, k := range r.Kinds {
		out = append(out, k.Kind)
	}
	return out
}

// waitBlockedInReceive waits until a goroutine running fn is parked in a
// channel receive, as the runtime's stack dump shows it.
func waitBlockedInReceive(t *testing.T, fn string) {
	t.Helper()
	buf := make([]byte, 1<<20)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
			if strings.Contains(g, "[chan receive") && strings.Contains(g, "."+fn+"(") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never blocked in a channel receive", fn)
		}
	}
}
