package chaos

// The transaction pipeline (scenario txn-pipeline, issue 39): a
// consume-transform-produce loop reads the run's first deduplicated topic
// A on a Shared subscription and, in one transaction per batch, writes
// each message to sinks B and C and acknowledges it on A, while brokers
// and bookies are killed and the coordinators' bundles move.
//
// The checker proves exactly-once: after the drain a fresh reader reads B
// and C whole, and every message A's producer had acknowledged is there
// exactly once, nothing is there that A was never sent; and no message
// of an aborted transaction was ever delivered: every message the live
// consumers of B and C received is the very message (same id) the final
// read finds for that sequence.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TxnSpec is the pipeline of a run.
type TxnSpec struct {
	Source       string // A: a topic of the run (its producer and checks are the usual ones)
	SinkB, SinkC string
	Group        string // client group
}

// TxnRecord is what the pipeline saw.
type TxnRecord struct {
	Spec      TxnSpec
	Committed int // transactions committed
	Failed    int // transactions aborted or whose commit failed
	// Live are what the live consumers of B and C received; Final what a
	// reader found in B and C after the drain.
	Live, Final map[string][]Receipt
	Errors      []string `json:",omitempty"`
}

// txnBatch is the most messages one transaction carries.
const txnBatch = 10

// txnPipeline runs the loop and the sinks' consumers.
type txnPipeline struct {
	w      *workload
	client pulsar.Client
	rec    *TxnRecord
	stop   chan struct{}
	done   sync.WaitGroup
	mu     sync.Mutex // guards rec
}

func (w *workload) startTxn(spec TxnSpec) error {
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: w.cfg.URLs[spec.Group], OperationTimeout: 60 * time.Second,
		ConnectionTimeout: 3 * time.Second, EnableTransaction: true, Logger: w.logger})
	if err != nil {
		return fmt.Errorf("transaction client: %w", err)
	}
	p := &txnPipeline{w: w, client: client, stop: make(chan struct{}),
		rec: &TxnRecord{Spec: spec, Live: map[string][]Receipt{}, Final: map[string][]Receipt{}}}
	w.txn = p
	for _, sink := range []string{spec.SinkB, spec.SinkC} {
		cons, err := retry(func() (pulsar.Consumer, error) {
			return client.Subscribe(pulsar.ConsumerOptions{Topic: sink, SubscriptionName: "live", Type: pulsar.Exclusive,
				SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest})
		})
		if err != nil {
			return fmt.Errorf("subscribe %s: %w", sink, err)
		}
		p.done.Add(1)
		go p.consumeSink(sink, cons)
	}
	src, err := retry(func() (pulsar.Consumer, error) {
		return client.Subscribe(pulsar.ConsumerOptions{Topic: spec.Source, SubscriptionName: "transform", Type: pulsar.Shared,
			SubscriptionInitialPosition: pulsar.SubscriptionPositionEarliest, NackRedeliveryDelay: 500 * time.Millisecond})
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", spec.Source, err)
	}
	prods := make([]pulsar.Producer, 2)
	for i, sink := range []string{spec.SinkB, spec.SinkC} {
		if prods[i], err = retry(func() (pulsar.Producer, error) {
			return client.CreateProducer(pulsar.ProducerOptions{Topic: sink, DisableBatching: true, SendTimeout: 30 * time.Second})
		}); err != nil {
			return fmt.Errorf("producer %s: %w", sink, err)
		}
	}
	p.done.Add(1)
	go p.transform(src, prods)
	return nil
}

func (p *txnPipeline) stopped() bool {
	select {
	case <-p.stop:
		return true
	default:
		return false
	}
}

// transform runs transactions until stopped.
func (p *txnPipeline) transform(src pulsar.Consumer, prods []pulsar.Producer) {
	defer p.done.Done()
	for !p.stopped() {
		batch := receiveBatch(src, txnBatch)
		if len(batch) == 0 {
			continue
		}
		err := p.oneTransaction(src, prods, batch)
		p.mu.Lock()
		if err == nil {
			p.rec.Committed++
		} else {
			p.rec.Failed++
			if n := p.rec.Failed; n <= 20 || n%100 == 0 {
				// In the workload's log: why transactions fail under a
				// fault (a run where they keep failing is a liveness bug).
				fmt.Fprintf(os.Stderr, "chaos workload: transaction %d failed: %v\n", n, err)
			}
		}
		p.mu.Unlock()
		if err != nil {
			// Given out again: an aborted transaction's acknowledgements
			// come back from the broker; a message never acknowledged in
			// it is nacked.
			for _, m := range batch {
				src.Nack(m)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// receiveBatch takes up to n messages, waiting at most 300 ms for the
// first and 20 ms for each next one. A message that comes twice is taken
// once: an aborted transaction's acknowledgements come back from the
// broker and the pipeline also nacks what it failed on, so the consumer
// may get a message twice in a row, and acknowledging it twice in one
// transaction is allowed (the broker holds the position for that
// transaction already), which would commit its copies twice. (Across
// transactions the broker refuses the second acknowledgement with
// TransactionConflict.)
func receiveBatch(src pulsar.Consumer, n int) []pulsar.Message {
	var out []pulsar.Message
	seen := map[string]bool{}
	wait := 300 * time.Millisecond
	for len(out) < n {
		ctx, cancel := context.WithTimeout(context.Background(), wait)
		m, err := src.Receive(ctx)
		cancel()
		if err != nil {
			break
		}
		wait = 20 * time.Millisecond
		if id := idString(m.ID()); !seen[id] {
			seen[id] = true
			out = append(out, m)
		}
	}
	return out
}

// oneTransaction writes the batch to both sinks and acknowledges it in
// one transaction; on any error the transaction is aborted.
func (p *txnPipeline) oneTransaction(src pulsar.Consumer, prods []pulsar.Producer, batch []pulsar.Message) error {
	tx, err := p.client.NewTransaction(20 * time.Second)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	for _, m := range batch {
		for _, prod := range prods {
			if _, err = prod.Send(ctx, &pulsar.ProducerMessage{Payload: m.Payload(), Transaction: tx}); err != nil {
				break
			}
		}
		if err == nil {
			err = src.AckWithTxn(m, tx)
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		if err = tx.Commit(ctx); err == nil {
			return nil
		}
	}
	_ = tx.Abort(ctx)
	return errors.Join(errors.New("transaction failed"), err)
}

// consumeSink records what a sink's live consumer receives.
func (p *txnPipeline) consumeSink(sink string, cons pulsar.Consumer) {
	defer p.done.Done()
	defer cons.Close()
	for !p.stopped() {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		m, err := cons.Receive(ctx)
		cancel()
		if err != nil {
			continue
		}
		r := receiptOf(m, 0)
		p.mu.Lock()
		p.rec.Live[sink] = append(p.rec.Live[sink], r)
		p.mu.Unlock()
		_ = cons.Ack(m)
	}
}

// receiptOf is m as a receipt.
func receiptOf(m pulsar.Message, consumer int) Receipt {
	r := Receipt{ID: idString(m.ID()), Key: m.Key(), Consumer: consumer}
	_, seq, err := ParsePayload(m.Payload())
	if err != nil {
		r.Bad = err.Error()
		return r
	}
	r.Seq = seq
	return r
}

// readAll reads a sink whole with a fresh reader.
func (p *txnPipeline) readAll(sink string) ([]Receipt, error) {
	rd, err := retry(func() (pulsar.Reader, error) {
		return p.client.CreateReader(pulsar.ReaderOptions{Topic: sink, StartMessageID: pulsar.EarliestMessageID()})
	})
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []Receipt
	for rd.HasNext() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		m, err := rd.Next(ctx)
		cancel()
		if err != nil {
			return out, err
		}
		out = append(out, receiptOf(m, 0))
	}
	return out, nil
}

// drain waits (to deadline) until both sinks hold every message A's
// producer had acknowledged, then stops the pipeline and keeps the final
// reads.
func (p *txnPipeline) drain(acked func() []Ack, deadline time.Time) {
	for {
		done := true
		for _, sink := range []string{p.rec.Spec.SinkB, p.rec.Spec.SinkC} {
			got, err := p.readAll(sink)
			p.mu.Lock()
			p.rec.Final[sink] = got
			p.mu.Unlock()
			if err != nil || !covers(got, acked()) {
				done = false
			}
		}
		if done || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	time.Sleep(500 * time.Millisecond) // the live consumers catch up
	close(p.stop)
	p.done.Wait()
	p.client.Close()
}

func covers(got []Receipt, acked []Ack) bool {
	have := map[int64]bool{}
	for _, r := range got {
		have[r.Seq] = true
	}
	for _, a := range acked {
		if !have[a.Seq] {
			return false
		}
	}
	return true
}

// checkTxn checks the pipeline's sinks against A's record.
func checkTxn(v *Verdict, rec *TxnRecord, source *TopicRecord) {
	if rec == nil || source == nil {
		return
	}
	v.TxnCommitted, v.TxnFailed = rec.Committed, rec.Failed
	for _, e := range rec.Errors {
		v.problem("transactions: %s", e)
	}
	for _, sink := range []string{rec.Spec.SinkB, rec.Spec.SinkC} {
		final := rec.Final[sink]
		count, idOf := map[int64]int{}, map[int64]string{}
		for _, r := range final {
			if r.Bad != "" || r.Seq < 0 || r.Seq >= source.Sent {
				v.Phantom++
				v.problem("%s: message %s not sent to %s (%s)", sink, r.ID, source.Spec.Name, r.Bad)
				continue
			}
			count[r.Seq]++
			idOf[r.Seq] = r.ID
		}
		for _, a := range source.Acked {
			switch n := count[a.Seq]; {
			case n == 0:
				v.Lost++
				v.problem("%s: sequence %d of %s never committed to it", sink, a.Seq, source.Spec.Name)
			case n > 1:
				v.Duplicated++
				v.problem("%s: sequence %d committed %d times (exactly once broken)", sink, a.Seq, n)
			}
		}
		for seq, n := range count {
			if n > 1 && !ackedSeq(source, seq) {
				v.Duplicated++
				v.problem("%s: unacknowledged sequence %d committed %d times", sink, seq, n)
			}
		}
		for _, r := range rec.Live[sink] {
			if id, ok := idOf[r.Seq]; r.Bad == "" && (!ok || id != r.ID) {
				v.AbortedDelivered++
				v.problem("%s: the live consumer got sequence %d as %s, which is not in the topic's committed content (%s)",
					sink, r.Seq, r.ID, id)
			}
		}
	}
}

func ackedSeq(t *TopicRecord, seq int64) bool {
	for _, a := range t.Acked {
		if a.Seq == seq {
			return true
		}
	}
	return false
}
