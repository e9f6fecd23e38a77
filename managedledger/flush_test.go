package managedledger

import (
	"context"
	"fmt"
	"testing"
)

// Flush makes a cursor's acknowledgements durable at once: a managed
// ledger opened by another owner right after (the first one crashed,
// nothing closed) finds them. Without it they wait for the background
// persist, here once a second at most, and a crash loses them.
func TestBKCursorFlush(t *testing.T) {
	for _, flush := range []bool{false, true} {
		t.Run(fmt.Sprint("flush=", flush), func(t *testing.T) {
			env := newBKEnv(t)
			ctx := context.Background()
			cfg := Config{MarkDeleteRate: 0.001} // the background persist would wait 1000 s
			f1, _ := env.factoryOver(t, env.tr, nil, cfg)
			name := fmt.Sprint("t/ns/persistent/flush-", flush)
			ml, err := f1.Open(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			cur, err := ml.OpenCursor(ctx, "s", CursorOptions{Initial: Earliest})
			if err != nil {
				t.Fatal(err)
			}
			var last Position
			for i := range 3 {
				last = addWait(t, ml, fmt.Sprint("m", i))
			}
			if err := cur.MarkDelete(ctx, last); err != nil {
				t.Fatal(err)
			}
			if flush {
				if err := cur.(Flusher).Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			// Crash: a second owner opens the managed ledger; the first
			// is never closed.
			f2, _ := env.factoryOver(t, env.tr, nil, cfg)
			ml2, err := f2.Open(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			defer ml2.Close(ctx)
			cur2, err := ml2.OpenCursor(ctx, "s", CursorOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := cur2.MarkDeletePosition().Compare(last) == 0; got != flush {
				t.Fatalf("after the crash the mark-delete position is %v (acknowledged %v): kept %v, want %v",
					cur2.MarkDeletePosition(), last, got, flush)
			}
		})
	}
}
