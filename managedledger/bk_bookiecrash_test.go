package managedledger

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestBKBookieCrashesInARow crashes the (only) bookie several times in a
// row, with and without adds between the crashes, and reopens the managed
// ledger with a new factory after each: every acknowledged add must be
// read back. With entry-log storage two crashes in a row lost every entry
// ("bookie: no such ledger"): on the mem engine each start of the entry-log
// storage got a new, empty index, and the flush after the first restart's
// replay had checkpointed the journal.
func TestBKBookieCrashesInARow(t *testing.T) {
	for _, real := range []bool{true, false} {
		for _, between := range []int{0, 2} {
			name := fmt.Sprintf("entrylog=%v/adds-between=%d", real, between)
			t.Run(name, func(t *testing.T) {
				env := newBKEnvWith(t, real)
				ctx := context.Background()
				topic := "public/default/persistent/crashes"
				ml, err := env.factory(t, Config{}).Open(ctx, topic)
				if err != nil {
					t.Fatal(err)
				}
				var want []string
				add := func(n int) {
					for range n {
						m := fmt.Sprintf("m%d", len(want))
						addWait(t, ml, m)
						want = append(want, m)
					}
				}
				add(5)
				for crash := 1; crash <= 4; crash++ {
					env.stopBookie()
					env.startBookie()
					if between == 0 && crash%2 == 1 {
						continue // crash again right after the restart
					}
					// Reopen with a new factory (as a new broker would) and
					// read everything from the start.
					if ml, err = env.factory(t, Config{}).Open(ctx, topic); err != nil {
						t.Fatalf("crash %d: reopen: %v", crash, err)
					}
					c, err := ml.OpenCursor(ctx, fmt.Sprint("sub", crash), CursorOptions{Initial: Earliest})
					if err != nil {
						t.Fatalf("crash %d: open cursor: %v", crash, err)
					}
					if got := readAll(t, c); !slices.Equal(got, want) {
						t.Fatalf("crash %d: read %v, want %v", crash, got, want)
					}
					add(between)
				}
			})
		}
	}
}

// TestBKBookieCrashDuringAdds crashes the bookie while adds are in flight:
// every add acknowledged must be read back after the restart. The crash
// used to clone the disks first and then take the bookie off the
// transport, so adds it made durable in between were acknowledged but
// missing from the image.
func TestBKBookieCrashDuringAdds(t *testing.T) {
	for round := range 10 {
		env := newBKEnvWith(t, true)
		ctx := context.Background()
		topic := fmt.Sprintf("public/default/persistent/inflight-%d", round)
		ml, err := env.factory(t, Config{}).Open(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		acked := map[string]bool{}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				m := fmt.Sprint("m", i)
				done := make(chan struct{})
				ml.AddEntry([]byte(m), func(_ Position, err error) {
					if err == nil {
						mu.Lock()
						acked[m] = true
						mu.Unlock()
					}
					close(done)
				})
				if i%4 == 3 {
					<-done
				}
			}
		}()
		time.Sleep(time.Duration(5+round) * time.Millisecond)
		env.stopBookie()
		close(stop)
		wg.Wait()
		env.startBookie()
		ml2, err := env.factory(t, Config{}).Open(ctx, topic)
		if err != nil {
			t.Fatalf("round %d: reopen: %v", round, err)
		}
		c, err := ml2.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, m := range readAll(t, c) {
			got[m] = true
		}
		mu.Lock()
		for m := range acked {
			if !got[m] {
				t.Fatalf("round %d: %s was acknowledged before the crash but is not stored (%d acknowledged, %d read)", round, m, len(acked), len(got))
			}
		}
		mu.Unlock()
		env.stopBookie()
	}
}
