package offload

import (
	"context"
	"errors"
	"testing"
)

var errInjected = errors.New("test: injected")

func TestFaulty(t *testing.T) {
	ctx := context.Background()
	payloads := [][]byte{[]byte("a"), []byte("b"), []byte("c")}
	for _, op := range []string{OpOffload, OpSourceRead, OpOpen, OpRead, OpDelete} {
		t.Run(op, func(t *testing.T) {
			inner, _ := newMemFS(t, Config{BatchEntries: 1})
			fail := false
			reads := 0
			o := NewFaulty(inner, func(got string, k Key) error {
				if got == OpSourceRead {
					reads++
				}
				// Mid-copy: let the first source read through.
				if fail && got == op && (op != OpSourceRead || reads > 1) {
					return errInjected
				}
				return nil
			})
			if o.Driver() != DriverFilesystem {
				t.Fatalf("driver %q", o.Driver())
			}
			k := testKey(1)
			fail = op == OpOffload || op == OpSourceRead
			err := o.Offload(ctx, k, map[string]string{"m": "1"}, newSource(1, payloads))
			if fail {
				if !errors.Is(err, errInjected) {
					t.Fatalf("offload: %v, want the injected error", err)
				}
				if _, err := inner.Open(ctx, k); !errors.Is(err, ErrNotFound) {
					t.Fatalf("a failed offload left a copy: %v", err)
				}
				if names := listDir(t, inner, k); len(names) != 0 {
					t.Fatalf("a failed offload left %v", names)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			fail = true
			r, err := o.Open(ctx, k)
			if op == OpOpen {
				if !errors.Is(err, errInjected) {
					t.Fatalf("open: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if m := r.(MetaReader).Meta(); m["m"] != "1" {
				t.Fatalf("meta through the wrapper: %v", m)
			}
			if _, err := r.Read(ctx, 0, 2); (op == OpRead) != errors.Is(err, errInjected) {
				t.Fatalf("read: %v", err)
			}
			if err := o.Delete(ctx, k); (op == OpDelete) != errors.Is(err, errInjected) {
				t.Fatalf("delete: %v", err)
			}
		})
	}
}

func TestFaultyNilInject(t *testing.T) {
	o := NewFaulty(NewMemory(), nil)
	k := testKey(2)
	if err := o.Offload(context.Background(), k, nil, newSource(2, [][]byte{[]byte("x")})); err != nil {
		t.Fatal(err)
	}
	checkCopy(t, o, k, [][]byte{[]byte("x")}, nil)
}
