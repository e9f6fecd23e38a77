package wire_test

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

func storedTestEntry(t *testing.T) []byte {
	t.Helper()
	e, err := wire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: proto.String("p"), SequenceId: proto.Uint64(1),
		PublishTime: proto.Uint64(5)}, []byte("payload"))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestStoredEntryRoundTrip(t *testing.T) {
	entry := storedTestEntry(t)
	for _, c := range []struct {
		ts, idx bool
	}{{true, true}, {true, false}, {false, true}} {
		stored := wire.AppendBrokerEntryMetadata(nil, 1700000000123, c.ts, 41, c.idx)
		if len(stored) != wire.BrokerEntryMetadataLen(1700000000123, c.ts, 41, c.idx) {
			t.Fatalf("%+v: appended %d bytes, wire.BrokerEntryMetadataLen says %d", c, len(stored), wire.BrokerEntryMetadataLen(1700000000123, c.ts, 41, c.idx))
		}
		stored = append(stored, entry...)
		bem, e, err := wire.ParseStoredEntry(stored)
		if err != nil {
			t.Fatal(err)
		}
		var m pb.BrokerEntryMetadata
		if err := proto.Unmarshal(bem, &m); err != nil {
			t.Fatal(err)
		}
		if m.BrokerTimestamp != nil != c.ts || m.Index != nil != c.idx ||
			(c.ts && m.GetBrokerTimestamp() != 1700000000123) || (c.idx && m.GetIndex() != 41) {
			t.Fatalf("%+v: decoded %v", c, &m)
		}
		if !bytes.Equal(e.Bytes(), entry) || !bytes.Equal(wire.StripBrokerEntryMetadata(stored), entry) {
			t.Fatalf("%+v: the producer's entry did not come back unchanged", c)
		}
	}
	if _, e, err := wire.ParseStoredEntry(entry); err != nil || !bytes.Equal(e.Bytes(), entry) || !bytes.Equal(wire.StripBrokerEntryMetadata(entry), entry) {
		t.Fatalf("an entry without broker entry metadata: %v", err)
	}
	bad := wire.AppendBrokerEntryMetadata(nil, 1, true, 0, false)
	bad[5] = 200 // size past the end
	if got := wire.StripBrokerEntryMetadata(bad); !bytes.Equal(got, bad) {
		t.Fatal("a malformed header must be left for the reader to report")
	}
	if _, _, err := wire.ParseStoredEntry(bad); err == nil {
		t.Fatal("a broker entry metadata size past the end must be an error")
	}
}

func FuzzParseStoredEntry(f *testing.F) {
	f.Add(append(wire.AppendBrokerEntryMetadata(nil, 5, true, 7, true), 0x0e, 0x01, 0, 0, 0, 0, 0, 0, 0, 1, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, e, err := wire.ParseStoredEntry(b)
		stripped := wire.StripBrokerEntryMetadata(b)
		if err == nil && !bytes.HasSuffix(b, e.Bytes()) {
			t.Fatal("entry is not the tail of the stored bytes")
		}
		if len(stripped) > len(b) {
			t.Fatal("strip grew the entry")
		}
	})
}
