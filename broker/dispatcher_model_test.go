package broker

// A seeded randomized model test of the dispatcher (subscription.go),
// driven without sockets: connections are serverConns over a fake
// transport that records the frames written, and commands are fed to
// handleFrame. Each seed runs random steps — produce, consumers joining
// and leaving (CLOSE_CONSUMER or the connection closing), FLOW, ACK
// (individual; cumulative on Exclusive and Failover), NACK (REDELIVER of
// some ids), REDELIVER of everything, SEEK and topic unload — on each
// subscription type, and checks:
//
//   - no consumer is sent more messages than the FLOW permits it was given;
//   - first deliveries (of entries not delivered before since the last
//     seek or unload) come in position order: over the whole subscription
//     on Exclusive and Failover, per key on Key_Shared;
//   - between redeliveries, seeks, unloads and consumer changes, each
//     consumer gets its entries in position order (per key on Key_Shared);
//   - an acknowledged entry is never delivered again (until a seek);
//   - the unacked counts are never negative and match the in-flight map,
//     and nothing is in flight to a consumer no longer attached;
//   - at the end one consumer with many permits that acks everything gets
//     every entry not acknowledged before, and the backlog reaches 0.
//
// Asynchrony: the in-memory managed ledger answers synchronously, but
// SUBSCRIBE and SEEK are served on goroutines; after each step the driver
// waits for the answer and then until no frame was written for a few
// milliseconds. Invariants are checked as frames are written, so timing
// can only change which steps are chosen, not make a check wrong; a
// failure prints the seed and the steps. go test -run TestDispatcherModel
// ./broker/ -dm.seed=N reruns one seed, -dm.seeds=N runs N per type,
// -dm.steps=N sets their length.

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/managedledger"
	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

var (
	dmSeeds = flag.Int("dm.seeds", 2, "seeds per subscription type of TestDispatcherModel")
	dmSeed  = flag.Uint64("dm.seed", 0, "run TestDispatcherModel for this seed only")
	dmSteps = flag.Int("dm.steps", 150, "steps per seed of TestDispatcherModel")
)

func TestDispatcherModel(t *testing.T) {
	seeds := make([]uint64, 0, *dmSeeds)
	if *dmSeed != 0 {
		seeds = append(seeds, *dmSeed)
	} else {
		base := uint64(time.Now().UnixNano())
		for i := range *dmSeeds {
			seeds = append(seeds, base+uint64(i))
		}
	}
	for _, subType := range []pb.CommandSubscribe_SubType{pb.CommandSubscribe_Exclusive, pb.CommandSubscribe_Failover,
		pb.CommandSubscribe_Shared, pb.CommandSubscribe_Key_Shared} {
		for _, seed := range seeds {
			t.Run(fmt.Sprintf("%s/%d", subType, seed), func(t *testing.T) {
				h := newDMHarness(t, seed, subType)
				defer func() {
					if t.Failed() {
						t.Logf("seed %d (rerun: go test -race -run 'TestDispatcherModel/%s/' ./broker/ -dm.seed=%d); steps:\n%s",
							seed, subType, seed, strings.Join(h.trace, "\n"))
					}
				}()
				h.run(*dmSteps)
			})
		}
	}
}

// dmTransport is a connection's network side: it records what the broker
// writes and hands it to the harness.
type dmTransport struct {
	h    *dmHarness
	name string
	// inbox (guarded by h.mu) holds the commands other than MESSAGE.
	inbox  []*pb.BaseCommand
	closed bool // guarded by h.mu
}

func (tr *dmTransport) Write(bufs ...[]byte) error {
	frame := slices.Concat(bufs...)
	var cmd pb.BaseCommand
	f, _, err := wire.ParseFrame(frame, len(frame), &cmd)
	if err != nil {
		tr.h.violatef("%s: broker wrote a bad frame: %v", tr.name, err)
		return nil
	}
	var md pb.MessageMetadata
	if f.HasPayload() {
		if err := f.Entry.DecodeMetadata(&md); err != nil {
			tr.h.violatef("%s: broker wrote a bad entry: %v", tr.name, err)
			return nil
		}
	}
	tr.h.received(tr, &cmd, md.GetPartitionKey())
	return nil
}

func (tr *dmTransport) Close(reason error) {
	tr.h.mu.Lock()
	tr.closed = true
	tr.h.mu.Unlock()
}
func (tr *dmTransport) RemoteAddr() net.Addr {
	return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1}
}
func (tr *dmTransport) PauseReading()  {}
func (tr *dmTransport) ResumeReading() {}
func (tr *dmTransport) Congested() bool {
	return false
}
func (tr *dmTransport) Drained() <-chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}

type dmConsumer struct {
	id    uint64
	name  string
	tr    *dmTransport
	conn  *serverConn
	open  bool                            // subscribed and not closed
	held  map[managedledger.Position]bool // delivered, not acked nor given back
	flows int64                           // permits granted
	got   int64                           // messages delivered
	// last is the last position delivered per key ("" on Exclusive and
	// Failover) since the last epoch change.
	last map[string]managedledger.Position
}

type dmHarness struct {
	t       *testing.T
	seed    uint64
	rng     *rand.Rand
	subType pb.CommandSubscribe_SubType
	b       *Broker
	topic   string
	trace   []string

	prodTr   *dmTransport
	prodConn *serverConn
	prodID   uint64
	seq      uint64
	reqID    uint64
	nextID   uint64

	mu         sync.Mutex
	frames     int64
	consumers  map[uint64]*dmConsumer
	produced   []managedledger.Position // in order
	keyOf      map[managedledger.Position]string
	acked      map[managedledger.Position]bool
	delivered  map[managedledger.Position]bool // delivered at least once since the last seek or unload
	lastFirst  map[string]managedledger.Position
	violations []string
	final      map[managedledger.Position]bool // delivered to the final consumer
	steps      int
}

func newDMHarness(t *testing.T, seed uint64, subType pb.CommandSubscribe_SubType) *dmHarness {
	h := &dmHarness{t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, seed^0xd15ba7c4)), subType: subType,
		topic:     fmt.Sprintf("persistent://public/default/dm-%s-%d", strings.ToLower(subType.String()), seed),
		consumers: map[uint64]*dmConsumer{}, keyOf: map[managedledger.Position]string{},
		acked: map[managedledger.Position]bool{}, delivered: map[managedledger.Position]bool{},
		lastFirst: map[string]managedledger.Position{}}
	// Small ledgers: positions cross ledger boundaries often.
	h.b = New(Config{ClusterName: "test", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		managedledger.NewMemoryFactory(managedledger.MemoryOptions{MaxEntriesPerLedger: 7}))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		h.b.Close(ctx)
	})
	return h
}

func (h *dmHarness) logf(format string, args ...any) {
	h.trace = append(h.trace, fmt.Sprintf("%3d ", h.steps)+fmt.Sprintf(format, args...))
}

func (h *dmHarness) violatef(format string, args ...any) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.violations = append(h.violations, fmt.Sprintf(format, args...))
}

// orderKey reports whether the subscription type keeps an order, and the
// order's key for an entry of key.
func (h *dmHarness) orderKey(key string) (string, bool) {
	switch h.subType {
	case pb.CommandSubscribe_Shared:
		return "", false
	case pb.CommandSubscribe_Key_Shared:
		return key, true
	}
	return "", true
}

// received applies a frame the broker wrote to the model and checks the
// delivery invariants.
func (h *dmHarness) received(tr *dmTransport, cmd *pb.BaseCommand, key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.frames++
	switch cmd.GetType() {
	case pb.BaseCommand_MESSAGE:
		m := cmd.GetMessage()
		p := position(m.GetMessageId())
		c := h.consumers[m.GetConsumerId()]
		if c == nil {
			h.violations = append(h.violations, fmt.Sprintf("MESSAGE %v for unknown consumer %d", p, m.GetConsumerId()))
			return
		}
		h.deliveredLocked(c, p, key)
	case pb.BaseCommand_CLOSE_CONSUMER:
		if c := h.consumers[cmd.GetCloseConsumer().GetConsumerId()]; c != nil {
			c.open = false
		}
		tr.inbox = append(tr.inbox, cmd)
	default:
		tr.inbox = append(tr.inbox, cmd)
	}
}

func (h *dmHarness) deliveredLocked(c *dmConsumer, p managedledger.Position, key string) {
	fail := func(format string, args ...any) {
		h.violations = append(h.violations, fmt.Sprintf("consumer %d (%s): ", c.id, c.name)+fmt.Sprintf(format, args...))
	}
	if k, ok := h.keyOf[p]; ok && k != key {
		fail("delivered %v with key %q, produced with %q", p, key, k)
	}
	c.got++
	if c.got > c.flows {
		fail("delivery %d of %v past the %d permits granted", c.got, p, c.flows)
	}
	if h.acked[p] {
		fail("delivered %v, which was acknowledged", p)
	}
	if !c.open {
		fail("delivered %v after it was closed", p)
	}
	if key, ordered := h.orderKey(key); ordered {
		if last, ok := c.last[key]; ok && p.Compare(last) <= 0 {
			fail("delivered %v (key %q) after %v with no redelivery, seek or consumer change between", p, key, last)
		}
		c.last[key] = p
		if !h.delivered[p] {
			if last, ok := h.lastFirst[key]; ok && p.Compare(last) < 0 {
				fail("first delivery of %v (key %q) after the first delivery of %v", p, key, last)
			}
			h.lastFirst[key] = p
		}
	}
	h.delivered[p] = true
	c.held[p] = true
	if h.final != nil {
		h.final[p] = true
	}
}

// newEpochLocked forgets each consumer's last delivery: after a
// redelivery, seek, unload or consumer change entries may come again.
func (h *dmHarness) newEpochLocked() {
	for _, c := range h.consumers {
		clear(c.last)
	}
}

// restartLocked forgets first deliveries too (seek, unload).
func (h *dmHarness) restartLocked() {
	h.newEpochLocked()
	clear(h.delivered)
	clear(h.lastFirst)
}

func (h *dmHarness) newConn(name string) (*dmTransport, *serverConn) {
	tr := &dmTransport{h: h, name: name}
	sc := h.b.newConn(tr)
	h.feed(sc, &pb.BaseCommand{Type: pb.BaseCommand_CONNECT.Enum(), Connect: &pb.CommandConnect{
		ClientVersion: ptr("dm-test"), ProtocolVersion: ptr(int32(20))}})
	h.await(tr, "CONNECTED", func(c *pb.BaseCommand) bool { return c.GetType() == pb.BaseCommand_CONNECTED })
	return tr, sc
}

// feed serves one command as the event loop would.
func (h *dmHarness) feed(sc *serverConn, cmd *pb.BaseCommand) {
	h.t.Helper()
	frame, err := wire.AppendSimpleFrame(nil, cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := sc.handleFrame(frame); err != nil {
		h.t.Fatalf("%s: %v", cmd.GetType(), err)
	}
}

// await waits for a command matching want on tr and takes it.
func (h *dmHarness) await(tr *dmTransport, what string, want func(*pb.BaseCommand) bool) *pb.BaseCommand {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		h.mu.Lock()
		for i, c := range tr.inbox {
			if want(c) {
				tr.inbox = slices.Delete(tr.inbox, i, i+1)
				h.mu.Unlock()
				return c
			}
		}
		h.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	h.t.Fatalf("%s: no %s", tr.name, what)
	return nil
}

// quiesce waits until no frame was written for a few milliseconds.
func (h *dmHarness) quiesce() {
	last, stable := int64(-1), 0
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && stable < 3; {
		time.Sleep(time.Millisecond)
		h.mu.Lock()
		n := h.frames
		h.mu.Unlock()
		if n == last && !h.dispatching() {
			stable++
		} else {
			last, stable = n, 0
		}
	}
}

// sub is the loaded subscription, nil when its topic is not loaded.
func (h *dmHarness) sub() *subscription {
	for _, t := range h.b.loadedTopics() {
		if t.name.String() == h.topic {
			t.mu.Lock()
			s := t.subs["sub"]
			t.mu.Unlock()
			return s
		}
	}
	return nil
}

func (h *dmHarness) dispatching() bool {
	s := h.sub()
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dispatching
}

func (h *dmHarness) req() uint64 { h.reqID++; return h.reqID }

var dmKeys = []string{"a", "b", "c", "d", "e", "f"}

func (h *dmHarness) openProducer() {
	if h.prodConn == nil {
		h.prodTr, h.prodConn = h.newConn("producer")
	}
	h.prodID++
	req := h.req()
	h.feed(h.prodConn, &pb.BaseCommand{Type: pb.BaseCommand_PRODUCER.Enum(), Producer: &pb.CommandProducer{
		Topic: ptr(h.topic), ProducerId: ptr(h.prodID), RequestId: ptr(req)}})
	cmd := h.await(h.prodTr, "PRODUCER answer", func(c *pb.BaseCommand) bool {
		return c.GetProducerSuccess().GetRequestId() == req || c.GetError().GetRequestId() == req
	})
	if cmd.GetType() != pb.BaseCommand_PRODUCER_SUCCESS {
		h.t.Fatalf("PRODUCER answered %v", cmd)
	}
}

func (h *dmHarness) produce(n int) {
	var keys []string
	for range n {
		key := dmKeys[h.rng.IntN(len(dmKeys))]
		keys = append(keys, key)
		h.seq++
		entry, err := wire.AppendEntry(nil, &pb.MessageMetadata{ProducerName: ptr("dm"), SequenceId: ptr(h.seq),
			PublishTime: ptr(uint64(time.Now().UnixMilli())), PartitionKey: ptr(key)}, []byte("m"+key))
		if err != nil {
			h.t.Fatal(err)
		}
		hdr, err := wire.AppendPayloadFrameHeader(nil, &pb.BaseCommand{Type: pb.BaseCommand_SEND.Enum(), Send: &pb.CommandSend{
			ProducerId: ptr(h.prodID), SequenceId: ptr(h.seq)}}, nil, len(entry))
		if err != nil {
			h.t.Fatal(err)
		}
		seq := h.seq
		if err := h.prodConn.handleFrame(append(hdr, entry...)); err != nil {
			h.t.Fatalf("SEND: %v", err)
		}
		cmd := h.await(h.prodTr, "SEND_RECEIPT", func(c *pb.BaseCommand) bool {
			return c.GetSendReceipt().GetSequenceId() == seq || c.GetSendError().GetSequenceId() == seq
		})
		if cmd.GetType() != pb.BaseCommand_SEND_RECEIPT {
			h.t.Fatalf("SEND answered %v", cmd)
		}
		p := position(cmd.GetSendReceipt().GetMessageId())
		h.mu.Lock()
		h.produced = append(h.produced, p)
		h.keyOf[p] = key
		h.mu.Unlock()
	}
	h.logf("produce %d %v", n, keys)
}

func (h *dmHarness) openConsumers() []*dmConsumer {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*dmConsumer
	for _, c := range h.consumers {
		if c.open {
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b *dmConsumer) int { return int(a.id) - int(b.id) })
	return out
}

func (h *dmHarness) pick() *dmConsumer {
	open := h.openConsumers()
	if len(open) == 0 {
		return nil
	}
	return open[h.rng.IntN(len(open))]
}

func (h *dmHarness) join(name string) *dmConsumer {
	h.nextID++
	if name == "" {
		name = fmt.Sprintf("c%02d", h.rng.IntN(100))
	}
	c := &dmConsumer{id: h.nextID, name: name, held: map[managedledger.Position]bool{}, last: map[string]managedledger.Position{}}
	c.tr, c.conn = h.newConn(fmt.Sprintf("consumer %d", c.id))
	busy := h.subType == pb.CommandSubscribe_Exclusive && len(h.openConsumers()) > 0
	h.mu.Lock()
	h.consumers[c.id] = c
	c.open = true // before SUCCESS: the broker may deliver once attached
	h.newEpochLocked()
	h.mu.Unlock()
	req := h.req()
	h.feed(c.conn, &pb.BaseCommand{Type: pb.BaseCommand_SUBSCRIBE.Enum(), Subscribe: &pb.CommandSubscribe{
		Topic: ptr(h.topic), Subscription: ptr("sub"), SubType: h.subType.Enum(), ConsumerId: ptr(c.id),
		RequestId: ptr(req), ConsumerName: ptr(name), Durable: ptr(true),
		InitialPosition: pb.CommandSubscribe_Earliest.Enum()}})
	cmd := h.await(c.tr, "SUBSCRIBE answer", func(x *pb.BaseCommand) bool {
		return x.GetSuccess().GetRequestId() == req || x.GetError().GetRequestId() == req
	})
	if cmd.GetType() != pb.BaseCommand_SUCCESS {
		h.mu.Lock()
		c.open = false
		h.mu.Unlock()
		if cmd.GetError().GetError() != pb.ServerError_ConsumerBusy || !busy {
			h.t.Fatalf("SUBSCRIBE of consumer %d answered %v", c.id, cmd)
		}
		h.logf("join %d %s: %v", c.id, name, cmd.GetError().GetError())
		return nil
	}
	h.logf("join %d %s", c.id, name)
	return c
}

func (h *dmHarness) leave(c *dmConsumer) {
	h.mu.Lock()
	h.newEpochLocked()
	h.mu.Unlock()
	if h.rng.IntN(2) == 0 {
		h.logf("leave %d (connection closed)", c.id)
		c.conn.closedByNetwork(net.ErrClosed)
	} else {
		h.logf("leave %d (CLOSE_CONSUMER)", c.id)
		req := h.req()
		h.feed(c.conn, &pb.BaseCommand{Type: pb.BaseCommand_CLOSE_CONSUMER.Enum(), CloseConsumer: &pb.CommandCloseConsumer{
			ConsumerId: ptr(c.id), RequestId: ptr(req)}})
	}
	h.mu.Lock()
	c.open = false
	h.mu.Unlock()
}

func (h *dmHarness) flow(c *dmConsumer, n uint32) {
	h.logf("flow %d %d", c.id, n)
	h.mu.Lock()
	c.flows += int64(n)
	h.mu.Unlock()
	h.feed(c.conn, &pb.BaseCommand{Type: pb.BaseCommand_FLOW.Enum(), Flow: &pb.CommandFlow{
		ConsumerId: ptr(c.id), MessagePermits: ptr(n)}})
}

// someHeld picks up to n of the entries c holds, in position order.
func (h *dmHarness) someHeld(c *dmConsumer, n int) []managedledger.Position {
	h.mu.Lock()
	defer h.mu.Unlock()
	var all []managedledger.Position
	for p := range c.held {
		all = append(all, p)
	}
	slices.SortFunc(all, managedledger.Position.Compare)
	h.rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	all = all[:min(n, len(all))]
	slices.SortFunc(all, managedledger.Position.Compare)
	return all
}

func ids(ps []managedledger.Position) []*pb.MessageIdData {
	out := make([]*pb.MessageIdData, len(ps))
	for i, p := range ps {
		out[i] = messageID(p)
	}
	return out
}

func (h *dmHarness) ack(c *dmConsumer, ps []managedledger.Position, cumulative bool) {
	typ := pb.CommandAck_Individual
	h.mu.Lock()
	if cumulative {
		typ = pb.CommandAck_Cumulative
		upTo := slices.MaxFunc(ps, managedledger.Position.Compare)
		ps = []managedledger.Position{upTo}
		for _, p := range h.produced {
			if p.Compare(upTo) <= 0 {
				h.acked[p] = true
			}
		}
		for _, x := range h.consumers {
			for p := range x.held {
				if p.Compare(upTo) <= 0 {
					delete(x.held, p)
				}
			}
		}
	} else {
		for _, p := range ps {
			h.acked[p] = true
			delete(c.held, p)
		}
	}
	h.mu.Unlock()
	h.logf("ack %d %v %v", c.id, typ, ps)
	req := h.req()
	h.feed(c.conn, &pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{
		ConsumerId: ptr(c.id), AckType: typ.Enum(), MessageId: ids(ps), RequestId: ptr(req)}})
	cmd := h.await(c.tr, "ACK_RESPONSE", func(x *pb.BaseCommand) bool { return x.GetAckResponse().GetRequestId() == req })
	if cmd.GetAckResponse().Error != nil {
		h.t.Fatalf("ACK answered %v", cmd)
	}
}

// redeliver gives back some held entries (a NACK), or all (ps nil).
func (h *dmHarness) redeliver(c *dmConsumer, ps []managedledger.Position) {
	h.mu.Lock()
	if ps == nil {
		clear(c.held)
	}
	for _, p := range ps {
		delete(c.held, p)
	}
	h.newEpochLocked()
	h.mu.Unlock()
	if ps == nil {
		h.logf("redeliver %d all", c.id)
	} else {
		h.logf("nack %d %v", c.id, ps)
	}
	h.feed(c.conn, &pb.BaseCommand{Type: pb.BaseCommand_REDELIVER_UNACKNOWLEDGED_MESSAGES.Enum(),
		RedeliverUnacknowledgedMessages: &pb.CommandRedeliverUnacknowledgedMessages{ConsumerId: ptr(c.id), MessageIds: ids(ps)}})
}

// seek resets the subscription to a produced entry: everything before it
// counts as acknowledged, everything from it on as not. The broker then
// disconnects every consumer.
func (h *dmHarness) seek(c *dmConsumer) {
	h.mu.Lock()
	if len(h.produced) == 0 {
		h.mu.Unlock()
		return
	}
	to := h.produced[h.rng.IntN(len(h.produced))]
	h.restartLocked()
	before := h.acked
	h.acked = map[managedledger.Position]bool{}
	for _, p := range h.produced {
		if p.Compare(to) < 0 {
			h.acked[p] = true
		}
	}
	for _, x := range h.consumers {
		clear(x.held)
	}
	h.mu.Unlock()
	h.logf("seek %d to %v", c.id, to)
	req := h.req()
	h.feed(c.conn, &pb.BaseCommand{Type: pb.BaseCommand_SEEK.Enum(), Seek: &pb.CommandSeek{
		ConsumerId: ptr(c.id), RequestId: ptr(req), MessageId: messageID(to)}})
	cmd := h.await(c.tr, "SEEK answer", func(x *pb.BaseCommand) bool {
		return x.GetSuccess().GetRequestId() == req || x.GetError().GetRequestId() == req
	})
	if cmd.GetType() != pb.BaseCommand_SUCCESS {
		h.t.Fatalf("SEEK answered %v", cmd)
	}
	h.awaitAllClosed()
	// Entries already trimmed (a ledger wholly acknowledged is deleted)
	// do not come back: the cursor starts at the first one stored. They
	// must have been acknowledged.
	md := h.sub().cursor.MarkDeletePosition()
	h.mu.Lock()
	for _, p := range h.produced {
		if p.Compare(to) >= 0 && p.Compare(md) <= 0 {
			if !before[p] {
				h.violations = append(h.violations, fmt.Sprintf("seek to %v: %v, not acknowledged, is skipped (mark-delete %v)", to, p, md))
			}
			h.acked[p] = true
		}
	}
	h.mu.Unlock()
}

// awaitAllClosed waits for CLOSE_CONSUMER to every open consumer.
func (h *dmHarness) awaitAllClosed() {
	deadline := time.Now().Add(10 * time.Second)
	for len(h.openConsumers()) > 0 {
		if time.Now().After(deadline) {
			h.t.Fatalf("consumers %v not closed by the broker", h.openConsumers())
		}
		time.Sleep(time.Millisecond)
	}
}

func (h *dmHarness) unload() {
	h.logf("unload")
	h.mu.Lock()
	h.restartLocked()
	for _, x := range h.consumers {
		clear(x.held)
	}
	h.mu.Unlock()
	h.b.UnloadAll(context.Background())
	h.awaitAllClosed()
	h.await(h.prodTr, "CLOSE_PRODUCER", func(x *pb.BaseCommand) bool { return x.GetType() == pb.BaseCommand_CLOSE_PRODUCER })
	h.openProducer()
}

// checkCounts checks the subscription's unacked counts against its
// in-flight map.
func (h *dmHarness) checkCounts() {
	s := h.sub()
	if s == nil {
		return
	}
	s.mu.Lock()
	var total int64
	per := map[*consumer]int64{}
	for _, in := range s.inflight {
		per[in.c] += int64(in.messages)
		total += int64(in.messages)
	}
	var bad []string
	if s.unacked < 0 || s.unacked != total {
		bad = append(bad, fmt.Sprintf("subscription unacked %d, %d messages in flight", s.unacked, total))
	}
	for _, c := range s.consumers {
		if c.unacked < 0 || c.unacked != per[c] {
			bad = append(bad, fmt.Sprintf("consumer %d unacked %d, %d messages in flight to it", c.id, c.unacked, per[c]))
		}
		delete(per, c)
	}
	for c, n := range per {
		bad = append(bad, fmt.Sprintf("%d messages in flight to consumer %d, which is no longer attached", n, c.id))
	}
	s.mu.Unlock()
	h.mu.Lock()
	h.violations = append(h.violations, bad...)
	h.mu.Unlock()
}

func (h *dmHarness) checkViolations() {
	h.t.Helper()
	h.mu.Lock()
	v := h.violations
	h.mu.Unlock()
	if len(v) > 0 {
		h.t.Fatalf("seed %d, step %d:\n%s", h.seed, h.steps, strings.Join(v, "\n"))
	}
}

func (h *dmHarness) step() {
	ordered := h.subType == pb.CommandSubscribe_Exclusive || h.subType == pb.CommandSubscribe_Failover
	c := h.pick()
	switch r := h.rng.IntN(100); {
	case r < 15:
		h.produce(1 + h.rng.IntN(5))
	case r < 25 || c == nil:
		if len(h.openConsumers()) < 4 {
			h.join("")
		} else {
			h.produce(1)
		}
	case r < 30:
		h.leave(c)
	case r < 50:
		h.flow(c, uint32(1+h.rng.IntN(8)))
	case r < 70:
		if ps := h.someHeld(c, 1+h.rng.IntN(3)); len(ps) > 0 {
			h.ack(c, ps, ordered && h.rng.IntN(2) == 0)
		}
	case r < 80:
		if ps := h.someHeld(c, 1+h.rng.IntN(2)); len(ps) > 0 {
			h.redeliver(c, ps)
		}
	case r < 87:
		h.redeliver(c, nil)
	case r < 92:
		h.seek(c)
	case r < 94:
		h.unload()
	default:
		// A cumulative ack where it is not allowed changes nothing and,
		// as on Pulsar's broker, is answered without an error.
		if ps := h.someHeld(c, 1); len(ps) > 0 && !ordered {
			req := h.req()
			h.logf("ack %d cumulative %v (ignored)", c.id, ps)
			h.feed(c.conn, &pb.BaseCommand{Type: pb.BaseCommand_ACK.Enum(), Ack: &pb.CommandAck{
				ConsumerId: ptr(c.id), AckType: pb.CommandAck_Cumulative.Enum(), MessageId: ids(ps), RequestId: ptr(req)}})
			cmd := h.await(c.tr, "ACK_RESPONSE", func(x *pb.BaseCommand) bool { return x.GetAckResponse().GetRequestId() == req })
			if cmd.GetAckResponse().Error != nil {
				h.t.Fatalf("cumulative ack on %v answered %v", h.subType, cmd)
			}
		}
	}
}

func (h *dmHarness) run(steps int) {
	h.openProducer()
	for h.steps = 0; h.steps < steps; h.steps++ {
		h.step()
		h.quiesce()
		h.checkCounts()
		h.checkViolations()
	}
	h.drain()
}

// drain closes every consumer and has one consumer with many permits ack
// all it gets: it must get every entry not acknowledged, and the backlog
// must reach 0.
func (h *dmHarness) drain() {
	h.steps = -1
	for _, c := range h.openConsumers() {
		h.leave(c)
	}
	h.quiesce()
	h.mu.Lock()
	h.final = map[managedledger.Position]bool{}
	h.mu.Unlock()
	c := h.join("final")
	h.flow(c, 1<<20)
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.quiesce()
		h.checkCounts()
		h.checkViolations()
		if ps := h.someHeld(c, 1<<30); len(ps) > 0 {
			h.ack(c, ps, false)
			continue
		}
		s := h.sub()
		if s != nil && s.cursor.Backlog() == 0 {
			break
		}
		if time.Now().After(deadline) {
			h.mu.Lock()
			var missing []managedledger.Position
			for _, p := range h.produced {
				if !h.acked[p] {
					missing = append(missing, p)
				}
			}
			h.mu.Unlock()
			h.t.Fatalf("seed %d: backlog stuck at %d; never delivered to the last consumer: %v", h.seed, s.cursor.Backlog(), missing)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, p := range h.produced {
		if !h.acked[p] {
			h.t.Fatalf("seed %d: %v neither acknowledged nor delivered", h.seed, p)
		}
	}
	h.t.Logf("%s seed %d: %d steps, %d entries, %d frames", h.subType, h.seed, *dmSteps, len(h.produced), h.frames)
}
