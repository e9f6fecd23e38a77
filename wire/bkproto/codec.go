package bkproto

import "fmt"

// Encoding writes everything but a message's trailing entry data into one
// buffer (the head) with a size prefix that counts the data too, so a
// sender writes the head and the data with one vectored write and entry
// bytes are never copied into a frame (ResponseBuffers).

// putHeader writes the 32-byte header; size is the frame's size prefix.
func putHeader(dst []byte, size int, op Op, flagsOrStatus uint16, requestID uint64, ledgerID, entryID int64) {
	be.PutUint32(dst[0:], uint32(size))
	dst[4] = Version
	dst[5] = byte(op)
	be.PutUint16(dst[6:], flagsOrStatus)
	be.PutUint64(dst[8:], requestID)
	be.PutUint64(dst[16:], uint64(ledgerID))
	be.PutUint64(dst[24:], uint64(entryID))
}

func grow(dst []byte, n int) ([]byte, []byte) {
	l := len(dst)
	if cap(dst)-l < n {
		nd := make([]byte, l, 2*cap(dst)+n)
		copy(nd, dst)
		dst = nd
	}
	dst = dst[:l+n]
	return dst, dst[l:]
}

// requestBodyLen is the length of r's body without Data.
func requestBodyLen(r *Request) int {
	switch r.Op {
	case OpAdd, OpForceLedger:
		return 2 + len(r.MasterKey)
	case OpWriteLAC:
		return 2 + len(r.MasterKey) + 8
	case OpBatchRead:
		return 8
	case OpRead:
		n := 0
		if r.Flags&FlagFence != 0 {
			n += 2 + len(r.MasterKey)
		}
		if r.Flags&FlagLongPoll != 0 {
			n += 12
		}
		return n
	}
	return 0
}

// FrameSize is the size field of r's frame: what a bookie compares with
// its frame limit.
func (r *Request) FrameSize() int {
	n := HeaderLen - 4 + requestBodyLen(r)
	if r.Op == OpAdd || r.Op == OpWriteLAC {
		n += len(r.Data)
	}
	return n
}

// AppendRequest appends r's head (header and body without Data) to dst.
// The frame is the head followed by r.Data (sent only for OpAdd and
// OpWriteLAC).

func AppendRequest(dst []byte, r *Request) []byte {
	data := 0
	if r.Op == OpAdd || r.Op == OpWriteLAC {
		data = len(r.Data)
	}
	n := HeaderLen + requestBodyLen(r)
	dst, b := grow(dst, n)
	putHeader(b, n-4+data, r.Op, r.Flags, r.RequestID, r.LedgerID, r.EntryID)
	p := b[HeaderLen:]
	putKey := func() {
		be.PutUint16(p, uint16(len(r.MasterKey)))
		copy(p[2:], r.MasterKey)
		p = p[2+len(r.MasterKey):]
	}
	switch r.Op {
	case OpAdd, OpForceLedger:
		putKey()
	case OpWriteLAC:
		putKey()
		be.PutUint64(p, uint64(r.LAC))
	case OpRead:
		if r.Flags&FlagFence != 0 {
			putKey()
		}
		if r.Flags&FlagLongPoll != 0 {
			be.PutUint64(p, uint64(r.PreviousLAC))
			be.PutUint32(p[8:], r.TimeoutMillis)
		}
	case OpBatchRead:
		be.PutUint32(p, r.MaxCount)
		be.PutUint32(p[4:], r.MaxBytes)
	}
	return dst
}

// responseBodyLen is the length of r's body without Data.
func responseBodyLen(r *Response) int {
	if r.Status != StatusOK {
		return 0
	}
	switch r.Op {
	case OpRead:
		return 8
	case OpReadLAC:
		return 12 + len(r.ExplicitLAC)
	case OpInfo:
		return 20
	case OpBatchRead:
		return 12
	}
	return 0
}

// responseTailLen is the length of what follows r's head in its frame.
func responseTailLen(r *Response) int {
	if r.Status != StatusOK {
		return 0
	}
	switch r.Op {
	case OpRead, OpReadLAC:
		return len(r.Data)
	case OpBatchRead:
		n := 0
		for _, e := range r.Entries {
			n += 4 + len(e)
		}
		return n
	}
	return 0
}

// AppendResponse appends r's head to dst. The frame is the head followed
// by its tail, which ResponseBuffers adds: r.Data of a successful OpRead
// or OpReadLAC, each entry of a successful OpBatchRead after its length.
func AppendResponse(dst []byte, r *Response) []byte {
	data := responseTailLen(r)
	n := HeaderLen + responseBodyLen(r)
	dst, b := grow(dst, n)
	putHeader(b, n-4+data, r.Op, uint16(r.Status), r.RequestID, r.LedgerID, r.EntryID)
	p := b[HeaderLen:]
	if r.Status != StatusOK {
		return dst
	}
	switch r.Op {
	case OpRead:
		be.PutUint64(p, uint64(r.LAC))
	case OpReadLAC:
		be.PutUint64(p, uint64(r.LAC))
		be.PutUint32(p[8:], uint32(len(r.ExplicitLAC)))
		copy(p[12:], r.ExplicitLAC)
	case OpInfo:
		be.PutUint64(p, r.FreeBytes)
		be.PutUint64(p[8:], r.TotalBytes)
		be.PutUint32(p[16:], r.InfoFlags)
	case OpBatchRead:
		be.PutUint64(p, uint64(r.LAC))
		be.PutUint32(p[8:], uint32(len(r.Entries)))
	}
	return dst
}

// ResponseBuffers encodes r as buffers for one vectored write: the head,
// then the stored data it refers to without copying it (a batch read's
// entry lengths share one small buffer).
func ResponseBuffers(r *Response) [][]byte {
	head := AppendResponse(make([]byte, 0, HeaderLen+24+len(r.ExplicitLAC)), r)
	if r.Status != StatusOK {
		return [][]byte{head}
	}
	switch r.Op {
	case OpRead, OpReadLAC:
		if len(r.Data) > 0 {
			return [][]byte{head, r.Data}
		}
	case OpBatchRead:
		bufs := make([][]byte, 0, 1+2*len(r.Entries))
		bufs = append(bufs, head)
		lens := make([]byte, 4*len(r.Entries))
		for i, e := range r.Entries {
			l := lens[4*i : 4*i+4]
			be.PutUint32(l, uint32(len(e)))
			bufs = append(bufs, l, e)
		}
		return bufs
	}
	return [][]byte{head}
}

// header checks and splits a whole frame (size prefix included).
func header(frame []byte) (body []byte, err error) {
	if len(frame) < HeaderLen {
		return nil, malformed("frame of %d bytes is shorter than the %d-byte header", len(frame), HeaderLen)
	}
	if size := int(be.Uint32(frame)); size != len(frame)-4 {
		return nil, malformed("size prefix %d does not match frame length %d", size, len(frame)-4)
	}
	if frame[4] != Version {
		return nil, malformed("protocol version %d, this build speaks %d", frame[4], Version)
	}
	return frame[HeaderLen:], nil
}

func takeKey(p []byte) (key, rest []byte, err error) {
	if len(p) < 2 {
		return nil, nil, malformed("master key length missing")
	}
	n := int(be.Uint16(p))
	if n > MaxMasterKeyLen {
		return nil, nil, malformed("master key of %d bytes (limit %d)", n, MaxMasterKeyLen)
	}
	if len(p) < 2+n {
		return nil, nil, malformed("master key of %d bytes truncated at %d", n, len(p)-2)
	}
	return p[2 : 2+n], p[2+n:], nil
}

// DecodeRequest decodes a whole request frame. Slices in r alias frame.
func DecodeRequest(frame []byte, r *Request) error {
	p, err := header(frame)
	if err != nil {
		return err
	}
	*r = Request{
		Op:        Op(frame[5]),
		Flags:     be.Uint16(frame[6:]),
		RequestID: be.Uint64(frame[8:]),
		LedgerID:  int64(be.Uint64(frame[16:])),
		EntryID:   int64(be.Uint64(frame[24:])),
	}
	if !r.Op.known() {
		// Before the flags: a later op may come with later flags.
		return fmt.Errorf("%w %d in request %d", ErrUnknownOp, uint8(r.Op), r.RequestID)
	}
	if r.Flags&^knownFlags != 0 {
		return malformed("%s request %d has unknown flags %#x", r.Op, r.RequestID, r.Flags&^knownFlags)
	}
	switch r.Op {
	case OpAdd:
		if r.MasterKey, r.Data, err = takeKey(p); err != nil {
			return err
		}
		return nil
	case OpForceLedger:
		r.MasterKey, p, err = takeKey(p)
	case OpWriteLAC:
		if r.MasterKey, p, err = takeKey(p); err != nil {
			return err
		}
		if len(p) < 8 {
			return malformed("write-lac request %d without its LAC", r.RequestID)
		}
		r.LAC, r.Data = int64(be.Uint64(p)), p[8:]
		return nil
	case OpRead:
		p, err = decodeReadBody(r, p)
	case OpBatchRead:
		if len(p) < 8 {
			return malformed("batch-read request %d without maxCount and maxBytes", r.RequestID)
		}
		r.MaxCount, r.MaxBytes, p = be.Uint32(p), be.Uint32(p[4:]), p[8:]
	}
	if err == nil && len(p) != 0 {
		err = malformed("%s request %d has %d trailing bytes", r.Op, r.RequestID, len(p))
	}
	return err
}

func decodeReadBody(r *Request, p []byte) ([]byte, error) {
	var err error
	if r.Flags&FlagFence != 0 {
		if r.MasterKey, p, err = takeKey(p); err != nil {
			return nil, err
		}
	}
	if r.Flags&FlagLongPoll != 0 {
		if len(p) < 12 {
			return nil, malformed("long-poll read %d without previous LAC and timeout", r.RequestID)
		}
		r.PreviousLAC = int64(be.Uint64(p))
		r.TimeoutMillis = be.Uint32(p[8:])
		p = p[12:]
	}
	return p, nil
}

// DecodeResponse decodes a whole response frame. Slices in r alias frame.
func DecodeResponse(frame []byte, r *Response) error {
	p, err := header(frame)
	if err != nil {
		return err
	}
	*r = Response{
		Op:        Op(frame[5]),
		Status:    Status(be.Uint16(frame[6:])),
		RequestID: be.Uint64(frame[8:]),
		LedgerID:  int64(be.Uint64(frame[16:])),
		EntryID:   int64(be.Uint64(frame[24:])),
	}
	if !r.Op.known() {
		return fmt.Errorf("%w %d in response %d", ErrUnknownOp, uint8(r.Op), r.RequestID)
	}
	if r.Status != StatusOK {
		if len(p) != 0 {
			return malformed("%s error response %d has a body", r.Op, r.RequestID)
		}
		return nil
	}
	switch r.Op {
	case OpRead:
		if len(p) < 8 {
			return malformed("read response %d without its LAC", r.RequestID)
		}
		r.LAC, r.Data = int64(be.Uint64(p)), p[8:]
		return nil
	case OpReadLAC:
		return decodeReadLAC(r, p)
	case OpBatchRead:
		return decodeBatchRead(r, p)
	case OpInfo:
		if len(p) != 20 {
			return malformed("info response %d has a %d-byte body, want 20", r.RequestID, len(p))
		}
		r.FreeBytes, r.TotalBytes, r.InfoFlags = be.Uint64(p), be.Uint64(p[8:]), be.Uint32(p[16:])
		return nil
	}
	if len(p) != 0 {
		return malformed("%s response %d has %d unexpected bytes", r.Op, r.RequestID, len(p))
	}
	return nil
}

func decodeReadLAC(r *Response, p []byte) error {
	if len(p) < 12 {
		return malformed("read-lac response %d shorter than 12 bytes", r.RequestID)
	}
	r.LAC = int64(be.Uint64(p))
	n := be.Uint32(p[8:])
	if uint64(n) > uint64(len(p)-12) {
		return malformed("read-lac response %d: explicit LAC of %d bytes truncated at %d", r.RequestID, n, len(p)-12)
	}
	r.ExplicitLAC = p[12 : 12+n]
	r.Data = p[12+n:]
	return nil
}

// decodeBatchRead splits a batch-read body into its entries. The count is
// checked against the bytes there (each entry takes at least its 4-byte
// length) before anything is allocated for it.
func decodeBatchRead(r *Response, p []byte) error {
	if len(p) < 12 {
		return malformed("batch-read response %d shorter than 12 bytes", r.RequestID)
	}
	r.LAC = int64(be.Uint64(p))
	n := be.Uint32(p[8:])
	p = p[12:]
	if uint64(n) > uint64(len(p)/4) {
		return malformed("batch-read response %d: %d entries in %d bytes", r.RequestID, n, len(p))
	}
	r.Entries = make([][]byte, n)
	for i := range r.Entries {
		if len(p) < 4 {
			return malformed("batch-read response %d: entry %d of %d without its length", r.RequestID, i, n)
		}
		l := be.Uint32(p)
		if uint64(l) > uint64(len(p)-4) {
			return malformed("batch-read response %d: entry %d of %d bytes truncated at %d", r.RequestID, i, l, len(p)-4)
		}
		r.Entries[i], p = p[4:4+l], p[4+l:]
	}
	if len(p) != 0 {
		return malformed("batch-read response %d has %d bytes after its %d entries", r.RequestID, len(p), n)
	}
	return nil
}
