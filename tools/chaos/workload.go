package chaos

// The client workload: one process (in its own network namespace) that
// produces to and consumes from the run's topics until SIGTERM, then
// drains and writes everything it saw. Per topic: one producer (with
// explicit sequence ids and a fixed name, so the broker's deduplication
// applies where the namespace enables it), the four subscription types
// (Exclusive with 1 consumer, Failover, Shared and Key_Shared with 2
// each), all created before the first send, and 2 readers from the
// earliest message. Every payload names its producer, sequence and send
// time and carries a CRC of those, so the checker can tell a corrupt or
// invented message from a real one.

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	plog "github.com/apache/pulsar-client-go/pulsar/log"
)

// Subscriptions the workload opens on every topic, with their consumer
// counts.
var Subscriptions = []struct {
	Name      string
	Type      pulsar.SubscriptionType
	Consumers int
}{
	{"exclusive", pulsar.Exclusive, 1},
	{"failover", pulsar.Failover, 2},
	{"shared", pulsar.Shared, 2},
	{"key_shared", pulsar.KeyShared, 2},
}

// ReadersPerTopic is how many readers read each topic from the start.
const ReadersPerTopic = 2

// WorkloadConfig is the workload process's input (a JSON file).
type WorkloadConfig struct {
	URLs         map[string]string // client group -> service URL
	Topics       []TopicSpec
	Status       string        // progress file, rewritten every 100 ms
	Results      string        // the Results file written after the drain
	SendInterval time.Duration // pause between a producer's sends
	DrainTimeout time.Duration
	// Txn, when set, runs the transaction pipeline (txn.go).
	Txn *TxnSpec `json:",omitempty"`
}

// TopicSpec is one topic of a run.
type TopicSpec struct {
	Name  string // persistent://tenant/ns/topic
	Group string // the client (URL) it is used through
	Dedup bool   // its namespace has deduplication on
	// Remote is the client group of the cluster the topic replicates to
	// ("": none), where GeoSubscription receives the replicated messages.
	Remote string `json:",omitempty"`
	// Qw and Qa are its namespace's write and ack quorums (0: not one of
	// Namespaces): the availability a bookie fault should leave depends on
	// whether Qw > Qa.
	Qw, Qa int `json:",omitempty"`
}

// Ack is a send the broker acknowledged.
type Ack struct {
	Seq int64
	At  int64 // unix milliseconds when the acknowledgement arrived
	ID  string
}

// Receipt is one message a consumer or reader received.
type Receipt struct {
	Seq      int64
	Key      string
	ID       string
	Consumer int
	Bad      string `json:",omitempty"` // why the payload is not one the workload sent
	At       int64  `json:",omitempty"` // unix milliseconds when it was received
}

// TopicRecord is everything seen on one topic.
type TopicRecord struct {
	Spec      TopicSpec
	Producer  string
	Sent      int64 // sequences 0..Sent-1 were handed to Send
	Acked     []Ack
	Subs      map[string][]Receipt // subscription name -> receipts in arrival order
	Readers   [][]Receipt
	Recreated int      // consumers and readers re-created in the drain (see stuckAfter)
	Errors    []string `json:",omitempty"` // setup failures
}

// Results is the workload's output.
type Results struct {
	Topics    []*TopicRecord
	Drained   bool // every acknowledged message reached every subscription and reader
	StartedAt int64
	StoppedAt int64
	Txn       *TxnRecord `json:",omitempty"`
}

// Payload encodes a message: producer|seq|sendNanos|crc32.
func Payload(producer string, seq int64, sent time.Time) []byte {
	s := fmt.Sprintf("%s|%d|%d", producer, seq, sent.UnixNano())
	return []byte(fmt.Sprintf("%s|%08x", s, crc32.ChecksumIEEE([]byte(s))))
}

// ParsePayload returns the producer and sequence of a payload, or an error
// naming what is wrong with it.
func ParsePayload(p []byte) (string, int64, error) {
	s := string(p)
	i := strings.LastIndexByte(s, '|')
	if i < 0 {
		return "", 0, fmt.Errorf("no crc in %q", s)
	}
	if fmt.Sprintf("%08x", crc32.ChecksumIEEE([]byte(s[:i]))) != s[i+1:] {
		return "", 0, fmt.Errorf("crc mismatch in %q", s)
	}
	f := strings.Split(s[:i], "|")
	if len(f) != 3 {
		return "", 0, fmt.Errorf("want 3 fields in %q", s)
	}
	seq, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return "", 0, fmt.Errorf("bad sequence in %q", s)
	}
	return f[0], seq, nil
}

// KeyOf is the key of sequence seq (8 keys per producer).
func KeyOf(seq int64) string { return "k" + strconv.FormatInt(seq%8, 10) }

func idString(id pulsar.MessageID) string {
	return fmt.Sprintf("%d:%d:%d", id.LedgerID(), id.EntryID(), id.BatchIdx())
}

// RunWorkload is the workload process's body: args[0] is the config file.
// It returns the exit status.
func RunWorkload(args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "chaos workload: want the config file")
		return 2
	}
	raw, err := os.ReadFile(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var cfg WorkloadConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	w := newWorkload(cfg)
	defer w.closeClients()
	if err := w.setup(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos workload:", err)
		return 1
	}
	fmt.Fprintln(os.Stderr, "chaos workload: producing")
	go w.writeStatus()
	<-stop
	fmt.Fprintln(os.Stderr, "chaos workload: stopping producers, draining")
	res := w.stopAndDrain()
	out, _ := json.Marshal(res)
	if err := os.WriteFile(cfg.Results, out, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type workload struct {
	cfg       WorkloadConfig
	clients   map[string]pulsar.Client
	started   time.Time
	stopSend  chan struct{}
	stopRecv  chan struct{}
	producing sync.WaitGroup
	receiving sync.WaitGroup
	draining  atomic.Bool
	logger    plog.Logger
	txn       *txnPipeline // nil without Txn
	mu        struct {
		sync.Mutex
		topics []*TopicRecord
	}
}

func newWorkload(cfg WorkloadConfig) *workload {
	if cfg.SendInterval <= 0 {
		cfg.SendInterval = 20 * time.Millisecond
	}
	if cfg.DrainTimeout <= 0 {
		cfg.DrainTimeout = 60 * time.Second
	}
	return &workload{cfg: cfg, clients: map[string]pulsar.Client{}, started: time.Now(),
		stopSend: make(chan struct{}), stopRecv: make(chan struct{})}
}

func (w *workload) setup() error {
	// INFO, not WARN: the client's reconnect decisions (the backoff it
	// chose, when it connected again) are INFO lines, and the timelines
	// of the report (timeline.go) show where a gap's time went with them.
	w.logger = plog.NewLoggerWithSlog(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	for group, url := range w.cfg.URLs {
		c, err := pulsar.NewClient(pulsar.ClientOptions{URL: url, OperationTimeout: 60 * time.Second,
			ConnectionTimeout: 3 * time.Second, Logger: w.logger})
		if err != nil {
			return err
		}
		w.clients[group] = c
	}
	for _, spec := range w.cfg.Topics {
		rec := &TopicRecord{Spec: spec, Producer: "p-" + spec.Name[strings.LastIndexByte(spec.Name, '/')+1:],
			Subs: map[string][]Receipt{}, Readers: make([][]Receipt, ReadersPerTopic)}
		w.mu.Lock()
		w.mu.topics = append(w.mu.topics, rec)
		w.mu.Unlock()
		if err := w.startTopic(rec); err != nil {
			return fmt.Errorf("%s: %w", spec.Name, err)
		}
	}
	if w.cfg.Txn != nil {
		return w.startTxn(*w.cfg.Txn)
	}
	return nil
}

// retry calls create until it succeeds or a minute has passed: the Go
// client does not retry a first subscribe or producer create that a broker
// refused while a bundle moves.
func retry[T any](create func() (T, error)) (T, error) {
	deadline := time.Now().Add(time.Minute)
	for {
		v, err := create()
		if err == nil || time.Now().After(deadline) {
			return v, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// subscriptionsOf are a topic's subscriptions: Subscriptions in its own
// cluster, and GeoSubscription in the one it replicates to.
func subscriptionsOf(spec TopicSpec) []subscriptionSpec {
	out := make([]subscriptionSpec, 0, len(Subscriptions)+1)
	for _, s := range Subscriptions {
		out = append(out, subscriptionSpec{s.Name, s.Type, s.Consumers, spec.Group})
	}
	if spec.Remote != "" {
		out = append(out, subscriptionSpec{GeoSubscription, pulsar.Exclusive, 1, spec.Remote})
	}
	return out
}

type subscriptionSpec struct {
	Name      string
	Type      pulsar.SubscriptionType
	Consumers int
	Group     string // the client group it subscribes through
}

func (w *workload) startTopic(rec *TopicRecord) error {
	client := w.clients[rec.Spec.Group]
	for _, sub := range subscriptionsOf(rec.Spec) {
		subClient := w.clients[sub.Group]
		if subClient == nil {
			return fmt.Errorf("subscribe %s: no client group %q", sub.Name, sub.Group)
		}
		for c := range sub.Consumers {
			open := func() (pulsar.Consumer, error) {
				return retry(func() (pulsar.Consumer, error) {
					return subClient.Subscribe(pulsar.ConsumerOptions{Topic: rec.Spec.Name, SubscriptionName: sub.Name,
						Type: sub.Type, SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest,
						Name: fmt.Sprintf("%s-%d", sub.Name, c)})
				})
			}
			cons, err := open()
			if err != nil {
				return fmt.Errorf("subscribe %s: %w", sub.Name, err)
			}
			w.receiving.Add(1)
			go w.consume(rec, sub.Name, c, cons, open)
		}
	}
	for r := range ReadersPerTopic {
		var opened atomic.Int32
		open := func(from pulsar.MessageID) (pulsar.Reader, error) {
			// Named reader-<r>-<n> (n counts re-creations) so that the
			// brokers' reader trace can be matched to this reader.
			name := fmt.Sprintf("reader-%d-%d", r, opened.Add(1))
			return retry(func() (pulsar.Reader, error) {
				// A receiver queue of one: the Go client (v0.19) reader
				// drops the message its dispatcher holds when it
				// reconnects with more queued behind it, and the two
				// readers disagreed for the client's sake, not the
				// broker's (broker/compat_test.go,
				// TestGoReaderReconnectWhileHoldingAMessage).
				return client.CreateReader(pulsar.ReaderOptions{Topic: rec.Spec.Name, StartMessageID: from, ReceiverQueueSize: 1,
					SubscriptionName: name})
			})
		}
		rd, err := open(pulsar.EarliestMessageID())
		if err != nil {
			return fmt.Errorf("reader: %w", err)
		}
		w.receiving.Add(1)
		go w.read(rec, r, rd, open)
	}
	prod, err := retry(func() (pulsar.Producer, error) {
		return client.CreateProducer(pulsar.ProducerOptions{Topic: rec.Spec.Name, Name: rec.Producer,
			DisableBatching: true, SendTimeout: 30 * time.Second})
	})
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	w.producing.Add(1)
	go w.produce(rec, prod)
	return nil
}

func (w *workload) produce(rec *TopicRecord, prod pulsar.Producer) {
	defer w.producing.Done()
	defer prod.Close()
	for seq := int64(0); ; seq++ {
		select {
		case <-w.stopSend:
			return
		default:
		}
		w.mu.Lock()
		rec.Sent = seq + 1
		w.mu.Unlock()
		s := seq
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		id, err := prod.Send(ctx, &pulsar.ProducerMessage{Payload: Payload(rec.Producer, seq, time.Now()),
			Key: KeyOf(seq), SequenceID: &s})
		cancel()
		if err == nil {
			w.mu.Lock()
			rec.Acked = append(rec.Acked, Ack{Seq: seq, At: time.Now().UnixMilli(), ID: idString(id)})
			w.mu.Unlock()
		}
		time.Sleep(w.cfg.SendInterval)
	}
}

func (w *workload) receipt(rec *TopicRecord, m pulsar.Message, consumer int) Receipt {
	r := Receipt{Key: m.Key(), ID: idString(m.ID()), Consumer: consumer, At: time.Now().UnixMilli()}
	producer, seq, err := ParsePayload(m.Payload())
	switch {
	case err != nil:
		r.Bad = err.Error()
	case producer != rec.Producer:
		r.Bad = "producer " + producer + " never wrote to this topic"
	case m.Key() != KeyOf(seq):
		r.Bad = fmt.Sprintf("key %q, want %q", m.Key(), KeyOf(seq))
	}
	r.Seq = seq
	return r
}

// In the drain, a consumer or reader that received nothing for stuckAfter
// while what it reads still lacks acknowledged messages is closed and
// created again (at most maxRecreate times), as an application's watchdog
// would: the Go client (v0.19) registers a consumer's handler only after
// the SUBSCRIBE answer, so a CLOSE_CONSUMER the broker sends right after
// it (a bundle unloaded at that moment) is dropped ("Consumer with ID not
// found while closing consumer") and the consumer waits for ever. A
// re-created consumer resumes from its subscription's mark-delete
// position, a reader from the last message it received, so the checker
// still proves the broker kept everything. Re-creations are counted.
const (
	stuckAfter  = 10 * time.Second
	maxRecreate = 3
)

func (w *workload) stuck(rec *TopicRecord, last time.Time, recreated int, list func() []Receipt) bool {
	if !w.draining.Load() || time.Since(last) < stuckAfter || recreated >= maxRecreate {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	got := map[int64]bool{}
	for _, r := range list() {
		got[r.Seq] = true
	}
	for _, a := range rec.Acked {
		if !got[a.Seq] {
			rec.Recreated++
			return true
		}
	}
	return false
}

func (w *workload) consume(rec *TopicRecord, sub string, consumer int, cons pulsar.Consumer, open func() (pulsar.Consumer, error)) {
	defer w.receiving.Done()
	defer func() { cons.Close() }()
	last, recreated := time.Now(), 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		m, err := cons.Receive(ctx)
		cancel()
		if err == nil {
			r := w.receipt(rec, m, consumer)
			w.mu.Lock()
			rec.Subs[sub] = append(rec.Subs[sub], r)
			w.mu.Unlock()
			_ = cons.Ack(m)
			last = time.Now()
			continue
		}
		select {
		case <-w.stopRecv:
			return
		default:
		}
		if w.stuck(rec, last, recreated, func() []Receipt { return rec.Subs[sub] }) {
			fmt.Fprintf(os.Stderr, "chaos workload: %s %s-%d received nothing for %s while its subscription lacks acknowledged messages; re-creating it\n",
				rec.Spec.Name, sub, consumer, stuckAfter)
			cons.Close()
			if n, err := open(); err == nil {
				cons = n
			}
			last, recreated = time.Now(), recreated+1
		}
	}
}

func (w *workload) read(rec *TopicRecord, reader int, rd pulsar.Reader, open func(pulsar.MessageID) (pulsar.Reader, error)) {
	defer w.receiving.Done()
	defer func() { rd.Close() }()
	from := pulsar.EarliestMessageID()
	last, recreated := time.Now(), 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		m, err := rd.Next(ctx)
		cancel()
		if err == nil {
			r := w.receipt(rec, m, 0)
			w.mu.Lock()
			rec.Readers[reader] = append(rec.Readers[reader], r)
			w.mu.Unlock()
			from, last = m.ID(), time.Now()
			continue
		}
		select {
		case <-w.stopRecv:
			return
		default:
		}
		if w.stuck(rec, last, recreated, func() []Receipt { return rec.Readers[reader] }) {
			fmt.Fprintf(os.Stderr, "chaos workload: %s reader-%d received nothing for %s while it lacks acknowledged messages; re-creating it after %s\n",
				rec.Spec.Name, reader, stuckAfter, idString(from))
			rd.Close()
			if n, err := open(from); err == nil {
				rd = n
			}
			last, recreated = time.Now(), recreated+1
		}
	}
}

// status maps each topic to its acknowledged count.
func (w *workload) status() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for _, t := range w.mu.topics {
		out[t.Spec.Name] = len(t.Acked)
	}
	return out
}

func (w *workload) writeStatus() {
	for {
		select {
		case <-w.stopSend:
			return
		default:
		}
		raw, _ := json.Marshal(w.status())
		tmp := w.cfg.Status + ".tmp"
		if os.WriteFile(tmp, raw, 0o644) == nil {
			_ = os.Rename(tmp, w.cfg.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// missing counts acknowledged messages some subscription or reader has not
// received yet.
func (w *workload) missing() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, t := range w.mu.topics {
		lists := [][]Receipt{}
		for _, r := range t.Subs {
			lists = append(lists, r)
		}
		lists = append(lists, t.Readers...)
		if len(t.Subs) < len(subscriptionsOf(t.Spec)) {
			n++
		}
		for _, l := range lists {
			got := map[int64]bool{}
			for _, r := range l {
				got[r.Seq] = true
			}
			for _, a := range t.Acked {
				if !got[a.Seq] {
					n++
				}
			}
		}
	}
	return n
}

func (w *workload) stopAndDrain() *Results {
	stopped := time.Now()
	close(w.stopSend)
	w.producing.Wait()
	w.draining.Store(true)
	deadline := time.Now().Add(w.cfg.DrainTimeout)
	drained := false
	for time.Now().Before(deadline) {
		if w.missing() == 0 {
			drained = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if drained {
		time.Sleep(500 * time.Millisecond) // late duplicates still count
	}
	var txnRec *TxnRecord
	if w.txn != nil {
		w.txn.drain(func() []Ack { return w.ackedOf(w.txn.rec.Spec.Source) }, time.Now().Add(w.cfg.DrainTimeout))
		txnRec = w.txn.rec
	}
	close(w.stopRecv)
	w.receiving.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return &Results{Topics: w.mu.topics, Drained: drained, StartedAt: w.started.UnixMilli(), StoppedAt: stopped.UnixMilli(),
		Txn: txnRec}
}

// ackedOf is a copy of a topic's acknowledged sends.
func (w *workload) ackedOf(topic string) []Ack {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, t := range w.mu.topics {
		if t.Spec.Name == topic {
			return append([]Ack(nil), t.Acked...)
		}
	}
	return nil
}

func (w *workload) closeClients() {
	for _, c := range w.clients {
		c.Close()
	}
}
