package journal

import (
	"errors"
	"testing"

	"github.com/magnetar-io/magnetar/engine"
)

// writeEntries writes n entries of ledger 1 (one group each) and closes.
func writeEntries(t *testing.T, fs engine.FS, n int64) {
	t.Helper()
	j, _ := openT(t, fs, Options{})
	for e := int64(0); e < n; e++ {
		if _, err := addSync(t, j, 1, e, payloadFor(1, e, 2000)); err != nil {
			t.Fatal(err)
		}
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
}

func flipByte(t *testing.T, fs engine.FS, name string, off int64) {
	t.Helper()
	f, err := fs.OpenReadWrite(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAtSync([][]byte{b}, off); err != nil {
		t.Fatal(err)
	}
}

// A damaged group followed by groups written after it was durable is
// corruption: replay fails and names the place, it never skips the group.
func TestMidFileDamageIsCorruption(t *testing.T) {
	fs := engine.NewMem()
	writeEntries(t, fs, 6)
	flipByte(t, fs, "/journal/"+fileName(1), 2*BlockSize+groupHeaderSize+recordHeaderSize+100)
	_, err := Open(fs, "/journal", Options{}, func(Entry) error { return nil })
	if !errors.Is(err, engine.ErrCorruption) {
		t.Fatalf("replay over a damaged durable group: %v", err)
	}
	t.Log(err)
}

// Damage in the last group is a torn tail: everything before it replays,
// and the tail is cut so the next replay agrees.
func TestTornTailIsTruncated(t *testing.T) {
	fs := engine.NewMem()
	writeEntries(t, fs, 6)
	name := "/journal/" + fileName(1)
	flipByte(t, fs, name, 6*BlockSize+groupHeaderSize+recordHeaderSize+100)
	for round := 0; round < 2; round++ {
		j, got := openT(t, fs, Options{})
		j.Close()
		if len(got) != 5 || got[4].EntryID != 4 {
			t.Fatalf("round %d: replayed %d entries", round, len(got))
		}
	}
	st, err := fs.Stat(name)
	if err != nil || st.Size != 6*BlockSize {
		t.Fatalf("file not truncated at the torn group: size %d, %v", st.Size, err)
	}
}

// A damaged file header is corruption, not an empty journal.
func TestDamagedHeaderIsCorruption(t *testing.T) {
	fs := engine.NewMem()
	writeEntries(t, fs, 2)
	writeEntries(t, fs, 2) // a second file, so the first is not the last
	flipByte(t, fs, "/journal/"+fileName(1), 20)
	_, err := Open(fs, "/journal", Options{}, func(Entry) error { return nil })
	if !errors.Is(err, engine.ErrCorruption) {
		t.Fatalf("damaged header: %v", err)
	}
}
