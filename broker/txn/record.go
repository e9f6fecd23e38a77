package txn

import (
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

// ID is a transaction id: Most is its coordinator, Least its sequence.
type ID struct{ Most, Least uint64 }

func (id ID) String() string { return fmt.Sprintf("(%d,%d)", id.Most, id.Least) }

// Status is a transaction's state, with Pulsar's TxnStatus names.
type Status uint32

const (
	Open Status = iota
	Committing
	Committed
	Aborting
	Aborted
)

var statusNames = [...]string{"OPEN", "COMMITTING", "COMMITTED", "ABORTING", "ABORTED"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint32(s))
}

// ended reports a final status.
func (s Status) ended() bool { return s == Committed || s == Aborted }

// Subscription names a subscription of a topic.
type Subscription struct{ Topic, Name string }

// Meta is a transaction's state as the log holds it.
type Meta struct {
	ID           ID
	Status       Status
	Start        time.Time
	Timeout      time.Duration
	Partitions   []string
	Subs         []Subscription
	LastModified time.Time
}

// Deadline is when an open transaction times out.
func (m Meta) Deadline() time.Time { return m.Start.Add(m.Timeout) }

// ErrCorruptRecord is a log record that cannot be decoded.
var ErrCorruptRecord = errors.New("corrupt transaction log record")

const (
	fLeast = 1 + iota
	fStatus
	fStart
	fTimeout
	fPartition
	fSub
	fModified
)

// encode is the record of m (see the package doc).
func encode(m Meta) []byte {
	b := protowire.AppendTag(nil, fLeast, protowire.VarintType)
	b = protowire.AppendVarint(b, m.ID.Least)
	b = protowire.AppendTag(b, fStatus, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(m.Status))
	b = protowire.AppendTag(b, fStart, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(m.Start.UnixMilli()))
	b = protowire.AppendTag(b, fTimeout, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(m.Timeout.Milliseconds()))
	for _, p := range m.Partitions {
		b = protowire.AppendTag(b, fPartition, protowire.BytesType)
		b = protowire.AppendString(b, p)
	}
	for _, s := range m.Subs {
		var sub []byte
		sub = protowire.AppendTag(sub, 1, protowire.BytesType)
		sub = protowire.AppendString(sub, s.Topic)
		sub = protowire.AppendTag(sub, 2, protowire.BytesType)
		sub = protowire.AppendString(sub, s.Name)
		b = protowire.AppendTag(b, fSub, protowire.BytesType)
		b = protowire.AppendBytes(b, sub)
	}
	b = protowire.AppendTag(b, fModified, protowire.VarintType)
	return protowire.AppendVarint(b, uint64(m.LastModified.UnixMilli()))
}

// fBatch is the field of an entry holding several records, each one
// length-delimited (never a record's first field: encode begins with
// fLeast).
const fBatch = 15

// encodeEntry is the log entry of recs: the record itself when it is
// alone (as every entry written before batching), else each as field
// fBatch.
func encodeEntry(recs [][]byte) []byte {
	if len(recs) == 1 {
		return recs[0]
	}
	var b []byte
	for _, r := range recs {
		b = protowire.AppendTag(b, fBatch, protowire.BytesType)
		b = protowire.AppendBytes(b, r)
	}
	return b
}

// decodeEntry reads the records of a log entry of coordinator tc, in
// order.
func decodeEntry(tc uint64, b []byte) ([]Meta, error) {
	if num, _, n := protowire.ConsumeTag(b); n < 0 || num != fBatch {
		m, err := decode(tc, b)
		if err != nil {
			return nil, err
		}
		return []Meta{m}, nil
	}
	var out []Meta
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num != fBatch || typ != protowire.BytesType {
			return nil, fmt.Errorf("%w: batch entry: field %d type %d after %d records", ErrCorruptRecord, num, typ, len(out))
		}
		rec, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil, fmt.Errorf("%w: batch entry: record %d: %v", ErrCorruptRecord, len(out), protowire.ParseError(m))
		}
		meta, err := decode(tc, rec)
		if err != nil {
			return nil, err
		}
		out = append(out, meta)
		b = b[n+m:]
	}
	return out, nil
}

// decode reads a record of coordinator tc; unknown fields are skipped.
func decode(tc uint64, b []byte) (Meta, error) {
	m := Meta{ID: ID{Most: tc}}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return Meta{}, fmt.Errorf("%w: tag: %v", ErrCorruptRecord, protowire.ParseError(n))
		}
		b = b[n:]
		var err error
		if b, err = decodeField(&m, num, typ, b); err != nil {
			return Meta{}, err
		}
	}
	if m.Status > Aborted {
		return Meta{}, fmt.Errorf("%w: status %d", ErrCorruptRecord, m.Status)
	}
	return m, nil
}

func decodeField(m *Meta, num protowire.Number, typ protowire.Type, b []byte) ([]byte, error) {
	want := map[protowire.Number]protowire.Type{fLeast: protowire.VarintType, fStatus: protowire.VarintType,
		fStart: protowire.VarintType, fTimeout: protowire.VarintType, fPartition: protowire.BytesType,
		fSub: protowire.BytesType, fModified: protowire.VarintType}
	if w, known := want[num]; !known || w != typ {
		if known {
			return nil, fmt.Errorf("%w: field %d has wire type %d", ErrCorruptRecord, num, typ)
		}
		n := protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil, fmt.Errorf("%w: field %d: %v", ErrCorruptRecord, num, protowire.ParseError(n))
		}
		return b[n:], nil
	}
	if typ == protowire.VarintType {
		v, n := protowire.ConsumeVarint(b)
		if n < 0 {
			return nil, fmt.Errorf("%w: field %d: %v", ErrCorruptRecord, num, protowire.ParseError(n))
		}
		setVarint(m, num, v)
		return b[n:], nil
	}
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return nil, fmt.Errorf("%w: field %d: %v", ErrCorruptRecord, num, protowire.ParseError(n))
	}
	if num == fPartition {
		m.Partitions = append(m.Partitions, string(v))
		return b[n:], nil
	}
	s, err := decodeSub(v)
	if err != nil {
		return nil, err
	}
	m.Subs = append(m.Subs, s)
	return b[n:], nil
}

func setVarint(m *Meta, num protowire.Number, v uint64) {
	switch num {
	case fLeast:
		m.ID.Least = v
	case fStatus:
		m.Status = Status(min(v, 1<<31))
	case fStart:
		m.Start = time.UnixMilli(int64(v))
	case fTimeout:
		m.Timeout = time.Duration(min(v, 1<<40)) * time.Millisecond
	case fModified:
		m.LastModified = time.UnixMilli(int64(v))
	}
}

func decodeSub(b []byte) (Subscription, error) {
	var s Subscription
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return s, fmt.Errorf("%w: subscription tag: %v", ErrCorruptRecord, protowire.ParseError(n))
		}
		b = b[n:]
		if (num == 1 || num == 2) && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return s, fmt.Errorf("%w: subscription field %d: %v", ErrCorruptRecord, num, protowire.ParseError(n))
			}
			if num == 1 {
				s.Topic = string(v)
			} else {
				s.Name = string(v)
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return s, fmt.Errorf("%w: subscription field %d: %v", ErrCorruptRecord, num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return s, nil
}
