package managedledger

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/ledger/ledgertest"
	"github.com/magnetar-io/magnetar/metadata"
)

// answerLosingStore applies a Put to one path and then answers it as if
// the caller's context had ended first (the write landed; its answer did
// not), once armed.
type answerLosingStore struct {
	metadata.Store
	mu       sync.Mutex
	path     string
	failGets int // the next Gets fail (no answer either)
}

func (s *answerLosingStore) Get(ctx context.Context, path string) ([]byte, metadata.Stat, error) {
	s.mu.Lock()
	fail := s.failGets > 0
	if fail {
		s.failGets--
	}
	s.mu.Unlock()
	if fail {
		return nil, metadata.Stat{}, fmt.Errorf("metadata get %s: %w", path, context.DeadlineExceeded)
	}
	return s.Store.Get(ctx, path)
}

func (s *answerLosingStore) loseNextPut(path string) {
	s.mu.Lock()
	s.path = path
	s.mu.Unlock()
}

func (s *answerLosingStore) Put(ctx context.Context, path string, value []byte, version int64) (metadata.Stat, error) {
	s.mu.Lock()
	lose := s.path == path
	if lose {
		s.path = ""
	}
	s.mu.Unlock()
	st, err := s.Store.Put(ctx, path, value, version)
	if lose && err == nil {
		return metadata.Stat{}, fmt.Errorf("metadata put %s: %w", path, context.Canceled)
	}
	return st, err
}

// lossyFactory is managed ledgers over one in-process bookie whose
// metadata store can lose answers.
func lossyFactory(t *testing.T) (*BKFactory, *answerLosingStore) {
	t.Helper()
	env := newBKEnv(t)
	cl, store := ledgertest.Client(t, env.meta, env.tr)
	lossy := &answerLosingStore{Store: store}
	// CloseTimeout long enough that a close on a loaded machine persists
	// cursors to their ledgers, not to their nodes (persistClosing): the
	// tests lose the answer of the put that points a node at a ledger.
	f, err := NewBKFactory(Config{Store: lossy, Ledgers: cl, Logger: quiet(), MarkDeleteRate: 50, CloseTimeout: 60 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return f, lossy
}

// A metadata write whose answer is lost (its caller's context ended after
// the store applied it) is not another owner taking the managed ledger
// over: its next writes go on, and so do its appends. Found by the fault
// suite (txn-pipeline seed 1, 5 Dec): a pending-acknowledgement save
// canceled by its closing connection left the topic's rightful owner with
// a version one behind the node, the next save called that a takeover and
// fenced the managed ledger, and every later transaction on the topic
// failed until the bundle moved.
func TestBKLostMetadataAnswerIsNotATakeover(t *testing.T) {
	f, lossy := lossyFactory(t)
	ctx := context.Background()
	name := "public/default/persistent/lost-answer"
	ml, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	addWait(t, ml, "before")
	lossy.loseNextPut(mlPath(name))
	_ = ml.UpdateProperties(ctx, map[string]string{"k": "1"}, nil) // landed; its answer lost
	if err := ml.UpdateProperties(ctx, map[string]string{"k": "2"}, nil); err != nil {
		t.Fatalf("the write after a lost answer: %v", err)
	}
	addWait(t, ml, "after")

	lossy.loseNextPut(mlPath(name))
	_ = ml.UpdateProperties(ctx, map[string]string{"k": "3"}, nil)
	if c, ok := ml.(interface{ checkOwner(context.Context) error }); ok {
		if err := c.checkOwner(ctx); err != nil {
			t.Fatalf("owner check after a lost answer: %v", err)
		}
	}
	if err := ml.UpdateProperties(ctx, map[string]string{"k": "4"}, nil); err != nil {
		t.Fatalf("the write after a lost answer and an owner check: %v", err)
	}

	// The read-back fails too: the write reports an error, and the next
	// one settles the question first.
	lossy.loseNextPut(mlPath(name))
	lossy.mu.Lock()
	lossy.failGets = 1
	lossy.mu.Unlock()
	if err := ml.UpdateProperties(ctx, map[string]string{"k": "5"}, nil); err == nil {
		t.Fatal("a write whose answer was lost and could not be read back reported success")
	}
	if err := ml.UpdateProperties(ctx, map[string]string{"k": "4"}, nil); err != nil {
		t.Fatalf("the write after an unresolved lost answer: %v", err)
	}
	addWait(t, ml, "last")
	if err := ml.Close(ctx); err != nil {
		t.Fatal(err)
	}
	ml, err = f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if got := ml.Properties()["k"]; got != "4" {
		t.Fatalf("property k after reopening: %q, want 4", got)
	}
}

// The same for a cursor's node: a lost answer to pointing it at a new
// cursor ledger is read back, and the ledger it names is kept.
func TestBKLostCursorNodeAnswerKeepsItsLedger(t *testing.T) {
	f, lossy := lossyFactory(t)
	ctx := context.Background()
	name := "public/default/persistent/lost-cursor-answer"
	ml, err := f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	// The cursor's node is created (not put) by OpenCursor; its first put
	// is the one that points it at the cursor's first ledger, whether a
	// persist tick or the close makes it: armed now, that write loses its
	// answer whatever the timing.
	lossy.loseNextPut(cursorPath(name, "sub"))
	c, err := ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	var last Position
	for i := range 5 {
		last = addWait(t, ml, fmt.Sprint("m", i))
	}
	readAll(t, c)
	if err := c.MarkDelete(ctx, last); err != nil {
		t.Fatal(err)
	}
	if err := ml.Close(ctx); err != nil { // persists the cursor: its node is pointed at a cursor ledger
		t.Fatalf("close after a cursor node write lost its answer: %v", err)
	}
	lossy.mu.Lock()
	unconsumed := lossy.path != ""
	lossy.mu.Unlock()
	if unconsumed {
		t.Fatal("no write pointed the cursor's node at a ledger before the close returned")
	}
	ml, err = f.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	c, err = ml.OpenCursor(ctx, "sub", CursorOptions{Initial: Earliest})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.MarkDeletePosition(); got != last {
		t.Fatalf("mark-delete after reopening: %v, want %v", got, last)
	}
	addWait(t, ml, "after")
}
