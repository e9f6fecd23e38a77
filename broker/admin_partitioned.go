package broker

// Admin calls about a whole partitioned topic: partitioned-stats and
// DELETE .../partitions. A partitioned topic has no owner of its own, so
// these run on any broker and reach each partition where it is served:
// here, or over HTTP on its owner (following redirects).
//
// Behaviour:
//   - partitioned-stats sums the partitions' stats (subscriptions merged
//     by name) and lists them by partition name when perPartition is not
//     false, as Pulsar. A partition never used has zero stats.
//   - DELETE .../partitions first checks every partition (412 while one has
//     producers or consumers, unless force=true), then deletes the stored
//     partitions, then the partition count and the schema. A partition that
//     cannot be deleted stops it before the partition count goes.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/broker/ownership"
	"github.com/magnetar-io/magnetar/metadata"
)

// remoteTimeout bounds one admin call to another broker.
const remoteTimeout = 30 * time.Second

type partitionedStatsJSON struct {
	topicStatsJSON
	Metadata   partitionedMetadata       `json:"metadata"`
	Partitions map[string]topicStatsJSON `json:"partitions,omitempty"`
}

func (b *Broker) httpPartitionedStats(w http.ResponseWriter, r *http.Request, name TopicName) {
	ctx := r.Context()
	n, err := b.partitions(ctx, name)
	if err == nil && n == 0 {
		err = fmt.Errorf("topic %s: %w", name, errNotPartitioned)
	}
	if err != nil {
		adminError(w, err)
		return
	}
	out := partitionedStatsJSON{Metadata: partitionedMetadata{Partitions: n}, Partitions: map[string]topicStatsJSON{},
		topicStatsJSON: topicStatsJSON{Subscriptions: map[string]subscriptionStatsJSON{}, Replication: map[string]struct{}{},
			Publishers: []publisherStatsJSON{}}}
	for i := range n {
		p := partitionName(name, i)
		st, err := b.partitionStats(ctx, p)
		if err != nil {
			adminError(w, err)
			return
		}
		out.add(st)
		out.Partitions[p.String()] = st
	}
	if r.URL.Query().Get("perPartition") == "false" {
		out.Partitions = nil
	}
	writeJSON(w, out)
}

// add sums one partition's stats into the partitioned topic's.
func (s *partitionedStatsJSON) add(p topicStatsJSON) {
	s.MsgRateIn += p.MsgRateIn
	s.MsgRateOut += p.MsgRateOut
	s.MsgThroughputIn += p.MsgThroughputIn
	s.MsgThroughputOut += p.MsgThroughputOut
	if s.MsgRateIn > 0 {
		s.AverageMsgSize = s.MsgThroughputIn / s.MsgRateIn
	}
	s.MsgInCounter += p.MsgInCounter
	s.MsgOutCounter += p.MsgOutCounter
	s.BytesInCounter += p.BytesInCounter
	s.BytesOutCounter += p.BytesOutCounter
	s.StorageSize += p.StorageSize
	s.BacklogSize += p.BacklogSize
	s.DeduplicationStatus = p.DeduplicationStatus
	s.Publishers = append(s.Publishers, p.Publishers...)
	for name, sub := range p.Subscriptions {
		sum, ok := s.Subscriptions[name]
		if !ok {
			sum = subscriptionStatsJSON{Type: sub.Type, IsDurable: sub.IsDurable, Consumers: []consumerStatsJSON{}}
		}
		sum.MsgBacklog += sub.MsgBacklog
		sum.MsgBacklogNoDelayed += sub.MsgBacklogNoDelayed
		sum.BacklogSize += sub.BacklogSize
		sum.MsgDelayed += sub.MsgDelayed
		sum.UnackedMessages += sub.UnackedMessages
		sum.MsgRateOut += sub.MsgRateOut
		sum.Consumers = append(sum.Consumers, sub.Consumers...)
		s.Subscriptions[name] = sum
	}
}

// partitionStats is one partition's stats, from the broker serving it;
// zero for a partition that does not exist yet.
func (b *Broker) partitionStats(ctx context.Context, p TopicName) (topicStatsJSON, error) {
	empty := topicStatsJSON{Subscriptions: map[string]subscriptionStatsJSON{}, Publishers: []publisherStatsJSON{}}
	res, err := b.lookup(ctx, p, false)
	if err != nil {
		return empty, err
	}
	if !res.Self {
		var st topicStatsJSON
		err := callBroker(ctx, http.MethodGet, brokerTopicURL(res, p, "/stats", nil), &st)
		if statusOf(err) == http.StatusNotFound {
			return empty, nil
		}
		return st, err
	}
	ok, err := b.topicExists(ctx, p)
	if err != nil || !ok {
		return empty, err
	}
	t, err := b.getTopic(ctx, p)
	if err != nil {
		return empty, err
	}
	return b.statsOf(t), nil
}

func (b *Broker) httpDeletePartitioned(w http.ResponseWriter, r *http.Request, name TopicName) {
	ctx, force := r.Context(), r.URL.Query().Get("force") == "true"
	n, err := b.partitions(ctx, name)
	if err == nil && n == 0 {
		err = fmt.Errorf("topic %s: %w", name, errNotPartitioned)
	}
	if err == nil && !force {
		err = b.checkPartitionsIdle(ctx, name, n)
	}
	for i := 0; i < n && err == nil; i++ {
		err = b.deletePartition(ctx, partitionName(name, i))
	}
	if err == nil {
		err = b.cfg.Metadata.Delete(ctx, partitionedPath(name), metadata.AnyVersion)
	}
	if err == nil {
		b.log.Info("partitioned topic deleted", "topic", name.String(), "partitions", n, "force", force)
		err = b.deleteSchema(ctx, name)
	}
	if err != nil {
		adminError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// checkPartitionsIdle fails with errInUse if a partition has producers or
// consumers.
func (b *Broker) checkPartitionsIdle(ctx context.Context, name TopicName, n int) error {
	for i := range n {
		p := partitionName(name, i)
		st, err := b.partitionStats(ctx, p)
		if err != nil {
			return err
		}
		consumers := 0
		for _, s := range st.Subscriptions {
			consumers += len(s.Consumers)
		}
		if len(st.Publishers)+consumers > 0 {
			return fmt.Errorf("partition %s %w: %d producers, %d consumers", p, errInUse, len(st.Publishers), consumers)
		}
	}
	return nil
}

// deletePartition deletes one partition (disconnecting its clients) where
// it is served; a partition never stored is skipped.
func (b *Broker) deletePartition(ctx context.Context, p TopicName) error {
	res, err := b.lookup(ctx, p, false)
	if err != nil {
		return err
	}
	if res.Self {
		err = b.deleteTopic(ctx, p, true)
	} else {
		err = callBroker(ctx, http.MethodDelete, brokerTopicURL(res, p, "", url.Values{"force": {"true"}}), nil)
	}
	if errors.Is(err, errTopicNotFound) || statusOf(err) == http.StatusNotFound {
		return nil
	}
	return err
}

// brokerTopicURL is the admin URL of a topic call on the broker a lookup
// pointed to: the owner (authoritative) or one to ask again.
func brokerTopicURL(res ownership.LookupResult, p TopicName, suffix string, q url.Values) string {
	if q == nil {
		q = url.Values{}
	}
	q.Set("authoritative", strconv.FormatBool(res.Authoritative || !res.Redirect))
	return strings.TrimSuffix(res.HTTPURL, "/") + "/admin/v2/" + p.Domain + "/" + p.Tenant + "/" + p.Namespace + "/" +
		url.PathEscape(p.Local) + suffix + "?" + q.Encode()
}

// remoteError is another broker's answer to an admin call; statusOf
// passes its status on.
type remoteError struct {
	code   int
	reason string
}

func (e *remoteError) Error() string { return e.reason }

// callBroker makes an admin call on another broker and decodes its JSON
// answer into out (nil: the body is ignored).
func callBroker(ctx context.Context, method, target string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, target, nil)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, target, err)
	}
	resp, err := (&http.Client{Timeout: remoteTimeout}).Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, target, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		var e struct {
			Reason string `json:"reason"`
		}
		_ = json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&e)
		return &remoteError{code: resp.StatusCode, reason: fmt.Sprintf("%s %s: %d %s", method, target, resp.StatusCode, e.Reason)}
	}
	if out == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decode answer: %w", method, target, err)
	}
	return nil
}
