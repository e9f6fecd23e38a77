package faultstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/faultstore"
	"github.com/magnetar-io/magnetar/metadata/metadatatest"
)

// With nothing injected the wrapper is a conforming store.
func TestPassThroughConformance(t *testing.T) {
	metadatatest.Run(t, func(t *testing.T) metadatatest.Harness {
		srv := metadata.NewMemoryServer()
		return metadatatest.Harness{
			NewSession: func(t *testing.T) metadata.Store {
				s := faultstore.Wrap(srv.NewSession(), faultstore.None)
				t.Cleanup(func() { s.Close() })
				return s
			},
			Expire: func(t *testing.T, s metadata.Store) { srv.ExpireSession(s.(*faultstore.Store).Unwrap()) },
		}
	})
}

// workload touches every kind of operation; the sweep checks that a
// failure injected into any one of them surfaces as an injected error.
func workload(ctx context.Context, s metadata.Store) error {
	if _, _, err := s.Create(ctx, "/a/b", []byte("1"), metadata.CreateOptions{}); err != nil {
		return err
	}
	if _, err := s.Put(ctx, "/a/b", []byte("2"), 0); err != nil {
		return err
	}
	if _, _, err := s.Get(ctx, "/a/b"); err != nil {
		return err
	}
	if _, _, err := s.Exists(ctx, "/a/b"); err != nil {
		return err
	}
	if _, err := s.Children(ctx, "/a"); err != nil {
		return err
	}
	w, err := s.Watch(ctx, "/a")
	if err != nil {
		return err
	}
	w.Close()
	return s.Delete(ctx, "/a/b", -1)
}

func TestSweepFailures(t *testing.T) {
	ctx := context.Background()
	for n := int64(0); ; n++ {
		s := faultstore.Wrap(metadata.NewMemoryServer().NewSession(), faultstore.AtIndex(n, faultstore.Fault{Fail: true, Err: metadata.ErrSessionLost}))
		err := workload(ctx, s)
		s.Close()
		if err == nil {
			if n != 7 {
				t.Fatalf("workload ran clean with op #%d failing; want 7 ops", n)
			}
			return
		}
		var ie *faultstore.InjectedError
		if !errors.As(err, &ie) || ie.Index != n || !errors.Is(err, faultstore.ErrInjected) || !errors.Is(err, metadata.ErrSessionLost) {
			t.Fatalf("op #%d failing surfaced as %v", n, err)
		}
	}
}

func TestOnPathDelayAndFailure(t *testing.T) {
	ctx := context.Background()
	inner := metadata.NewMemoryServer().NewSession()
	defer inner.Close()
	_, _, _ = inner.Create(ctx, "/ml/t/slow", []byte("x"), metadata.CreateOptions{})
	_, _, _ = inner.Create(ctx, "/ml/t/bad", []byte("x"), metadata.CreateOptions{})
	s := faultstore.Wrap(inner, faultstore.Any(
		faultstore.OnPath("/ml/*/slow", faultstore.Fault{Delay: 100 * time.Millisecond}, faultstore.OpGet),
		faultstore.OnPath("/ml/t/bad", faultstore.Fault{Fail: true}),
	))
	start := time.Now()
	if _, _, err := s.Get(ctx, "/ml/t/slow"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("delayed get took %v", d)
	}
	if _, err := s.Put(ctx, "/ml/t/slow", nil, -1); err != nil { // puts are not delayed
		t.Fatal(err)
	}
	if _, _, err := s.Get(ctx, "/ml/t/bad"); !errors.Is(err, faultstore.ErrInjected) {
		t.Fatalf("get of a failing path: %v", err)
	}
	short, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if _, _, err := s.Get(short, "/ml/t/slow"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a delay past the context's deadline: %v", err)
	}
}

func TestStaleReads(t *testing.T) {
	ctx := context.Background()
	stale := faultstore.NewToggle(faultstore.OnPath("/n", faultstore.Fault{Stale: true}, faultstore.Reads...))
	stale.Set(false)
	s := faultstore.Wrap(metadata.NewMemoryServer().NewSession(), stale)
	defer s.Close()
	if _, _, err := s.Create(ctx, "/n/a", []byte("v0"), metadata.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale.Set(true)
	if ok, _, err := s.Exists(ctx, "/n/a"); err != nil || ok {
		t.Fatalf("stale exists after create: %v %v; want absent", ok, err)
	}
	if kids, err := s.Children(ctx, "/n"); err != nil || len(kids) != 0 {
		t.Fatalf("stale children after create: %v %v", kids, err)
	}
	stale.Set(false)
	if _, err := s.Put(ctx, "/n/a", []byte("v1"), 0); err != nil {
		t.Fatal(err)
	}
	stale.Set(true)
	v, st, err := s.Get(ctx, "/n/a")
	if err != nil || string(v) != "v0" || st.Version != 0 {
		t.Fatalf("stale get after put: %q v%d %v; want v0 at version 0", v, st.Version, err)
	}
	stale.Set(false)
	if v, _, _ := s.Get(ctx, "/n/a"); string(v) != "v1" {
		t.Fatalf("fresh get: %q", v)
	}
}

// Random faults are reproducible for a seed.
func TestRandomIsSeeded(t *testing.T) {
	run := func(seed uint64) string {
		inj := faultstore.Random(seed, 0.3, faultstore.Fault{Fail: true})
		out := ""
		for i := range int64(64) {
			_, ok := inj.Inject(faultstore.OpGet, "/x", i)
			out += fmt.Sprint(map[bool]int{false: 0, true: 1}[ok])
		}
		return out
	}
	if a, b := run(7), run(7); a != b {
		t.Fatalf("seed 7 gave %s then %s", a, b)
	}
	if run(7) == run(8) {
		t.Fatal("seeds 7 and 8 gave the same faults")
	}
}

func TestTimes(t *testing.T) {
	inj := faultstore.Times(2, faultstore.OnPath("/x", faultstore.Fault{Fail: true}))
	n := 0
	for i := range int64(5) {
		if _, ok := inj.Inject(faultstore.OpGet, "/x", i); ok {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("Times(2) injected %d faults", n)
	}
}
