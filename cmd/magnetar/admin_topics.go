package main

// magnetar admin topics: topics and partitioned topics (create, delete,
// list, metadata), their stats, subscriptions (create, unsubscribe, skip,
// clear-backlog, reset-cursor, expire-messages) and messages
// (last-message-id, get-message-by-id, examine-message, peek-messages),
// with pulsar-admin's names. Topic arguments take pulsaradmin's short
// forms: my-topic is persistent://public/default/my-topic.

import (
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/utils"
)

// topicAction is a command about one topic.
type topicAction func(env *adminEnv, t *utils.TopicName) (adminReply, error)

// parseTopic checks a topic argument, short forms allowed.
func parseTopic(s string) (*utils.TopicName, error) {
	t, err := utils.GetTopicName(s)
	if err != nil {
		return nil, usageErrorf("bad topic %q: %v", s, err)
	}
	return t, nil
}

// topicCmd is a topic command whose setup defines its flags.
func topicCmd(name, summary string, setup func(fs *flag.FlagSet) topicAction) adminCmd {
	return adminCmd{name, []string{"TOPIC"}, summary, func(fs *flag.FlagSet) adminAction {
		run := setup(fs)
		return func(env *adminEnv, args []string) (adminReply, error) {
			t, err := parseTopic(args[0])
			if err != nil {
				return replyNone(), err
			}
			return run(env, t)
		}
	}}
}

// topicPlain is a topic command without flags.
func topicPlain(name, summary string, run topicAction) adminCmd {
	return topicCmd(name, summary, func(*flag.FlagSet) topicAction { return run })
}

// subCmd is a command about one subscription of a topic: --subscription
// is defined and required.
func subCmd(name, summary string, setup func(fs *flag.FlagSet) func(env *adminEnv, t *utils.TopicName, sub string) (adminReply, error)) adminCmd {
	return topicCmd(name, summary, func(fs *flag.FlagSet) topicAction {
		sub := fs.String("subscription", "", "subscription name (required)")
		run := setup(fs)
		return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			if *sub == "" {
				return replyNone(), usageErrorf("--subscription is required")
			}
			return run(env, t, *sub)
		}
	})
}

// parseMessageID reads latest, earliest or ledger:entry[:partition[:batch]].
func parseMessageID(flagName, s string) (utils.MessageID, error) {
	switch strings.ToLower(s) {
	case "latest":
		return utils.Latest, nil
	case "earliest":
		return utils.Earliest, nil
	}
	id, err := utils.ParseMessageID(s)
	if err != nil {
		return utils.MessageID{}, usageErrorf("--%s %q: want latest, earliest or ledgerId:entryId", flagName, s)
	}
	return *id, nil
}

// messageIDText is a message id as ledger:entry, then the partition when
// it is set. Ids the API answers as JSON carry no batch index.
func messageIDText(id utils.MessageID) string {
	s := fmt.Sprintf("%d:%d", id.LedgerID, id.EntryID)
	if id.PartitionIndex >= 0 {
		s += fmt.Sprintf(":%d", id.PartitionIndex)
	}
	return s
}

// messageText is the id of a message read from a batch,
// ledger:entry:partition:batch-index, or messageIDText's form.
func messageText(id utils.MessageID) string {
	if id.BatchIndex < 0 {
		return messageIDText(id)
	}
	return fmt.Sprintf("%d:%d:%d:%d", id.LedgerID, id.EntryID, id.PartitionIndex, id.BatchIndex)
}

func topicCmds() []adminCmd {
	cmds := []adminCmd{
		{"list", []string{"TENANT/NAMESPACE"}, "list a namespace's topics (partitions included)", noFlags(func(env *adminEnv, args []string) (adminReply, error) {
			ns, err := parseNamespace(args[0])
			if err != nil {
				return replyNone(), err
			}
			_, topics, err := env.api.Topics().List(*ns)
			return replyLines(topics), err
		})},
		{"list-partitioned-topics", []string{"TENANT/NAMESPACE"}, "list a namespace's partitioned topics", noFlags(func(env *adminEnv, args []string) (adminReply, error) {
			ns, err := parseNamespace(args[0])
			if err != nil {
				return replyNone(), err
			}
			topics, _, err := env.api.Topics().List(*ns)
			return replyLines(topics), err
		})},
		topicPlain("create", "create a non-partitioned topic", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			return replyNone(), env.api.Topics().Create(*t, 0)
		}),
		topicPlain("get-properties", "show the topic's properties", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			p, err := env.api.Topics().GetProperties(*t)
			return replyKeyValues(p), err
		}),
		topicCmd("update-properties", "set properties of the topic (others are kept)", func(fs *flag.FlagSet) topicAction {
			props := map[string]string{}
			fs.Func("property", "key=value (repeatable, at least one)", func(v string) error {
				k, val, ok := strings.Cut(v, "=")
				if !ok || k == "" {
					return fmt.Errorf("want key=value, got %q", v)
				}
				props[k] = val
				return nil
			})
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				if len(props) == 0 {
					return replyNone(), usageErrorf("--property is required")
				}
				return replyNone(), env.api.Topics().UpdateProperties(*t, props)
			}
		}),
		topicCmd("remove-properties", "remove a property of the topic", func(fs *flag.FlagSet) topicAction {
			key := fs.String("key", "", "the property's key (required)")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				if *key == "" {
					return replyNone(), usageErrorf("--key is required")
				}
				return replyNone(), env.api.Topics().RemoveProperty(*t, *key)
			}
		}),
		topicCmd("set-replication-clusters", "set the clusters the topic replicates to (over its namespace's)", func(fs *flag.FlagSet) topicAction {
			clusters := fs.String("clusters", "", "comma-separated cluster names (required)")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				list := splitList(*clusters)
				if len(list) == 0 {
					return replyNone(), usageErrorf("--clusters is required")
				}
				return replyNone(), env.api.Topics().SetReplicationClusters(*t, list)
			}
		}),
		topicPlain("get-replication-clusters", "list the topic's own replication clusters", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			list, err := env.api.Topics().GetReplicationClusters(*t)
			return replyLines(list), err
		}),
		topicPlain("remove-replication-clusters", "remove the topic's replication clusters (its namespace's apply)", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			return replyNone(), env.api.Topics().RemoveReplicationClusters(*t)
		}),
		topicCmd("grant-permission", "grant a role actions on the topic", func(fs *flag.FlagSet) topicAction {
			role := fs.String("role", "", "client role (required)")
			actions := fs.String("actions", "", "comma-separated actions: produce, consume (required)")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				list, err := roleActions(*role, *actions)
				if err != nil {
					return replyNone(), err
				}
				return replyNone(), env.api.Topics().GrantPermission(*t, *role, list)
			}
		}),
		topicCmd("revoke-permission", "revoke a role's actions on the topic", func(fs *flag.FlagSet) topicAction {
			role := fs.String("role", "", "client role (required)")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				if *role == "" {
					return replyNone(), usageErrorf("--role is required")
				}
				return replyNone(), env.api.Topics().RevokePermission(*t, *role)
			}
		}),
		topicPlain("permissions", "show the roles and their actions on the topic (its namespace's included)", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			m, err := env.api.Topics().GetPermissions(*t)
			if m == nil {
				m = map[string][]utils.AuthAction{}
			}
			return replyObject(m), err
		}),
		topicCmd("delete", "delete a non-partitioned topic", func(fs *flag.FlagSet) topicAction {
			force := fs.Bool("force", false, "disconnect its producers and consumers first")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				return replyNone(), env.api.Topics().Delete(*t, *force, true)
			}
		}),
		topicCmd("create-partitioned-topic", "create a partitioned topic", partitionsFlag(func(env *adminEnv, t *utils.TopicName, n int) error {
			return env.api.Topics().Create(*t, n)
		})),
		topicCmd("update-partitioned-topic", "raise a partitioned topic's partition count", partitionsFlag(func(env *adminEnv, t *utils.TopicName, n int) error {
			return env.api.Topics().Update(*t, n)
		})),
		topicCmd("delete-partitioned-topic", "delete a partitioned topic and its partitions", func(fs *flag.FlagSet) topicAction {
			force := fs.Bool("force", false, "disconnect its producers and consumers first")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				return replyNone(), env.api.Topics().Delete(*t, *force, false)
			}
		}),
		topicPlain("get-partitioned-topic-metadata", "show a topic's partition count (0: not partitioned)", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			m, err := env.api.Topics().GetMetadata(*t)
			return replyObject(m), err
		}),
		topicPlain("terminate", "terminate a topic: no more messages may be published", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			id, err := env.api.Topics().Terminate(*t)
			return replyText(id, func(w io.Writer) { fmt.Fprintf(w, "Topic successfully terminated at %s\n", messageIDText(id)) }), err
		}),
		topicPlain("unload", "unload a topic from its broker", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			return replyNone(), env.api.Topics().Unload(*t)
		}),
		topicPlain("compact", "start a compaction of a topic (each key's last message is kept)", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			err := env.api.Topics().Compact(*t)
			return replyText(nil, func(w io.Writer) { fmt.Fprintln(w, "Topic compaction requested for", t.String()) }), err
		}),
		topicPlain("compaction-status", "show the state of a topic's last compaction", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			st, err := env.api.Topics().CompactStatus(*t)
			return replyText(st, func(w io.Writer) { writeLongRunning(w, st) }), err
		}),
		topicCmd("offload", "offload a topic's older ledgers to tiered storage, keeping --size-threshold on the bookies", func(fs *flag.FlagSet) topicAction {
			size := fs.String("size-threshold", "", "bytes to keep on the bookies, newest first (e.g. 10M, 1G; required)")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				if *size == "" {
					return replyNone(), usageErrorf("--size-threshold is required")
				}
				keep, err := parseSize("size-threshold", *size)
				if err != nil {
					return replyNone(), err
				}
				m, ok, err := offloadUpTo(env, t, keep)
				if err != nil || !ok {
					return replyText(nil, func(w io.Writer) { fmt.Fprintln(w, "Nothing to offload") }), err
				}
				err = env.api.Topics().Offload(*t, m)
				return replyText(nil, func(w io.Writer) {
					fmt.Fprintln(w, "Offload triggered for", t.String(), "for messages before", messageIDText(m))
				}), err
			}
		}),
		topicPlain("offload-status", "show the state of a topic's last offload", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			st, err := env.api.Topics().OffloadStatus(*t)
			return replyText(st, func(w io.Writer) {
				writeLongRunning(w, utils.LongRunningProcessStatus{Status: st.Status, LastError: st.LastError})
				fmt.Fprintln(w, "First message on the bookies:", messageIDText(st.FirstUnOffloadedMessage))
			}), err
		}),
	}
	cmds = append(cmds, statsCmds()...)
	cmds = append(cmds, topicDispatchRateCmds()...)
	cmds = append(cmds, messageCmds()...)
	return append(cmds, subscriptionCmds()...)
}

// partitionsFlag is the setup of commands that take --partitions.
func partitionsFlag(run func(env *adminEnv, t *utils.TopicName, n int) error) func(fs *flag.FlagSet) topicAction {
	return func(fs *flag.FlagSet) topicAction {
		n := fs.Int("partitions", 0, "number of partitions (required)")
		return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			if *n < 1 {
				return replyNone(), usageErrorf("--partitions is required and must be at least 1")
			}
			return replyNone(), run(env, t, *n)
		}
	}
}

func statsCmds() []adminCmd {
	return []adminCmd{
		topicPlain("stats", "show a topic's rates, publishers and subscriptions", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			s, err := env.api.Topics().GetStats(*t)
			return replyText(s, func(w io.Writer) { writeTopicStats(w, s) }), err
		}),
		topicCmd("partitioned-stats", "show a partitioned topic's stats, summed over its partitions", func(fs *flag.FlagSet) topicAction {
			per := fs.Bool("per-partition", false, "also show each partition's stats")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				s, err := env.api.Topics().GetPartitionedStats(*t, *per)
				return replyText(s, func(w io.Writer) { writePartitionedStats(w, s) }), err
			}
		}),
		topicPlain("stats-internal", "show a topic's managed ledger: ledgers and cursors", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			s, err := env.api.Topics().GetInternalStats(*t)
			return replyText(s, func(w io.Writer) { writeInternalStats(w, s) }), err
		}),
		topicPlain("subscriptions", "list a topic's subscriptions", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			subs, err := env.api.Subscriptions().List(*t)
			return replyLines(subs), err
		}),
	}
}

func messageCmds() []adminCmd {
	return []adminCmd{
		topicPlain("last-message-id", "show the id of a topic's last message", func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
			id, err := env.api.Topics().GetLastMessageID(*t)
			return replyText(id, func(w io.Writer) { fmt.Fprintln(w, messageIDText(id)) }), err
		}),
		topicCmd("get-message-by-id", "show the message (or batch) at a ledger and entry", func(fs *flag.FlagSet) topicAction {
			ledger := fs.Int64("ledger-id", -1, "ledger id (required)")
			entry := fs.Int64("entry-id", -1, "entry id (required)")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				if *ledger < 0 || *entry < 0 {
					return replyNone(), usageErrorf("--ledger-id and --entry-id are required")
				}
				msgs, err := env.api.Subscriptions().GetMessagesByID(*t, *ledger, *entry)
				return replyMessages(msgs), err
			}
		}),
		topicCmd("examine-message", "show the n-th message from the start or end of a topic", func(fs *flag.FlagSet) topicAction {
			initial := fs.String("initialPosition", "latest", "count from latest (the end) or earliest (the start)")
			pos := fs.Int64("messagePosition", 1, "position of the message from there, 1 the first")
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				if *initial != "latest" && *initial != "earliest" {
					return replyNone(), usageErrorf("--initialPosition %q: want latest or earliest", *initial)
				}
				if *pos < 1 {
					return replyNone(), usageErrorf("--messagePosition %d: want 1 or more", *pos)
				}
				msgs, err := examineMessage(env, t, *initial, *pos)
				return replyMessages(msgs), err
			}
		}),
		subCmd("peek-messages", "show messages a subscription has yet to acknowledge, without consuming them", func(fs *flag.FlagSet) func(*adminEnv, *utils.TopicName, string) (adminReply, error) {
			count := fs.Int("count", 1, "number of messages")
			return func(env *adminEnv, t *utils.TopicName, sub string) (adminReply, error) {
				if *count < 1 {
					return replyNone(), usageErrorf("--count %d: want 1 or more", *count)
				}
				msgs, err := env.api.Subscriptions().PeekMessages(*t, sub, *count)
				return replyMessages(msgs), err
			}
		}),
	}
}

func subscriptionCmds() []adminCmd {
	type subRun = func(*adminEnv, *utils.TopicName, string) (adminReply, error)
	plain := func(run func(env *adminEnv, t *utils.TopicName, sub string) error) func(*flag.FlagSet) subRun {
		return func(*flag.FlagSet) subRun {
			return func(env *adminEnv, t *utils.TopicName, sub string) (adminReply, error) {
				return replyNone(), run(env, t, sub)
			}
		}
	}
	return []adminCmd{
		subCmd("create-subscription", "create a durable subscription", func(fs *flag.FlagSet) subRun {
			at := fs.String("messageId", "latest", "where it starts: latest, earliest or ledgerId:entryId")
			return func(env *adminEnv, t *utils.TopicName, sub string) (adminReply, error) {
				id, err := parseMessageID("messageId", *at)
				if err != nil {
					return replyNone(), err
				}
				return replyNone(), env.api.Subscriptions().Create(*t, sub, id)
			}
		}),
		subCmd("unsubscribe", "delete a subscription", func(fs *flag.FlagSet) subRun {
			force := fs.Bool("force", false, "disconnect its consumers first")
			return func(env *adminEnv, t *utils.TopicName, sub string) (adminReply, error) {
				if *force {
					return replyNone(), env.api.Subscriptions().ForceDelete(*t, sub)
				}
				return replyNone(), env.api.Subscriptions().Delete(*t, sub)
			}
		}),
		subCmd("skip", "skip (acknowledge) the next messages of a subscription", func(fs *flag.FlagSet) subRun {
			count := fs.Int64("count", 0, "number of messages (required)")
			return func(env *adminEnv, t *utils.TopicName, sub string) (adminReply, error) {
				if *count < 1 {
					return replyNone(), usageErrorf("--count is required and must be at least 1")
				}
				return replyNone(), env.api.Subscriptions().SkipMessages(*t, sub, *count)
			}
		}),
		subCmd("clear-backlog", "skip all of a subscription's messages", plain(func(env *adminEnv, t *utils.TopicName, sub string) error {
			return env.api.Subscriptions().ClearBacklog(*t, sub)
		})),
		subCmd("reset-cursor", "move a subscription back or forward, to a time ago or a message id", func(fs *flag.FlagSet) subRun {
			ago := fs.String("time", "", "how long ago: 10m, 3h, 2d, seconds without a unit")
			at := fs.String("messageId", "", "message id: ledgerId:entryId, earliest or latest")
			excluded := fs.Bool("exclude", false, "with --messageId: start after that message, not at it (pulsar-admin's -e)")
			return func(env *adminEnv, t *utils.TopicName, sub string) (adminReply, error) {
				if (*ago == "") == (*at == "") {
					return replyNone(), usageErrorf("give exactly one of --time and --messageId")
				}
				if *at != "" {
					id, err := parseMessageID("messageId", *at)
					if err != nil {
						return replyNone(), err
					}
					if *excluded {
						return replyNone(), positionCall(env, t, sub, "resetcursor", id, true)
					}
					return replyNone(), env.api.Subscriptions().ResetCursorToMessageID(*t, sub, id)
				}
				if *excluded {
					return replyNone(), usageErrorf("--exclude goes with --messageId")
				}
				sec, err := parseRelativeTime("time", *ago)
				if err != nil {
					return replyNone(), err
				}
				return replyNone(), env.api.Subscriptions().ResetCursorToTimestamp(*t, sub, timeAgo(time.Now(), sec))
			}
		}),
		subCmd("expire-messages", "acknowledge a subscription's messages older than a time, or up to a message", func(fs *flag.FlagSet) subRun {
			age := expireTimeFlag(fs)
			pos := fs.String("position", "", "acknowledge up to this message id instead (ledgerId:entryId)")
			excluded := fs.Bool("exclude", false, "with --position: up to the message before it")
			return func(env *adminEnv, t *utils.TopicName, sub string) (adminReply, error) {
				if *pos != "" {
					id, err := parseMessageID("position", *pos)
					if err != nil {
						return replyNone(), err
					}
					return replyNone(), positionCall(env, t, sub, "expireMessages", id, *excluded)
				}
				sec, err := age()
				if err != nil {
					return replyNone(), err
				}
				return replyNone(), env.api.Subscriptions().ExpireMessages(*t, sub, sec)
			}
		}),
		topicCmd("expire-messages-all-subscriptions", "acknowledge, on every subscription and replicator, messages older than a time", func(fs *flag.FlagSet) topicAction {
			age := expireTimeFlag(fs)
			return func(env *adminEnv, t *utils.TopicName) (adminReply, error) {
				sec, err := age()
				if err != nil {
					return replyNone(), err
				}
				return replyNone(), env.api.Subscriptions().ExpireAllMessages(*t, sec)
			}
		}),
	}
}

// expireTimeFlag registers pulsar-admin's required --expireTime; the
// function it returns reads it in seconds.
func expireTimeFlag(fs *flag.FlagSet) func() (int64, error) {
	older := fs.String("expireTime", "", "age: seconds, or 10m, 3h, 2d (required)")
	return func() (int64, error) {
		if *older == "" {
			return 0, usageErrorf("--expireTime is required")
		}
		return parseRelativeTime("expireTime", *older)
	}
}

// Text forms.

func writeTopicStats(w io.Writer, s utils.TopicStats) {
	fmt.Fprintf(w, "msgRateIn: %.2f\nmsgRateOut: %.2f\nmsgThroughputIn: %.2f\nmsgThroughputOut: %.2f\n",
		s.MsgRateIn, s.MsgRateOut, s.MsgThroughputIn, s.MsgThroughputOut)
	fmt.Fprintf(w, "msgInCounter: %d\nmsgOutCounter: %d\naverageMsgSize: %.2f\nstorageSize: %d\nbacklogSize: %d\n",
		s.MsgCounterIn, s.MsgCounterOut, s.AverageMsgSize, s.StorageSize, s.BacklogSize)
	if s.DeDuplicationStatus != "" {
		fmt.Fprintf(w, "deduplicationStatus: %s\n", s.DeDuplicationStatus)
	}
	writePublishers(w, s.Publishers)
	writeSubscriptions(w, s.Subscriptions)
}

func writePartitionedStats(w io.Writer, s utils.PartitionedTopicStats) {
	fmt.Fprintf(w, "partitions: %d\nmsgRateIn: %.2f\nmsgRateOut: %.2f\nmsgThroughputIn: %.2f\nmsgThroughputOut: %.2f\n",
		s.Metadata.Partitions, s.MsgRateIn, s.MsgRateOut, s.MsgThroughputIn, s.MsgThroughputOut)
	fmt.Fprintf(w, "averageMsgSize: %.2f\nstorageSize: %d\n", s.AverageMsgSize, s.StorageSize)
	writePublishers(w, s.Publishers)
	writeSubscriptions(w, s.Subscriptions)
	if len(s.Partitions) == 0 {
		return
	}
	fmt.Fprintln(w)
	rows := make([][]string, 0, len(s.Partitions))
	for name, p := range s.Partitions {
		rows = append(rows, []string{name, fmt.Sprintf("%.2f", p.MsgRateIn), fmt.Sprintf("%.2f", p.MsgRateOut),
			fmt.Sprint(p.MsgCounterIn), fmt.Sprint(p.StorageSize), fmt.Sprint(p.BacklogSize)})
	}
	writeTable(w, []string{"PARTITION", "RATE-IN", "RATE-OUT", "MSGS-IN", "STORAGE", "BACKLOG"}, sortedRows(rows))
}

func writePublishers(w io.Writer, pubs []utils.PublisherStats) {
	if len(pubs) == 0 {
		return
	}
	fmt.Fprintln(w)
	rows := make([][]string, 0, len(pubs))
	for _, p := range pubs {
		rows = append(rows, []string{p.ProducerName, p.Address, fmt.Sprintf("%.2f", p.MsgRateIn), p.ConnectedSince})
	}
	writeTable(w, []string{"PRODUCER", "ADDRESS", "RATE-IN", "CONNECTED-SINCE"}, rows)
}

func writeSubscriptions(w io.Writer, subs map[string]utils.SubscriptionStats) {
	if len(subs) == 0 {
		return
	}
	fmt.Fprintln(w)
	rows := make([][]string, 0, len(subs))
	for name, s := range subs {
		rows = append(rows, []string{name, s.SubType, fmt.Sprint(s.MsgBacklog), fmt.Sprint(s.UnAckedMessages),
			fmt.Sprint(len(s.Consumers)), fmt.Sprintf("%.2f", s.MsgRateOut)})
	}
	writeTable(w, []string{"SUBSCRIPTION", "TYPE", "BACKLOG", "UNACKED", "CONSUMERS", "RATE-OUT"}, sortedRows(rows))
}

func writeInternalStats(w io.Writer, s utils.PersistentTopicInternalStats) {
	fmt.Fprintf(w, "state: %s\nentriesAddedCounter: %d\nnumberOfEntries: %d\ntotalSize: %d\n",
		s.State, s.EntriesAddedCounter, s.NumberOfEntries, s.TotalSize)
	fmt.Fprintf(w, "currentLedgerEntries: %d\ncurrentLedgerSize: %d\nlastConfirmedEntry: %s\n",
		s.CurrentLedgerEntries, s.CurrentLedgerSize, s.LastConfirmedEntry)
	if len(s.Ledgers) > 0 {
		fmt.Fprintln(w)
		rows := make([][]string, 0, len(s.Ledgers))
		for _, l := range s.Ledgers {
			rows = append(rows, []string{fmt.Sprint(l.LedgerID), fmt.Sprint(l.Entries), fmt.Sprint(l.Size), fmt.Sprint(l.Offloaded)})
		}
		writeTable(w, []string{"LEDGER", "ENTRIES", "SIZE", "OFFLOADED"}, rows)
	}
	if len(s.Cursors) > 0 {
		fmt.Fprintln(w)
		rows := make([][]string, 0, len(s.Cursors))
		for name, c := range s.Cursors {
			rows = append(rows, []string{name, c.MarkDeletePosition, c.ReadPosition, c.State, fmt.Sprint(c.MessagesConsumedCounter)})
		}
		writeTable(w, []string{"CURSOR", "MARK-DELETE", "READ-POSITION", "STATE", "CONSUMED"}, sortedRows(rows))
	}
}

// replyMessages prints messages as pulsar-admin does: the id, the
// properties, then the payload as text or, when it is not text, as a hex
// dump.
func replyMessages(msgs []*utils.Message) adminReply {
	if msgs == nil {
		msgs = []*utils.Message{}
	}
	return replyText(msgs, func(w io.Writer) {
		for i, m := range msgs {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "Message ID: %s\n", messageText(m.MessageID))
			for _, k := range slices.Sorted(maps.Keys(m.Properties)) {
				fmt.Fprintf(w, "Property %s: %s\n", k, m.Properties[k])
			}
			if printable(m.Payload) {
				fmt.Fprintf(w, "Payload: %s\n", m.Payload)
				continue
			}
			fmt.Fprintf(w, "Payload (%d bytes):\n%s", len(m.Payload), hex.Dump(m.Payload))
		}
	})
}

// printable reports whether b is UTF-8 text without control characters
// other than tabs and newlines.
func printable(b []byte) bool {
	if !utf8.Valid(b) {
		return false
	}
	for _, r := range string(b) {
		if unicode.IsControl(r) && r != '\n' && r != '\t' {
			return false
		}
	}
	return true
}

// writeLongRunning prints a compaction's or offload's status, as
// pulsar-admin does.
func writeLongRunning(w io.Writer, st utils.LongRunningProcessStatus) {
	fmt.Fprintln(w, st.Status)
	if st.LastError != "" {
		fmt.Fprintln(w, "Error:", st.LastError)
	}
}

// offloadUpTo is the message an offload keeping keep bytes stops before,
// as pulsar-admin finds it: the first message of the oldest ledger that,
// with every newer one, holds at most keep bytes. ok is false when every
// ledger fits.
func offloadUpTo(env *adminEnv, t *utils.TopicName, keep int64) (utils.MessageID, bool, error) {
	st, err := env.api.Topics().GetInternalStats(*t)
	if err != nil {
		return utils.MessageID{}, false, err
	}
	var total int64
	for i := len(st.Ledgers) - 1; i >= 0; i-- {
		total += st.Ledgers[i].Size
		if total > keep && i+1 < len(st.Ledgers) {
			return utils.MessageID{LedgerID: st.Ledgers[i+1].LedgerID, PartitionIndex: -1}, true, nil
		}
	}
	return utils.MessageID{}, false, nil
}
