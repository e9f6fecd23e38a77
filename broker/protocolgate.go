package broker

// Protocol-version gates: what a client that announced an older protocol
// version in CONNECT is sent, as Pulsar's broker gates it (ServerCnx,
// PulsarCommandSenderImpl: each getRemoteEndpointProtocolVersion() test).
//
// Behaviour:
//   - CONNECTED answers the lower of the client's version and ours.
//   - v5: CLOSE_PRODUCER / CLOSE_CONSUMER from the broker; an older client
//     has its connection closed instead (it reconnects everything).
//   - v4: batches; an older consumer is disconnected when a batch entry
//     would be dispatched to it.
//   - v9: REACHED_END_OF_TOPIC; older clients are not told.
//   - v11: MESSAGE payloads keep their 0x0e01 CRC32C; older clients get
//     them without it.
//   - v12: ACTIVE_CONSUMER_CHANGE; older clients are not told.
//   - v18: broker entry metadata on MESSAGE (also needs the client's
//     supports_broker_entry_metadata and exposeBrokerEntryMetadata).

import (
	"fmt"
	"github.com/magnetar-io/magnetar/broker/ownership"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// The protocol version that introduced each gated command or field.
const (
	protoBatches              int32 = 4
	protoCloseFromBroker      int32 = 5
	protoReachedEndOfTopic    int32 = 9
	protoMessageChecksum      int32 = 11
	protoActiveConsumerChange int32 = 12
	protoBrokerEntryMetadata  int32 = 18
)

// speaks reports whether the client announced protocol version v or
// newer.
func (c *serverConn) speaks(v int32) bool { return c.protocol.Load() >= v }

// closeProducerOnClient tells the client the broker closed producer id
// (CLOSE_PRODUCER); a client older than v5 has its connection closed.
// to, when not nil, is the broker the topic moved to: the client
// reconnects there directly (PIP-307's assignedBrokerServiceUrl; clients
// that do not know the field look the topic up again).
func (c *serverConn) closeProducerOnClient(id uint64, to *ownership.LookupResult) {
	if !c.speaks(protoCloseFromBroker) {
		c.t.Close(fmt.Errorf("producer %d closed by the broker; protocol v%d has no CLOSE_PRODUCER", id, c.protocol.Load()))
		return
	}
	cmd := &pb.CommandCloseProducer{ProducerId: &id, RequestId: ptr(uint64(0))}
	cmd.AssignedBrokerServiceUrl, cmd.AssignedBrokerServiceUrlTls = assignedURLs(to)
	_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_PRODUCER.Enum(), CloseProducer: cmd})
}

// assignedURLs are the CLOSE commands' assignedBrokerServiceUrl(Tls) for
// to (nil when unknown or empty).
func assignedURLs(to *ownership.LookupResult) (plain, tls *string) {
	if to == nil {
		return nil, nil
	}
	if to.BrokerURL != "" {
		plain = ptr(to.BrokerURL)
	}
	if to.BrokerURLTLS != "" {
		tls = ptr(to.BrokerURLTLS)
	}
	return plain, tls
}

// closeConsumerOnClient is closeProducerOnClient for consumers.
func (c *serverConn) closeConsumerOnClient(id uint64, to *ownership.LookupResult) {
	if !c.speaks(protoCloseFromBroker) {
		c.t.Close(fmt.Errorf("consumer %d closed by the broker; protocol v%d has no CLOSE_CONSUMER", id, c.protocol.Load()))
		return
	}
	cmd := &pb.CommandCloseConsumer{ConsumerId: &id, RequestId: ptr(uint64(0))}
	cmd.AssignedBrokerServiceUrl, cmd.AssignedBrokerServiceUrlTls = assignedURLs(to)
	_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: cmd})
}
