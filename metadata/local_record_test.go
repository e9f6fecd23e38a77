package metadata

import (
	"bytes"
	"math"
	"testing"
	"time"
)

func sameRecord(a, b *memNode) bool {
	return a.version == b.version && a.cversion == b.cversion && a.created.Equal(b.created) &&
		a.modified.Equal(b.modified) && bytes.Equal(a.value, b.value)
}

func TestRecordRoundTrip(t *testing.T) {
	for _, n := range []*memNode{
		{},
		{version: math.MaxInt64, cversion: math.MaxInt64, created: time.UnixMilli(math.MinInt64),
			modified: time.UnixMilli(math.MaxInt64), value: bytes.Repeat([]byte{0xff}, MaxValueSize)},
		{version: 3, cversion: 9, created: time.UnixMilli(-1), modified: time.UnixMilli(1_700_000_000_000), value: []byte("v")},
	} {
		got, err := decodeRecord(encodeRecord(n))
		if err != nil || !sameRecord(got, n) {
			t.Fatalf("round trip of %+v: %+v, %v", n, got, err)
		}
	}
	if _, err := decodeRecord(append([]byte{recordFormat, 0, 0, 0, 0}, make([]byte, MaxValueSize+1)...)); err == nil {
		t.Fatal("oversized value accepted")
	}
}

// FuzzDecodeRecord: decoding never panics, and whatever decodes re-encodes
// to a record that decodes to the same node.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(encodeRecord(&memNode{version: 3, cversion: 7, created: time.UnixMilli(1), modified: time.UnixMilli(2), value: []byte("v")}))
	f.Add([]byte{recordFormat, 0, 0, 0, 0})
	f.Add([]byte{recordFormat, 0x80})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := decodeRecord(b)
		if err != nil {
			return
		}
		again, err := decodeRecord(encodeRecord(n))
		if err != nil || !sameRecord(n, again) {
			t.Fatalf("%x decodes to %+v, which re-decodes to %+v, %v", b, n, again, err)
		}
	})
}
