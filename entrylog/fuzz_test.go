package entrylog

import (
	"bytes"
	"testing"
)

// FuzzDecodeRecord: the record decoder never panics or reads past its
// input, and what it accepts re-encodes to the same bytes (so a record is
// accepted only whole and intact, checksum included).
func FuzzDecodeRecord(f *testing.F) {
	good := encodeRecord(7, 42, []byte("hello, entry log"))
	f.Add(good)
	f.Add(encodeRecord(-1, 0, nil))
	f.Add(good[:RecordHeaderSize+3])
	f.Add(append(append([]byte{}, good...), encodeRecord(7, 43, []byte("next"))...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		rec, n, reason := decodeRecord(b)
		if reason != "" {
			if n != 0 || rec.payload != nil {
				t.Fatalf("rejected record (%s) still returned %d bytes", reason, n)
			}
			return
		}
		if n > len(b) || n != RecordHeaderSize+len(rec.payload) {
			t.Fatalf("accepted %d bytes of %d, payload %d", n, len(b), len(rec.payload))
		}
		if again := encodeRecord(rec.ledgerID, rec.entryID, rec.payload); !bytes.Equal(again, b[:n]) {
			t.Fatalf("accepted a record that does not re-encode to itself")
		}
		// Every record split at every byte is rejected whole: a torn
		// record never decodes.
		if _, _, r := decodeRecord(b[:n-1]); n > 0 && r == "" {
			t.Fatalf("accepted a record one byte short")
		}
	})
}

// FuzzDecodeState: the ledger-state decoder never panics, and what it
// accepts re-encodes to the same bytes.
func FuzzDecodeState(f *testing.F) {
	f.Add(encodeState(&ledgerState{}))
	f.Add(encodeState(&ledgerState{masterKey: []byte("key"), fenced: true, explicitLAC: []byte{1, 2, 3}}))
	f.Add(encodeState(&ledgerState{masterKey: []byte{}, explicitLAC: []byte{}}))
	f.Add([]byte{1, 2, 200})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, reason := decodeState(b)
		if reason != "" {
			return
		}
		if again := encodeState(st); !bytes.Equal(again, b) {
			t.Fatalf("state %x decodes to %+v which encodes to %x", b, st, again)
		}
	})
}

// FuzzDecodeLogHeader: the header decoder never panics; an accepted header
// is the encoding of what it decoded.
func FuzzDecodeLogHeader(f *testing.F) {
	good := logHeader{logID: 3, created: 1234}.encode()
	f.Add(good[:logHeaderUsed])
	f.Add(good[:10])
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := decodeLogHeader(b, "fuzz")
		if err != nil {
			return
		}
		if again := h.encode(); !bytes.Equal(again[:logHeaderUsed], b[:logHeaderUsed]) {
			t.Fatalf("header %x decodes to %+v, which encodes differently", b[:logHeaderUsed], h)
		}
	})
}

// FuzzDecodeLocation: the index value decoder never panics and accepts
// only what it would encode.
func FuzzDecodeLocation(f *testing.F) {
	f.Add(encodeLocation(location{logID: 1, offset: LogHeaderSize, length: 10}))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		loc, ok := decodeLocation(b)
		if ok && !bytes.Equal(encodeLocation(loc), b) {
			t.Fatalf("location %x decodes to %v", b, loc)
		}
	})
}
