package engine_test

import (
	"bytes"
	"encoding/binary"
	"math/rand"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
)

// FuzzCrashModel decodes the input into a sequence of appends, overwrites,
// truncates and syncs on one file, then crashes with tearing. Whatever the
// sequence, the crashed file must equal the state at the last sync plus a
// prefix-torn replay of the later changes: it may never hold bytes that
// were not written, nor lose synced bytes that were not overwritten since.
func FuzzCrashModel(f *testing.F) {
	f.Add([]byte{0, 5, 1, 3, 2, 0, 3, 0, 7}, int64(1))
	f.Add([]byte{0, 200, 3, 0, 0, 10, 2, 4, 1, 1}, int64(9))
	f.Fuzz(func(t *testing.T, program []byte, seed int64) {
		fs := engine.NewMem()
		must(t, fs.SyncDir("/"))
		file, err := fs.Create("/f")
		must(t, err)
		must(t, fs.SyncDir("/"))
		var synced, current []byte
		var pending []func([]byte) []byte
		for len(program) >= 2 {
			op, arg := program[0]%4, int(program[1])
			program = program[2:]
			switch op {
			case 0: // append arg bytes
				data := bytes.Repeat([]byte{byte(len(current))}, arg)
				_, err := file.Append([][]byte{data})
				must(t, err)
				off := int64(len(current))
				current = applyWrite(current, off, data)
				pending = append(pending, func(b []byte) []byte { return applyWrite(b, off, data) })
			case 1: // overwrite at arg
				off := int64(arg % (len(current) + 1))
				data := make([]byte, 4)
				binary.LittleEndian.PutUint32(data, uint32(arg)+1)
				_, err := file.WriteAt([][]byte{data}, off)
				must(t, err)
				current = applyWrite(current, off, data)
				pending = append(pending, func(b []byte) []byte { return applyWrite(b, off, data) })
			case 2: // truncate
				size := int64(arg % (len(current) + 1))
				must(t, file.Truncate(size))
				current = current[:size]
				pending = append(pending, func(b []byte) []byte { return applyWrite(b[:min(int64(len(b)), size)], size, nil) })
			case 3:
				must(t, file.Datasync())
				synced, pending = append([]byte(nil), current...), nil
			}
		}
		got := readAll(t, fs.CrashClone(engine.CrashOptions{Rand: rand.New(rand.NewSource(seed))}), "/f")
		// Some whole prefix of pending changes, plus possibly a torn next
		// one, must explain got.
		state := append([]byte(nil), synced...)
		for i := 0; ; i++ {
			if bytes.Equal(state, got) || explainsTorn(state, got) {
				return
			}
			if i == len(pending) {
				t.Fatalf("crash left %d bytes that no prefix of the unsynced changes explains", len(got))
			}
			state = pending[i](state)
		}
	})
}

// explainsTorn reports whether got could be state plus a partial (torn)
// write: it agrees with state wherever state has bytes that got keeps, and
// only differs in one contiguous run.
func explainsTorn(state, got []byte) bool {
	first, last := -1, -1
	for i := 0; i < max(len(state), len(got)); i++ {
		var a, b byte
		inA, inB := i < len(state), i < len(got)
		if inA {
			a = state[i]
		}
		if inB {
			b = got[i]
		}
		if inA != inB || a != b {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	return first < 0 || last-first < 256+4
}
