package journal

import (
	"bytes"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
)

// FuzzRecords: the group decoder never panics, never reads past its
// input, and accepts a group only if every record checks out.
func FuzzRecords(f *testing.F) {
	j := &Journal{cur: &segment{id: 1}, opts: Options{}.withDefaults()}
	good := bytes.Join(j.encodeGroups([]group{{reqs: []*request{{ledgerID: 1, entryID: 2, payload: []byte("hello")},
		{ledgerID: 1, entryID: 3, payload: nil}}, bytes: 2*recordHeaderSize + 5}}), nil)
	if len(good) != BlockSize {
		f.Fatalf("an encoded group of %d bytes, want one block", len(good))
	}
	f.Add(good)
	f.Add([]byte{})
	f.Add(good[:groupHeaderSize+10])
	f.Fuzz(func(t *testing.T, b []byte) {
		h, reason := parseGroupHeader(b, 1)
		if reason != "" {
			return
		}
		end := groupHeaderSize + int(h.recordsLen)
		if end > len(b) {
			return
		}
		n := 0
		reason, err := parseRecords(b[groupHeaderSize:end], h.count, func(e Entry) error {
			n++
			if len(e.Payload) > int(h.recordsLen) {
				t.Fatalf("payload of %d bytes from %d bytes of records", len(e.Payload), h.recordsLen)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if reason == "" && n != int(h.count) {
			t.Fatalf("accepted group with %d records, header says %d", n, h.count)
		}
		if reason != "" && n != 0 {
			t.Fatalf("rejected group (%s) still delivered %d records", reason, n)
		}
	})
}

// FuzzReplayFile: replaying arbitrary bytes as a journal file either works
// or returns an error; it never panics or hangs.
func FuzzReplayFile(f *testing.F) {
	fs := engine.NewMem()
	j, err := Open(fs, "/j", Options{}, nil)
	if err != nil {
		f.Fatal(err)
	}
	for e := int64(0); e < 3; e++ {
		if _, err := addWait(j, 1, e); err != nil {
			f.Fatal(err)
		}
	}
	j.Close()
	seed, err := engine.ReadFile(fs, "/j/"+fileName(1))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(seed[:BlockSize+100])
	f.Fuzz(func(t *testing.T, b []byte) {
		fs := engine.NewMem()
		if err := fs.MkdirAll("/j", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := engine.WriteFileAtomic(fs, "/j/"+fileName(1), b); err != nil {
			t.Fatal(err)
		}
		j, err := Open(fs, "/j", Options{}, func(Entry) error { return nil })
		if err == nil {
			j.Close()
		}
	})
}
