package broker

// Topic and subscription dispatch rates, as Pulsar's dispatch rate
// limiters (dispatchRate, subscriptionDispatchRate): what one topic, all
// its subscriptions together, and what one subscription may send to
// consumers per period, in messages and in bytes.
//
// Behaviour:
//   - The rate in force is the topic's own policy, else its namespace's
//     for this cluster (topicDispatchRate / subscriptionDispatchRate), else
//     the broker's dispatchThrottlingRatePer{Topic,Subscription}In{Msg,Byte}
//     a second (both 0: none); relativeToPublishRate adds the topic's
//     publish rate, as for replicators (dispatchrate.go).
//   - refreshDispatchRates applies it to every loaded topic each
//     dispatchRateRefresh, so a policy or dynamic setting change applies
//     within a second, without a reload.
//   - A subscription's read asks both limiters: it reads at most the
//     message permits left in either; with none left it reads nothing and
//     a timer dispatches again when one is due. What went out is taken
//     from both afterwards (so a read of large batches can overdraw, and
//     the debt is waited off). Redeliveries count as dispatches, as in
//     Pulsar.
//
// Lock order: subscription.mu, then a limiter's own mu (a leaf).

import (
	"context"
	"time"

	"github.com/magnetar-io/magnetar/broker/resources"
)

// dispatchRateRefresh is how often the rates in force are applied.
const dispatchRateRefresh = time.Second

// refreshDispatchRates applies the topic and subscription dispatch rates
// in force, the publish rate and the subscribe rate to every loaded
// persistent topic and its subscriptions, and returns how many topics it
// applied them to.
//
// A topic left with no rate limited at all is skipped while nothing the
// rates are computed from changed (ratesUnchanged): at 10,000 topics the
// pass was a second's largest run of broker CPU (24 ms a second, half of
// all the periodic passes), and the 10,000-topic publish tail follows the
// passes (TUNING.md). A topic with any rate limited is applied every pass:
// a rate relative to the publish rate moves with it, and a subscribe
// rate's unused buckets are dropped there.
func (b *Broker) refreshDispatchRates(ctx context.Context) int {
	now := time.Now()
	in, stable := b.rateInputs()
	namespaces := passNamespaces{}
	applied := 0
	for t := range b.topicPass() {
		if !t.name.Persistent() || (stable && t.ratesUnchanged(in)) {
			continue
		}
		// Both reads are cached: a pass over 10,000 topics stays in memory.
		limited := b.applyRates(t, namespaces.of(ctx, t), t.ownPolicies(ctx), now)
		applied++
		if stable && !limited {
			t.ratesAppliedAt.Store(&in)
		} else {
			t.ratesAppliedAt.Store(nil)
		}
	}
	return applied
}

// passNamespaces reads each namespace's policies once per pass: the cache
// hands out a copy per read, and a pass over 10,000 topics of one
// namespace made 10,000 of them a second (a tenth of a many-topics
// standalone's allocation, TUNING.md).
type passNamespaces map[passNamespace]resources.Policies

type passNamespace struct{ tenant, namespace string } // no string built per topic

// of returns t's namespace's policies, read at the first of its topics.
func (p passNamespaces) of(ctx context.Context, t *topic) resources.Policies {
	key := passNamespace{t.name.Tenant, t.name.Namespace}
	ns, seen := p[key]
	if !seen {
		ns = t.namespacePolicies(ctx)
		p[key] = ns
	}
	return ns
}

// applyRates applies the rates in force under the namespace's policies ns
// and the topic's own to t and its subscriptions, and reports whether any
// of them limits anything.
func (b *Broker) applyRates(t *topic, ns resources.Policies, own resources.TopicPolicies, now time.Time) (limited bool) {
	cluster, publish := b.cfg.ClusterName, t.rates.current()
	topicOwn, _ := resources.TopicPolicy[*resources.DispatchRate](own, cluster, "dispatchRate")
	subOwn, _ := resources.TopicPolicy[*resources.DispatchRate](own, cluster, "subscriptionDispatchRate")
	topicRate := dispatchRateOf(b.topicDispatchRate(ns, topicOwn), publish)
	t.dispatchLimit.setRate(topicRate, now)
	publishOwn, _ := resources.TopicPolicy[*resources.PublishRate](own, cluster, "publishRate")
	pr := b.publishRate(ns, publishOwn)
	publishLimit := dispatchRate{Msgs: int64(pr.PublishThrottlingRateInMsg), Bytes: pr.PublishThrottlingRateInByte, Period: time.Second}
	t.publishLimit.setRate(publishLimit, now)
	t.publishLimited.Store(publishLimit.limited())
	subscribeOwn, _ := resources.TopicPolicy[*resources.SubscribeRate](own, cluster, "subscribeRate")
	subscribeLimited := t.refreshSubscribeRate(b.subscribeRate(ns, subscribeOwn), now)
	subRate := dispatchRateOf(b.subscriptionDispatchRate(ns, subOwn), publish)
	t.subRate.Store(&subRate)
	for _, s := range t.allSubs() {
		s.limiter.setRate(subRate, now)
	}
	return topicRate.limited() || publishLimit.limited() || subRate.limited() || subscribeLimited
}

// rateInputs is what the rates in force are computed from, besides a
// topic's publish rate (which only a limited rate uses): the versions of
// the namespace and topic policy caches and the dynamic settings.
type rateInputs struct {
	namespaces, topics uint64
	settings           *dynamicSettings
}

// rateInputs returns the inputs as they are now, taken before any policy
// is read so that a change made during the pass moves them for the next;
// stable is false while a policy cache reads through to the store, when
// its version says nothing.
func (b *Broker) rateInputs() (in rateInputs, stable bool) {
	in.settings = b.settings()
	res := b.cfg.Resources
	if res == nil {
		return in, true // no policies: the settings alone
	}
	var nsLive, topicsLive bool
	in.namespaces, nsLive = res.NamespacePoliciesVersion()
	in.topics, topicsLive = res.TopicPoliciesVersion()
	return in, nsLive && topicsLive
}

// ratesUnchanged reports whether t was left with no rate limited by a
// pass with the same inputs as in: applying them again would change
// nothing.
func (t *topic) ratesUnchanged(in rateInputs) bool {
	last := t.ratesAppliedAt.Load()
	return last != nil && *last == in
}

// namespacePolicies are the topic's namespace's policies (cached; none
// when there is no store or they cannot be read now).
func (t *topic) namespacePolicies(ctx context.Context) resources.Policies {
	if res := t.b.cfg.Resources; res != nil {
		if p, err := res.NamespaceShared(ctx, t.name.Tenant, t.name.Namespace); err == nil {
			return p
		}
	}
	return resources.Policies{}
}

// topicDispatchRate is the topic dispatch rate in force: the topic's own
// (own), else its namespace's for this cluster, else the broker's.
func (b *Broker) topicDispatchRate(ns resources.Policies, own *resources.DispatchRate) resources.DispatchRate {
	s := b.settings()
	return inForce(own, ns.TopicDispatchRate, b.cfg.ClusterName, perSecond(s.topicMsgRate, s.topicByteRate))
}

// subscriptionDispatchRate is topicDispatchRate for each subscription.
func (b *Broker) subscriptionDispatchRate(ns resources.Policies, own *resources.DispatchRate) resources.DispatchRate {
	s := b.settings()
	return inForce(own, ns.SubscriptionDispatchRate, b.cfg.ClusterName, perSecond(s.subMsgRate, s.subByteRate))
}

// perSecond is a broker setting's dispatch rate: msgs and bytes a second.
func perSecond(msgs, bytes int64) resources.DispatchRate {
	return resources.DispatchRate{DispatchThrottlingRateInMsg: int(msgs), DispatchThrottlingRateInByte: bytes, RatePeriodInSecond: 1}
}

// publishRate is the publish rate in force: the topic's own (own), else
// its namespace's publishMaxMessageRate for this cluster, else
// maxPublishRatePerTopicIn{Messages,Bytes}.
func (b *Broker) publishRate(ns resources.Policies, own *resources.PublishRate) resources.PublishRate {
	s := b.settings()
	return inForce(own, ns.PublishMaxMessageRate, b.cfg.ClusterName,
		resources.PublishRate{PublishThrottlingRateInMsg: int(s.publishMsgRate), PublishThrottlingRateInByte: s.publishByteRate})
}

// throttlePublish charges a SEND to its topic's publish rate and, when
// the topic is over it, stops reading the connection until the rate
// allows more, as Pulsar throttles a producer's connection: the client's
// next SENDs wait in the socket, and TCP pushes back.
func (c *serverConn) throttlePublish(t *topic, msgs, bytes int64) {
	if !t.publishLimited.Load() {
		return
	}
	t.publishLimit.consume(msgs, bytes)
	_, wait := t.publishLimit.permits(time.Now())
	if wait <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed || c.pausedFor&pausePublishRate != 0 {
		return // a resume is already scheduled
	}
	c.pauseLocked(pausePublishRate)
	time.AfterFunc(wait, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.resumeLocked(pausePublishRate)
	})
}

// ratePermitsLocked is how many messages the dispatch rates let the
// subscription read now; ok is false when none, and a timer will
// dispatch again when some are due.
func (s *subscription) ratePermitsLocked(now time.Time) (permits int64, ok bool) {
	topicMsgs, topicWait := s.topic.dispatchLimit.permits(now)
	subMsgs, subWait := s.limiter.permits(now)
	if wait := max(topicWait, subWait); wait > 0 {
		if !s.rateWait {
			s.rateWait = true
			time.AfterFunc(wait, func() {
				s.mu.Lock()
				s.rateWait = false
				s.mu.Unlock()
				s.dispatch()
			})
		}
		return 0, false
	}
	return int64(min(topicMsgs, subMsgs)), true
}

// tookFromRates charges what went out to both limiters.
func (s *subscription) tookFromRates(out []delivery) {
	var msgs, bytes int64
	for _, d := range out {
		msgs += int64(d.messages)
		bytes += int64(len(d.entry.Data))
	}
	s.topic.dispatchLimit.consume(msgs, bytes)
	s.limiter.consume(msgs, bytes)
}
