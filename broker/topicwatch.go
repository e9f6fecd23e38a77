package broker

// Topic-list watchers (WATCH_TOPIC_LIST, WATCH_TOPIC_LIST_SUCCESS,
// WATCH_TOPIC_UPDATE, WATCH_TOPIC_LIST_CLOSE), as Pulsar's TopicListService
// answers them: a pattern consumer (the Java client's, when CONNECTED
// advertises supports_topic_watchers) watches a namespace's persistent
// topics matching a pattern and is told of new and deleted topics at once
// instead of at its next poll of GET_TOPICS_OF_NAMESPACE.
//
// Behaviour:
//   - The pattern is matched, as Pulsar's TopicList.filterTopics does,
//     against the topic name without its domain scheme and, for a
//     partition, against its partitioned topic's name; the answer lists
//     full names (partitions included) and their hash (topicsHash).
//   - WATCH_TOPIC_LIST answers WATCH_TOPIC_LIST_SUCCESS with the matching
//     topics, or with none when the client's topics_hash already matches.
//   - This broker's changes to a namespace's topics (a topic loaded or
//     deleted, a partitioned topic created, updated or deleted) make every
//     watcher of it re-read the list and send the difference, if any, in
//     one WATCH_TOPIC_UPDATE. Topics created by another broker of the
//     cluster reach a watcher only through that broker's own watchers: the
//     client's periodic discovery still covers them.
//   - WATCH_TOPIC_LIST_CLOSE removes the watcher and answers SUCCESS; a
//     connection's watchers end with it.
//
// Lock rules: topicWatchers.mu guards the watcher sets; a watcher's own mu
// guards its last list and is held while its update is computed and sent,
// so its updates go out in order. Neither is held while taking the other.

import (
	"context"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// topicWatchers are a broker's topic-list watchers by namespace
// ("tenant/namespace").
type topicWatchers struct {
	mu   sync.Mutex
	byNS map[string]map[*topicWatcher]struct{}
}

type topicWatcher struct {
	conn      *serverConn
	id        uint64
	tenant    string
	namespace string
	pattern   *regexp.Regexp

	mu   sync.Mutex
	last []string // the topics last told, sorted
}

// topicsHash is Pulsar's TopicList.calculateHash: CRC32C over the sorted
// names, written as Guava writes a HashCode (its bytes little-endian, in
// hex).
func topicsHash(sorted []string) string {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	for _, t := range sorted {
		_, _ = h.Write([]byte(t))
	}
	sum := h.Sum32()
	return hex.EncodeToString([]byte{byte(sum), byte(sum >> 8), byte(sum >> 16), byte(sum >> 24)})
}

// compileTopicsPattern compiles a client's topics pattern (a Java regular
// expression over full topic names) as Pulsar applies it: without its
// domain scheme, matching the whole name.
func compileTopicsPattern(p string) (*regexp.Regexp, error) {
	if _, rest, ok := strings.Cut(p, "://"); ok {
		p = rest
	}
	re, err := regexp.Compile(`^(?:` + p + `)$`)
	if err != nil {
		return nil, fmt.Errorf("topics pattern %q: %w", p, err)
	}
	return re, nil
}

// filterTopics keeps the topics whose name (the partitioned topic's, for
// a partition) without its domain scheme matches re.
func filterTopics(topics []string, re *regexp.Regexp) []string {
	out := []string{}
	for _, t := range topics {
		name, err := ParseTopicName(t)
		if err != nil {
			continue
		}
		if base, _, ok := partitionOf(name); ok {
			name = base
		}
		if re.MatchString(name.Tenant + "/" + name.Namespace + "/" + name.Local) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out
}

// matchingTopics lists tenant/ns's persistent topics that match re.
func (b *Broker) matchingTopics(ctx context.Context, tenant, ns string, re *regexp.Regexp) ([]string, error) {
	all, err := b.persistentTopics(ctx, tenant, ns)
	if err != nil {
		return nil, err
	}
	return filterTopics(all, re), nil
}

func (c *serverConn) handleWatchTopicList(cmd *pb.CommandWatchTopicList) error {
	reqID := cmd.GetRequestId()
	tenant, ns, err := parseNamespace(cmd.GetNamespace())
	if err != nil {
		return c.sendError(reqID, pb.ServerError_InvalidTopicName, err.Error())
	}
	re, err := compileTopicsPattern(cmd.GetTopicsPattern())
	if err != nil {
		return c.sendError(reqID, pb.ServerError_InvalidTopicName, err.Error())
	}
	w := &topicWatcher{conn: c, id: cmd.GetWatcherId(), tenant: tenant, namespace: ns, pattern: re}
	c.goSafe("WATCH_TOPIC_LIST", func() {
		// As GET_TOPICS_OF_NAMESPACE (conn_auth.go).
		if z := c.b.cfg.Authorization; z != nil {
			if err := z.AllowNamespaceTopicsAs(c.ctx, c.connSubject(), tenant, ns); err != nil {
				_ = c.sendError(reqID, authErrorCode(err), err.Error())
				return
			}
		}
		// Registered before the first read, so no change falls between
		// the list answered and the updates.
		if !c.addWatcher(w) {
			_ = c.sendError(reqID, pb.ServerError_ServiceNotReady, fmt.Sprintf("watcher id %d is in use on this connection", w.id))
			return
		}
		c.b.watchers.add(w)
		w.mu.Lock()
		defer w.mu.Unlock()
		topics, err := c.b.matchingTopics(c.ctx, tenant, ns, re)
		if err != nil {
			c.b.watchers.remove(w)
			c.dropWatcher(w.id)
			_ = c.sendError(reqID, pb.ServerError_MetadataError, err.Error())
			return
		}
		w.last = topics
		hash := topicsHash(topics)
		if cmd.GetTopicsHash() == hash {
			topics = nil // the client has them
		}
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_WATCH_TOPIC_LIST_SUCCESS.Enum(),
			WatchTopicListSuccess: &pb.CommandWatchTopicListSuccess{RequestId: &reqID, WatcherId: &w.id,
				Topic: topics, TopicsHash: &hash}})
	})
	return nil
}

func (c *serverConn) handleWatchTopicListClose(cmd *pb.CommandWatchTopicListClose) error {
	if w := c.dropWatcher(cmd.GetWatcherId()); w != nil {
		c.b.watchers.remove(w)
	}
	return c.sendSuccess(cmd.GetRequestId())
}

// addWatcher registers w on the connection unless its id is taken or the
// connection closed.
func (c *serverConn) addWatcher(w *topicWatcher) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, dup := c.watchers[w.id]; dup || c.closed {
		return false
	}
	if c.watchers == nil {
		c.watchers = map[uint64]*topicWatcher{}
	}
	c.watchers[w.id] = w
	return true
}

func (c *serverConn) dropWatcher(id uint64) *topicWatcher {
	c.mu.Lock()
	defer c.mu.Unlock()
	w := c.watchers[id]
	delete(c.watchers, id)
	return w
}

func (ws *topicWatchers) add(w *topicWatcher) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	key := w.tenant + "/" + w.namespace
	if ws.byNS == nil {
		ws.byNS = map[string]map[*topicWatcher]struct{}{}
	}
	if ws.byNS[key] == nil {
		ws.byNS[key] = map[*topicWatcher]struct{}{}
	}
	ws.byNS[key][w] = struct{}{}
}

func (ws *topicWatchers) remove(w *topicWatcher) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	key := w.tenant + "/" + w.namespace
	delete(ws.byNS[key], w)
	if len(ws.byNS[key]) == 0 {
		delete(ws.byNS, key)
	}
}

func (ws *topicWatchers) of(tenant, ns string) []*topicWatcher {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]*topicWatcher, 0, len(ws.byNS[tenant+"/"+ns]))
	for w := range ws.byNS[tenant+"/"+ns] {
		out = append(out, w)
	}
	return out
}

// namespaceTopicsChanged tells tenant/ns's watchers that its topics may
// have changed; each re-reads its list and sends the difference. It
// returns at once: the reading runs on the broker's tasks.
func (b *Broker) namespaceTopicsChanged(tenant, ns string) {
	watchers := b.watchers.of(tenant, ns)
	if len(watchers) == 0 {
		return
	}
	b.spawn(func() {
		for _, w := range watchers {
			w.update(b.ctx)
		}
	})
}

// update sends the difference between the namespace's matching topics
// now and what w last told.
func (w *topicWatcher) update(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now, err := w.conn.b.matchingTopics(ctx, w.tenant, w.namespace, w.pattern)
	if err != nil {
		w.conn.log.Warn("topic-list watcher: cannot list topics", "namespace", w.tenant+"/"+w.namespace, "err", err)
		return
	}
	added, deleted := sortedDiff(w.last, now)
	if len(added) == 0 && len(deleted) == 0 {
		return
	}
	w.last = now
	hash := topicsHash(now)
	_ = w.conn.send(&pb.BaseCommand{Type: pb.BaseCommand_WATCH_TOPIC_UPDATE.Enum(),
		WatchTopicUpdate: &pb.CommandWatchTopicUpdate{WatcherId: &w.id, NewTopics: added, DeletedTopics: deleted,
			TopicsHash: &hash}})
}

// sortedDiff returns what is in b but not a, and in a but not b, for
// sorted slices.
func sortedDiff(a, b []string) (added, deleted []string) {
	for _, t := range b {
		if _, found := slices.BinarySearch(a, t); !found {
			added = append(added, t)
		}
	}
	for _, t := range a {
		if _, found := slices.BinarySearch(b, t); !found {
			deleted = append(deleted, t)
		}
	}
	return added, deleted
}
