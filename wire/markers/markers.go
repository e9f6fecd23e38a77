// Package markers encodes the replicated-subscription markers: entries the
// brokers write into a topic for each other, never delivered to consumers.
// Their wire form is Pulsar's (PulsarMarkers.proto), so the field numbers
// below are frozen.
//
// A marker is a stored entry like any other, [0x0e01][CRC32C][metadataSize]
// [MessageMetadata][payload], whose metadata has marker_type set, producer
// name "pulsar.marker", sequence id 0 and, for markers meant for some
// clusters only, replicate_to. The payload is one of these messages
// (proto2, encoded by hand with protowire: four small messages do not
// justify a second generated file):
//
//	MarkersMessageIdData                   { 1: uint64 ledger_id; 2: uint64 entry_id }
//	ClusterMessageId                       { 1: string cluster; 2: MarkersMessageIdData message_id }
//	ReplicatedSubscriptionsSnapshotRequest { 1: string snapshot_id; 2: string source_cluster }       type 10
//	ReplicatedSubscriptionsSnapshotResponse{ 1: string snapshot_id; 2: ClusterMessageId cluster }    type 11
//	ReplicatedSubscriptionsSnapshot        { 1: string snapshot_id; 2: MarkersMessageIdData local_message_id;
//	                                         3: repeated ClusterMessageId clusters }                 type 12
//	ReplicatedSubscriptionsUpdate          { 1: string subscription_name; 2: repeated ClusterMessageId clusters } type 13
//
// Decoders skip unknown fields and reject truncated or mistyped ones; they
// are fuzzed (markers_test.go).
package markers

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// Type is MessageMetadata.marker_type (Pulsar's MarkerType enum).
type Type int32

// The replicated-subscription marker types (frozen: Pulsar's values).
const (
	SnapshotRequest  Type = 10
	SnapshotResponse Type = 11
	Snapshot         Type = 12
	Update           Type = 13
)

// ProducerName is the producer name of every marker entry.
const ProducerName = "pulsar.marker"

// MessageID is MarkersMessageIdData: a position in a cluster's topic.
type MessageID struct{ LedgerID, EntryID uint64 }

// ClusterID is ClusterMessageId: a cluster and a position in its topic.
type ClusterID struct {
	Cluster string
	ID      MessageID
}

// Request asks every remote cluster for its last position.
type Request struct{ SnapshotID, SourceCluster string }

// Response is a remote cluster's answer: its last position when it read
// the request.
type Response struct {
	SnapshotID string
	Cluster    ClusterID
}

// SnapshotData pairs a local position with each remote's position: what
// is at or before Local here covers what is at or before each remote's.
type SnapshotData struct {
	SnapshotID string
	Local      MessageID
	Clusters   []ClusterID
}

// UpdateData moves a subscription in each cluster named to its position.
type UpdateData struct {
	Subscription string
	Clusters     []ClusterID
}

// ErrMalformed: a marker payload does not decode.
var ErrMalformed = errors.New("markers: malformed payload")

// Entry builds a marker entry of type t with payload, for the clusters in
// replicateTo (nil: every replication cluster), published at publishMs.
func Entry(t Type, payload []byte, replicateTo []string, publishMs uint64) ([]byte, error) {
	mt := int32(t)
	name, seq := ProducerName, uint64(0)
	md := &pb.MessageMetadata{ProducerName: &name, SequenceId: &seq, PublishTime: &publishMs, MarkerType: &mt,
		ReplicateTo: replicateTo}
	return wire.AppendEntry(nil, md, payload)
}

func appendID(b []byte, num protowire.Number, id MessageID) []byte {
	var m []byte
	m = protowire.AppendTag(m, 1, protowire.VarintType)
	m = protowire.AppendVarint(m, id.LedgerID)
	m = protowire.AppendTag(m, 2, protowire.VarintType)
	m = protowire.AppendVarint(m, id.EntryID)
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func appendCluster(b []byte, num protowire.Number, c ClusterID) []byte {
	var m []byte
	m = appendString(m, 1, c.Cluster)
	m = appendID(m, 2, c.ID)
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, m)
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

// Encode encodes a request.
func (r Request) Encode() []byte {
	b := appendString(nil, 1, r.SnapshotID)
	return appendString(b, 2, r.SourceCluster)
}

// Encode encodes a response.
func (r Response) Encode() []byte {
	b := appendString(nil, 1, r.SnapshotID)
	return appendCluster(b, 2, r.Cluster)
}

// Encode encodes a snapshot.
func (s SnapshotData) Encode() []byte {
	b := appendString(nil, 1, s.SnapshotID)
	b = appendID(b, 2, s.Local)
	for _, c := range s.Clusters {
		b = appendCluster(b, 3, c)
	}
	return b
}

// Encode encodes an update.
func (u UpdateData) Encode() []byte {
	b := appendString(nil, 1, u.Subscription)
	for _, c := range u.Clusters {
		b = appendCluster(b, 2, c)
	}
	return b
}

// fields calls f for each field of b; f gets the varint value or the bytes.
func fields(b []byte, f func(num protowire.Number, v uint64, bs []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ErrMalformed
		}
		b = b[n:]
		var v uint64
		var bs []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			bs, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return ErrMalformed
		}
		b = b[n:]
		if err := f(num, v, bs); err != nil {
			return err
		}
	}
	return nil
}

func parseID(b []byte) (MessageID, error) {
	var id MessageID
	err := fields(b, func(num protowire.Number, v uint64, _ []byte) error {
		switch num {
		case 1:
			id.LedgerID = v
		case 2:
			id.EntryID = v
		}
		return nil
	})
	return id, err
}

func parseCluster(b []byte) (ClusterID, error) {
	var c ClusterID
	err := fields(b, func(num protowire.Number, _ uint64, bs []byte) error {
		var err error
		switch num {
		case 1:
			c.Cluster = string(bs)
		case 2:
			c.ID, err = parseID(bs)
		}
		return err
	})
	return c, err
}

// ParseRequest decodes a request.
func ParseRequest(b []byte) (Request, error) {
	var r Request
	err := fields(b, func(num protowire.Number, _ uint64, bs []byte) error {
		switch num {
		case 1:
			r.SnapshotID = string(bs)
		case 2:
			r.SourceCluster = string(bs)
		}
		return nil
	})
	if err == nil && (r.SnapshotID == "" || r.SourceCluster == "") {
		err = fmt.Errorf("%w: snapshot request without id or source cluster", ErrMalformed)
	}
	return r, err
}

// ParseResponse decodes a response.
func ParseResponse(b []byte) (Response, error) {
	var r Response
	err := fields(b, func(num protowire.Number, _ uint64, bs []byte) error {
		var err error
		switch num {
		case 1:
			r.SnapshotID = string(bs)
		case 2:
			r.Cluster, err = parseCluster(bs)
		}
		return err
	})
	if err == nil && (r.SnapshotID == "" || r.Cluster.Cluster == "") {
		err = fmt.Errorf("%w: snapshot response without id or cluster", ErrMalformed)
	}
	return r, err
}

// ParseSnapshot decodes a snapshot.
func ParseSnapshot(b []byte) (SnapshotData, error) {
	var s SnapshotData
	err := fields(b, func(num protowire.Number, _ uint64, bs []byte) error {
		var err error
		switch num {
		case 1:
			s.SnapshotID = string(bs)
		case 2:
			s.Local, err = parseID(bs)
		case 3:
			var c ClusterID
			if c, err = parseCluster(bs); err == nil {
				s.Clusters = append(s.Clusters, c)
			}
		}
		return err
	})
	return s, err
}

// ParseUpdate decodes an update.
func ParseUpdate(b []byte) (UpdateData, error) {
	var u UpdateData
	err := fields(b, func(num protowire.Number, _ uint64, bs []byte) error {
		var err error
		switch num {
		case 1:
			u.Subscription = string(bs)
		case 2:
			var c ClusterID
			if c, err = parseCluster(bs); err == nil {
				u.Clusters = append(u.Clusters, c)
			}
		}
		return err
	})
	if err == nil && u.Subscription == "" {
		err = fmt.Errorf("%w: subscription update without a subscription", ErrMalformed)
	}
	return u, err
}
