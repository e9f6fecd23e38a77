package broker

// Tiered storage offload, on a topic (managedledger/bk_offload.go does
// the copying). Behavior:
//   - The policy in force is the topic's offloadPolicies, else its
//     namespace's offload settings (offload_policies, with
//     offload_threshold, offload_threshold_in_seconds and
//     offload_deletion_lag_ms over them where set), else the broker's
//     (managedLedgerOffloadDriver, managedLedgerOffloadAutoTriggerSizeThresholdBytes,
//     managedLedgerOffloadThresholdInSeconds, managedLedgerOffloadDeletionLagMs).
//   - Every retention check applies it to each loaded persistent topic:
//     ledgers past the thresholds are offloaded, oldest first, and their
//     bookie copies deleted once the lag passed.
//   - PUT .../offload with a message id offloads every closed ledger
//     before that message's ledger, in the background (409 while an
//     offload of the topic runs); GET .../offload answers its status and
//     the first message not offloaded, as Pulsar's OffloadProcessStatus.
//   - Storage without tiered storage (in-memory, or no driver set)
//     answers 501 to the admin calls naming what is missing; a policy
//     naming a driver this build does not have fails each offload with
//     an error naming the driver, kept in the status.

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/magnetar-io/magnetar/broker/admin"
	"github.com/magnetar-io/magnetar/broker/resources"
	"github.com/magnetar-io/magnetar/managedledger"
)

// offloadState is a topic's last offload. mu guards every field; it is
// never held across storage calls.
type offloadState struct {
	mu      sync.Mutex
	running bool
	status  string // "" is NOT_RUN
	lastErr string
	// lastPolicyErr is the last automatic offload's failure, logged once
	// until it changes.
	lastPolicyErr string
}

// offloadPolicy is the offload policy in force for the topic.
func (t *topic) offloadPolicy(ctx context.Context) managedledger.OffloadPolicy {
	if p, ok := topicPolicy[resources.OffloadPolicies](ctx, t, "offloadPolicies"); ok {
		return applyOffloadPolicies(t.b.cfg.Offload, &p)
	}
	ns := t.namespacePolicies(ctx)
	p := applyOffloadPolicies(t.b.cfg.Offload, ns.OffloadPolicies)
	if ns.OffloadThreshold >= 0 {
		p.ThresholdBytes = ns.OffloadThreshold
	}
	if v := ns.OffloadThresholdInSeconds; v != nil && *v >= 0 {
		p.ThresholdAge = time.Duration(*v) * time.Second
	}
	if v := ns.OffloadDeletionLagMs; v != nil {
		p.DeletionLag = time.Duration(*v) * time.Millisecond
	}
	return p
}

// applyOffloadPolicies is def with what op sets over it.
func applyOffloadPolicies(def managedledger.OffloadPolicy, op *resources.OffloadPolicies) managedledger.OffloadPolicy {
	if op == nil {
		return def
	}
	p := def
	if op.ManagedLedgerOffloadDriver != "" {
		p.Driver = op.ManagedLedgerOffloadDriver
	}
	switch {
	case op.ManagedLedgerOffloadThresholdInBytes != nil:
		p.ThresholdBytes = *op.ManagedLedgerOffloadThresholdInBytes
	case op.ManagedLedgerOffloadAutoTriggerSizeThresholdBytes != nil:
		p.ThresholdBytes = *op.ManagedLedgerOffloadAutoTriggerSizeThresholdBytes
	}
	if v := op.ManagedLedgerOffloadThresholdInSeconds; v != nil {
		p.ThresholdAge = time.Duration(*v) * time.Second
		if *v < 0 {
			p.ThresholdAge = -1
		}
	}
	if v := op.ManagedLedgerOffloadDeletionLagInMillis; v != nil {
		p.DeletionLag = time.Duration(*v) * time.Millisecond
	}
	return p
}

// checkOffloads applies each loaded persistent topic's offload policy.
func (b *Broker) checkOffloads(ctx context.Context) {
	for t := range b.topicPass() {
		o, ok := t.ml.(managedledger.Offloadable)
		if !ok || !t.name.Persistent() {
			continue
		}
		p := t.offloadPolicy(ctx)
		if p.Driver == "" {
			continue // no tiered storage for this topic
		}
		err := o.OffloadByPolicy(ctx, p)
		t.offload.mu.Lock()
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		changed := msg != t.offload.lastPolicyErr
		t.offload.lastPolicyErr = msg
		t.offload.mu.Unlock()
		if err != nil && changed {
			b.log.Warn("tiered storage offload failed; retried at the next retention check", "topic", t.name.String(), "err", err)
		}
	}
}

// TriggerOffload starts offloading every closed ledger before the
// message's ledger (admin.Offloads).
func (b *Broker) TriggerOffload(ctx context.Context, name string, upTo admin.MessageID) error {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return err
	}
	o, ok := t.ml.(managedledger.Offloadable)
	if !ok || !t.name.Persistent() || b.cfg.Offload.Driver == "" && t.offloadPolicy(ctx).Driver == "" {
		return admin.Errorf(admin.ErrNotSupported, "offload of %s: tiered storage offload is not configured "+
			"(set managedLedgerOffloadDriver; in-memory storage has no ledgers to offload)", name)
	}
	s := &t.offload
	s.mu.Lock()
	if s.running {
		s.mu.Unlock()
		return admin.Errorf(resources.ErrConflict, "offload of %s already running", name)
	}
	s.running, s.status, s.lastErr = true, "RUNNING", ""
	s.mu.Unlock()
	driver := t.offloadPolicy(ctx).Driver
	pos := managedledger.Position{LedgerID: upTo.LedgerID, EntryID: upTo.EntryID}
	go func() {
		_, err := o.OffloadPrefix(context.Background(), driver, pos)
		s.mu.Lock()
		s.running = false
		if err != nil {
			s.status, s.lastErr = "ERROR", err.Error()
		} else {
			s.status = "SUCCESS"
		}
		s.mu.Unlock()
		if err != nil {
			b.log.Warn("topic offload failed", "topic", t.name.String(), "err", err)
		}
	}()
	return nil
}

// OffloadStatus is the topic's last requested offload (admin.Offloads).
func (b *Broker) OffloadStatus(ctx context.Context, name string) (admin.OffloadStatus, error) {
	t, err := b.existingAdminTopic(ctx, name)
	if err != nil {
		return admin.OffloadStatus{}, err
	}
	s := &t.offload
	s.mu.Lock()
	st := admin.OffloadStatus{LongRunningStatus: admin.LongRunningStatus{Status: s.status, LastError: s.lastErr}}
	s.mu.Unlock()
	if st.Status == "" {
		st.Status = "NOT_RUN"
	}
	first := t.ml.LastConfirmed()
	first.EntryID++
	if o, ok := t.ml.(managedledger.Offloadable); ok {
		first = o.FirstNotOffloaded()
	}
	st.FirstUnoffloaded = admin.OffloadedMessageID{LedgerID: first.LedgerID, EntryID: first.EntryID, PartitionIndex: -1}
	if _, i, ok := partitionOf(t.name); ok {
		st.FirstUnoffloaded.PartitionIndex = i
	}
	return st, nil
}

// checkOffloadPolicies validates a topic's offloadPolicies.
func checkOffloadPolicies(raw json.RawMessage) error {
	var p resources.OffloadPolicies
	if err := json.Unmarshal(raw, &p); err != nil {
		return admin.Errorf(admin.ErrBadRequest, "offloadPolicies: %s is not a valid value: %v", raw, err)
	}
	return admin.CheckOffloadDriver(p.ManagedLedgerOffloadDriver)
}

// offloadPoliciesOf is the broker's policy as Pulsar's OffloadPolicies.
func offloadPoliciesOf(p managedledger.OffloadPolicy) resources.OffloadPolicies {
	age := int64(-1)
	if p.ThresholdAge >= 0 {
		age = int64(p.ThresholdAge / time.Second)
	}
	lag := int64(-1)
	if p.DeletionLag >= 0 {
		lag = p.DeletionLag.Milliseconds()
	}
	return resources.OffloadPolicies{ManagedLedgerOffloadDriver: p.Driver, ManagedLedgerOffloadThresholdInBytes: &p.ThresholdBytes,
		ManagedLedgerOffloadThresholdInSeconds: &age, ManagedLedgerOffloadDeletionLagInMillis: &lag}
}
