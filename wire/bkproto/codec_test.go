package bkproto

import (
	"bytes"
	"errors"
	"testing"

	"github.com/magnetar-io/magnetar/wire"

	"pgregory.net/rapid"
)

func genRequest(t *rapid.T) *Request {
	op := Op(rapid.IntRange(int(OpAdd), int(OpBatchRead)).Draw(t, "op"))
	r := &Request{
		Op:        op,
		RequestID: rapid.Uint64().Draw(t, "id"),
		LedgerID:  rapid.Int64().Draw(t, "ledger"),
		EntryID:   rapid.Int64().Draw(t, "entry"),
	}
	key := rapid.SliceOfN(rapid.Byte(), 0, 40).Draw(t, "key")
	data := rapid.SliceOfN(rapid.Byte(), 0, 300).Draw(t, "data")
	switch op {
	case OpAdd:
		r.Flags = uint16(rapid.IntRange(0, 15).Draw(t, "flags")) & (FlagRecoveryAdd | FlagDeferredSync)
		r.MasterKey, r.Data = key, data
	case OpForceLedger:
		r.MasterKey = key
	case OpWriteLAC:
		r.MasterKey, r.Data, r.LAC = key, data, rapid.Int64().Draw(t, "lac")
	case OpRead:
		r.Flags = uint16(rapid.IntRange(0, 15).Draw(t, "flags")) & (FlagFence | FlagLongPoll)
		if r.Flags&FlagFence != 0 {
			r.MasterKey = key
		}
		if r.Flags&FlagLongPoll != 0 {
			r.PreviousLAC = rapid.Int64().Draw(t, "prev")
			r.TimeoutMillis = rapid.Uint32().Draw(t, "timeout")
		}
	case OpBatchRead:
		r.MaxCount, r.MaxBytes = rapid.Uint32().Draw(t, "count"), rapid.Uint32().Draw(t, "bytes")
	}
	return r
}

func frameOf(head, data []byte) []byte {
	return append(append([]byte{}, head...), data...)
}

func normReq(r *Request) Request {
	c := *r
	if len(c.MasterKey) == 0 {
		c.MasterKey = nil
	}
	if len(c.Data) == 0 {
		c.Data = nil
	}
	return c
}

func TestRequestRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genRequest(t)
		var data []byte
		if r.Op == OpAdd || r.Op == OpWriteLAC {
			data = r.Data
		}
		frame := frameOf(AppendRequest(nil, r), data)
		var got Request
		if err := DecodeRequest(frame, &got); err != nil {
			t.Fatalf("decode %+v: %v", r, err)
		}
		a, b := normReq(r), normReq(&got)
		if a.Op != b.Op || a.Flags != b.Flags || a.RequestID != b.RequestID || a.LedgerID != b.LedgerID ||
			a.EntryID != b.EntryID || !bytes.Equal(a.MasterKey, b.MasterKey) || !bytes.Equal(a.Data, b.Data) ||
			a.LAC != b.LAC || a.PreviousLAC != b.PreviousLAC || a.TimeoutMillis != b.TimeoutMillis ||
			a.MaxCount != b.MaxCount || a.MaxBytes != b.MaxBytes {
			t.Fatalf("round trip: sent %+v, got %+v", a, b)
		}
	})
}

func genResponse(t *rapid.T) *Response {
	r := &Response{
		Op:        Op(rapid.IntRange(int(OpAdd), int(OpBatchRead)).Draw(t, "op")),
		Status:    Status(rapid.IntRange(0, 10).Draw(t, "status")),
		RequestID: rapid.Uint64().Draw(t, "id"),
		LedgerID:  rapid.Int64().Draw(t, "ledger"),
		EntryID:   rapid.Int64().Draw(t, "entry"),
	}
	if r.Status != StatusOK {
		return r
	}
	switch r.Op {
	case OpRead:
		r.LAC, r.Data = rapid.Int64().Draw(t, "lac"), rapid.SliceOfN(rapid.Byte(), 0, 100).Draw(t, "data")
	case OpReadLAC:
		r.LAC = rapid.Int64().Draw(t, "lac")
		r.ExplicitLAC = rapid.SliceOfN(rapid.Byte(), 0, 50).Draw(t, "explicit")
		r.Data = rapid.SliceOfN(rapid.Byte(), 0, 100).Draw(t, "data")
	case OpInfo:
		r.FreeBytes, r.TotalBytes, r.InfoFlags = rapid.Uint64().Draw(t, "free"), rapid.Uint64().Draw(t, "total"), rapid.Uint32().Draw(t, "flags")
	case OpBatchRead:
		r.LAC = rapid.Int64().Draw(t, "lac")
		r.Entries = rapid.SliceOfN(rapid.SliceOfN(rapid.Byte(), 0, 60), 0, 20).Draw(t, "entries")
	}
	return r
}

// concat joins the buffers of one vectored write into the frame.
func concat(bufs [][]byte) []byte { return bytes.Join(bufs, nil) }

func sameEntries(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func TestResponseRoundTrip(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r := genResponse(t)
		frame := concat(ResponseBuffers(r))
		if !bytes.Equal(frame[:len(AppendResponse(nil, r))], AppendResponse(nil, r)) {
			t.Fatalf("ResponseBuffers does not start with AppendResponse's head")
		}
		var got Response
		if err := DecodeResponse(frame, &got); err != nil {
			t.Fatalf("decode %+v: %v", r, err)
		}
		if got.Op != r.Op || got.Status != r.Status || got.RequestID != r.RequestID || got.LedgerID != r.LedgerID ||
			got.EntryID != r.EntryID || got.LAC != r.LAC || !bytes.Equal(got.Data, r.Data) ||
			!bytes.Equal(got.ExplicitLAC, r.ExplicitLAC) || got.FreeBytes != r.FreeBytes ||
			got.TotalBytes != r.TotalBytes || got.InfoFlags != r.InfoFlags || !sameEntries(got.Entries, r.Entries) {
			t.Fatalf("round trip: sent %+v, got %+v", r, got)
		}
	})
}

// TestBatchReadLayout pins the documented bytes of a batch-read answer.
func TestBatchReadLayout(t *testing.T) {
	r := &Response{Op: OpBatchRead, RequestID: 9, LedgerID: 3, EntryID: 40, LAC: 41, Entries: [][]byte{[]byte("ab"), {}, []byte("c")}}
	frame := concat(ResponseBuffers(r))
	want := []byte{
		0, 0, 0, 28 + 12 + 6 + 4 + 5, // size
		Version, byte(OpBatchRead), 0, 0, // version, op, status OK
		0, 0, 0, 0, 0, 0, 0, 9, // request id
		0, 0, 0, 0, 0, 0, 0, 3, // ledger
		0, 0, 0, 0, 0, 0, 0, 40, // first entry
		0, 0, 0, 0, 0, 0, 0, 41, // lac
		0, 0, 0, 3, // count
		0, 0, 0, 2, 'a', 'b',
		0, 0, 0, 0,
		0, 0, 0, 1, 'c',
	}
	if !bytes.Equal(frame, want) {
		t.Fatalf("batch-read frame\n got %v\nwant %v", frame, want)
	}
	req := AppendRequest(nil, &Request{Op: OpBatchRead, RequestID: 9, LedgerID: 3, EntryID: 40, MaxCount: 256, MaxBytes: 4 << 20})
	if body := req[HeaderLen:]; !bytes.Equal(body, []byte{0, 0, 1, 0, 0, 0x40, 0, 0}) || len(req) != HeaderLen+8 {
		t.Fatalf("batch-read request body %v", body)
	}
}

func TestMalformedBatchRead(t *testing.T) {
	good := concat(ResponseBuffers(&Response{Op: OpBatchRead, LAC: 1, Entries: [][]byte{[]byte("abc"), []byte("de")}}))
	resize := func(b []byte) []byte { be.PutUint32(b, uint32(len(b)-4)); return b }
	edit := func(f func(b []byte) []byte) []byte { return resize(f(append([]byte{}, good...))) }
	cases := map[string][]byte{
		"no count":       edit(func(b []byte) []byte { return b[:HeaderLen+10] }),
		"count too high": edit(func(b []byte) []byte { be.PutUint32(b[HeaderLen+8:], 3); return b }),
		"huge count":     edit(func(b []byte) []byte { be.PutUint32(b[HeaderLen+8:], 1<<31); return b }),
		"entry cut":      edit(func(b []byte) []byte { return b[:len(b)-1] }),
		"length too big": edit(func(b []byte) []byte { be.PutUint32(b[HeaderLen+12:], 100); return b }),
		"trailing":       edit(func(b []byte) []byte { return append(b, 0) }),
		"error with body": edit(func(b []byte) []byte {
			be.PutUint16(b[6:], uint16(StatusNoEntry))
			return b
		}),
	}
	for name, frame := range cases {
		var r Response
		if err := DecodeResponse(frame, &r); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v (%d entries), want ErrMalformed", name, err, len(r.Entries))
		}
	}
	var r Request
	short := resize(AppendRequest(nil, &Request{Op: OpBatchRead})[:HeaderLen+4])
	if err := DecodeRequest(short, &r); !errors.Is(err, ErrMalformed) {
		t.Errorf("batch-read request without maxBytes: %v", err)
	}
}

// TestUnknownOp: a later op decodes as far as its header, so a bookie can
// answer it instead of closing the connection.
func TestUnknownOp(t *testing.T) {
	frame := AppendRequest(nil, &Request{Op: OpReadLAC, Flags: 0, RequestID: 5, LedgerID: 2, EntryID: 3})
	frame[5] = 200
	be.PutUint16(frame[6:], 0x8000) // a later op may have later flags
	var r Request
	err := DecodeRequest(frame, &r)
	if !errors.Is(err, ErrUnknownOp) || !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown op: %v, want ErrUnknownOp", err)
	}
	if r.Op != 200 || r.RequestID != 5 || r.LedgerID != 2 || r.EntryID != 3 {
		t.Fatalf("header of an unknown op: %+v", r)
	}
}

func TestMalformedRequests(t *testing.T) {
	good := frameOf(AppendRequest(nil, &Request{Op: OpAdd, RequestID: 7, LedgerID: 1, EntryID: 2, MasterKey: []byte("key")}), []byte("data"))
	cases := map[string][]byte{
		"short":         good[:HeaderLen-1],
		"size mismatch": append(append([]byte{}, good...), 0),
		"version":       func() []byte { b := append([]byte{}, good...); b[4] = 9; return b }(),
		"unknown op":    func() []byte { b := append([]byte{}, good...); b[5] = 99; return b }(),
		"unknown flag":  func() []byte { b := append([]byte{}, good...); b[6] = 0x80; return b }(),
		"key too long": func() []byte {
			b := append([]byte{}, good...)
			be.PutUint16(b[HeaderLen:], 5000)
			return b
		}(),
		"read trailing": func() []byte {
			b := AppendRequest(nil, &Request{Op: OpRead, LedgerID: 1})
			b = append(b, 1)
			be.PutUint32(b, uint32(len(b)-4))
			return b
		}(),
	}
	for name, frame := range cases {
		var r Request
		if err := DecodeRequest(frame, &r); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: got %v, want ErrMalformed", name, err)
		}
	}
}

func TestEntryHead(t *testing.T) {
	b := make([]byte, EntryHeadLen+3)
	PutEntryHead(b, EntryHead{LedgerID: 5, EntryID: -1, LAC: 9})
	h, err := ParseEntryHead(b)
	if err != nil || h != (EntryHead{5, -1, 9}) {
		t.Fatalf("got %+v, %v", h, err)
	}
	if _, err := ParseEntryHead(b[:10]); !errors.Is(err, ErrMalformed) {
		t.Fatalf("short head: %v", err)
	}
}

// FuzzDecodeRequest: any bytes decode or fail with ErrMalformed, and a
// decoded request re-encodes to the same frame.
func FuzzDecodeRequest(f *testing.F) {
	f.Add(frameOf(AppendRequest(nil, &Request{Op: OpAdd, MasterKey: []byte("k")}), []byte("entry")))
	f.Add(AppendRequest(nil, &Request{Op: OpRead, Flags: FlagFence | FlagLongPoll, MasterKey: []byte("k"), PreviousLAC: 3, TimeoutMillis: 10}))
	f.Add(frameOf(AppendRequest(nil, &Request{Op: OpWriteLAC, MasterKey: []byte("k"), LAC: 4}), []byte("lac")))
	f.Add(AppendRequest(nil, &Request{Op: OpInfo}))
	f.Add(AppendRequest(nil, &Request{Op: OpBatchRead, EntryID: 5, MaxCount: 256, MaxBytes: 4 << 20}))
	f.Fuzz(func(t *testing.T, frame []byte) {
		var r Request
		err := DecodeRequest(frame, &r)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		var data []byte
		if r.Op == OpAdd || r.Op == OpWriteLAC {
			data = r.Data
		}
		if again := frameOf(AppendRequest(nil, &r), data); !bytes.Equal(again, frame) {
			t.Fatalf("re-encoded %x, decoded from %x", again, frame)
		}
	})
}

// FuzzDecodeResponse: any bytes decode or fail with ErrMalformed, and a
// decoded response re-encodes to the same frame.
func FuzzDecodeResponse(f *testing.F) {
	f.Add(frameOf(AppendResponse(nil, &Response{Op: OpRead, LAC: 3}), []byte("entry")))
	f.Add(frameOf(AppendResponse(nil, &Response{Op: OpReadLAC, ExplicitLAC: []byte("x")}), []byte("e")))
	f.Add(AppendResponse(nil, &Response{Op: OpInfo, FreeBytes: 1}))
	f.Add(AppendResponse(nil, &Response{Op: OpAdd, Status: StatusFenced}))
	f.Add(concat(ResponseBuffers(&Response{Op: OpBatchRead, LAC: 7, Entries: [][]byte{[]byte("one"), {}, []byte("three")}})))
	f.Add(concat(ResponseBuffers(&Response{Op: OpBatchRead, Entries: [][]byte{}})))
	f.Add(AppendResponse(nil, &Response{Op: OpBatchRead, Status: StatusNoEntry}))
	f.Fuzz(func(t *testing.T, frame []byte) {
		var r Response
		if err := DecodeResponse(frame, &r); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error not ErrMalformed: %v", err)
			}
			return
		}
		if again := concat(ResponseBuffers(&r)); !bytes.Equal(again, frame) {
			t.Fatalf("re-encoded %x, decoded from %x", again, frame)
		}
	})
}

// TestFrameLimitsChain: the bookie frame limit is derived from the largest
// entry a broker stores, and is strictly above what its add needs with
// the longest master key and our digest's overhead (issue 16, defect 4).
func TestFrameLimitsChain(t *testing.T) {
	maxEntry := wire.MaxEntrySize(wire.DefaultMaxMessageSize)
	if DefaultMaxFrameSize != MaxFrameSize(maxEntry) {
		t.Fatalf("DefaultMaxFrameSize %d, derived %d", DefaultMaxFrameSize, MaxFrameSize(maxEntry))
	}
	if maxEntry <= wire.DefaultMaxMessageSize {
		t.Fatalf("max entry %d not above maxMessageSize", maxEntry)
	}
	// The largest entry with a 64-byte client head and digest, the longest key.
	r := &Request{Op: OpAdd, MasterKey: make([]byte, MaxMasterKeyLen), Data: make([]byte, maxEntry+64)}
	if r.FrameSize() >= DefaultMaxFrameSize {
		t.Fatalf("an add of the largest entry is %d bytes, limit %d", r.FrameSize(), DefaultMaxFrameSize)
	}
	if got := len(AppendRequest(nil, r)) - 4 + len(r.Data); got != r.FrameSize() {
		t.Fatalf("FrameSize %d, encoded %d", r.FrameSize(), got)
	}
}
