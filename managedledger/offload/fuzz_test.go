package offload

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// FuzzOpen fuzzes every decoder of the format, on the same input:
//   - the whole input as a copy's file: it either opens and reads back as
//     exactly the copy it encodes (re-encoding gives the same bytes), or
//     fails with ErrCorrupt; never a panic, another error or wrong data;
//   - its prefix as a header, and the input as an index and footer: what
//     the decoders accept re-encodes to the same bytes.
//
// One fuzz target, so that go test -fuzz=Fuzz runs without naming it.
func FuzzOpen(f *testing.F) {
	good := encodeCopy(5, map[string]string{"k": "v"}, [][]byte{[]byte("hello"), {}, []byte("world!")})
	for _, seed := range [][]byte{
		good,
		encodeCopy(5, nil, nil),
		encodeCopy(5, map[string]string{"a": "<&>"}, [][]byte{{}}),
		encodeCopy(6, nil, [][]byte{[]byte("other ledger")}),
		good[:len(good)-1],
		good[:headerFixedSize+footerSize],
		append(bytes.Clone(good), 0),
		encodeHeader(7, []byte(`{"a":"b"}`)),
		encodeHeader(7, []byte(`null`)),
		encodeTrailer(3, []uint64{30, 50}, 70, 8),
		encodeTrailer(3, nil, 30, 0),
		{},
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checkOpenDecodes(t, data)
		checkHeaderDecodes(t, data)
		checkTrailerDecodes(t, data)
	})
}

// checkOpenDecodes stores data as a copy and opens and reads it.
func checkOpenDecodes(t *testing.T, data []byte) {
	k := Key{ManagedLedger: "t", LedgerID: 5, UID: "u"}
	o, mem := newMemFS(t, Config{})
	writeFile(t, o, mem, k, data)
	r, err := o.Open(context.Background(), k)
	if err != nil {
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("open: %v, want ErrCorrupt", err)
		}
		return
	}
	defer r.Close()
	var payloads [][]byte
	if r.LastEntryID() >= 0 {
		ents, err := r.Read(context.Background(), 0, r.LastEntryID())
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("read: %v, want ErrCorrupt", err)
			}
			return
		}
		for _, e := range ents {
			payloads = append(payloads, e.Payload)
		}
	}
	if again := encodeCopy(k.LedgerID, r.(MetaReader).Meta(), payloads); !bytes.Equal(again, data) {
		t.Fatalf("accepted a file that is not the encoding of what it read back")
	}
}

// checkHeaderDecodes decodes the header data starts with, if its prefix
// announces one that fits.
func checkHeaderDecodes(t *testing.T, data []byte) {
	metaLen, reason := decodeHeaderPrefix(data)
	if reason != "" || int64(len(data)) < headerFixedSize+metaLen {
		return
	}
	b := data[:headerFixedSize+metaLen]
	h, reason := decodeHeader(b)
	if reason != "" {
		return
	}
	metaJSON, err := encodeMeta(h.meta)
	if err != nil {
		t.Fatal(err)
	}
	if again := encodeHeader(h.ledgerID, metaJSON); !bytes.Equal(again, b) || h.size != int64(len(b)) {
		t.Fatalf("header %x decodes to %+v which encodes to %x", b, h, again)
	}
}

// checkTrailerDecodes takes data as an index and footer at the end of a
// file whose records end where the footer says.
func checkTrailerDecodes(t *testing.T, data []byte) {
	if len(data) < footerSize {
		return
	}
	fb := data[len(data)-footerSize:]
	indexOffset := le.Uint64(fb)
	if indexOffset > 1<<50 {
		return
	}
	ft, reason := decodeFooter(fb, int64(indexOffset)+int64(len(data)))
	if reason != "" {
		return
	}
	index := data[:len(data)-footerSize]
	first := ft.indexOffset
	if ft.entryCount > 0 {
		first = le.Uint64(index)
	}
	if reason := checkIndex(ft, index, fb, first); reason != "" {
		return
	}
	offsets := make([]uint64, ft.entryCount)
	for i := range offsets {
		offsets[i] = le.Uint64(index[i*indexEntrySize:])
	}
	if again := encodeTrailer(ft.ledgerID, offsets, ft.indexOffset, ft.totalLength); !bytes.Equal(again, data) {
		t.Fatalf("trailer %x accepted but encodes to %x", data, again)
	}
}
