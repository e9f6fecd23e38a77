package admin

// The JSON the broker's admin endpoints answer, in the shapes pulsaradmin
// decodes (utils.TopicStats, utils.PersistentTopicInternalStats,
// utils.MessageID, ...). Package broker fills them under its own locks;
// this package only encodes, sums and decodes them.

// TopicStats is a topic's stats (pulsaradmin's utils.TopicStats).
type TopicStats struct {
	MsgRateIn           float64                      `json:"msgRateIn"`
	MsgRateOut          float64                      `json:"msgRateOut"`
	MsgThroughputIn     float64                      `json:"msgThroughputIn"`
	MsgThroughputOut    float64                      `json:"msgThroughputOut"`
	AverageMsgSize      float64                      `json:"averageMsgSize"`
	MsgDropRate         float64                      `json:"msgDropRate"` // non-persistent topics
	MsgInCounter        int64                        `json:"msgInCounter"`
	MsgOutCounter       int64                        `json:"msgOutCounter"`
	BytesInCounter      int64                        `json:"bytesInCounter"`
	BytesOutCounter     int64                        `json:"bytesOutCounter"`
	StorageSize         int64                        `json:"storageSize"`
	BacklogSize         int64                        `json:"backlogSize"`
	Publishers          []PublisherStats             `json:"publishers"`
	Subscriptions       map[string]SubscriptionStats `json:"subscriptions"`
	Replication         map[string]ReplicatorStats   `json:"replication"`
	DeduplicationStatus string                       `json:"deduplicationStatus"`
	// TopicCreationTimeStamp is when the topic was created (unix ms; its
	// storage's metadata node, as Pulsar's PIP-431), 0 when unknown;
	// LastPublishTimeStamp the publish time of its last stored message, 0
	// when it has none.
	TopicCreationTimeStamp int64 `json:"topicCreationTimeStamp"`
	LastPublishTimeStamp   int64 `json:"lastPublishTimeStamp"`
}

// PublisherStats is one producer's part of the topic stats.
type PublisherStats struct {
	AccessMode   string  `json:"accessMode"`
	ProducerID   uint64  `json:"producerId"`
	ProducerName string  `json:"producerName"`
	Address      string  `json:"address"`
	MsgRateIn    float64 `json:"msgRateIn"`
	// ClientVersion is what the client's CONNECT said it is.
	ClientVersion  string            `json:"clientVersion"`
	ConnectedSince string            `json:"connectedSince"`
	Metadata       map[string]string `json:"metadata,omitempty"`
}

// SubscriptionStats is one subscription's (or reader's) part of the
// topic stats.
type SubscriptionStats struct {
	Type                string `json:"type"`
	IsDurable           bool   `json:"isDurable"`
	MsgBacklog          int64  `json:"msgBacklog"`
	MsgBacklogNoDelayed int64  `json:"msgBacklogNoDelayed"`
	BacklogSize         int64  `json:"backlogSize"`
	MsgDelayed          int64  `json:"msgDelayed"`
	UnackedMessages     int64  `json:"unackedMessages"`
	// BlockedOnUnackedMsgs is Pulsar's
	// blockedSubscriptionOnUnackedMsgs.
	BlockedOnUnackedMsgs bool            `json:"blockedSubscriptionOnUnackedMsgs"`
	ActiveConsumerName   string          `json:"activeConsumerName,omitempty"`
	MsgRateOut           float64         `json:"msgRateOut"`
	Consumers            []ConsumerStats `json:"consumers"`
	// IsReplicated: a replicated subscription (broker/replsubs.go).
	IsReplicated bool `json:"isReplicated"`
	// ConsumersAfterMarkDeletePosition is Pulsar's map of Key_Shared
	// consumers held back until the mark-delete position passes where they
	// joined; this broker holds none back, so it is always empty.
	ConsumersAfterMarkDeletePosition map[string]string `json:"consumersAfterMarkDeletePosition"`
	// SubscriptionProperties: this broker keeps none, so always empty.
	SubscriptionProperties map[string]string `json:"subscriptionProperties"`
}

// ConsumerStats is one consumer's part of the subscription stats.
type ConsumerStats struct {
	ConsumerName         string  `json:"consumerName"`
	AvailablePermits     int64   `json:"availablePermits"`
	UnackedMessages      int64   `json:"unackedMessages"`
	BlockedOnUnackedMsgs bool    `json:"blockedConsumerOnUnackedMsgs"`
	Address              string  `json:"address"`
	MsgRateOut           float64 `json:"msgRateOut"`
	// ClientVersion is what the client's CONNECT said it is.
	ClientVersion  string            `json:"clientVersion"`
	ConnectedSince string            `json:"connectedSince"`
	Metadata       map[string]string `json:"metadata,omitempty"`
	// LastConsumedFlowTimestamp is when the consumer's last FLOW came
	// (unix ms; 0: none yet).
	LastConsumedFlowTimestamp int64 `json:"lastConsumedFlowTimestamp"`
}

// PartitionedMetadata is a partitioned topic's partition count.
type PartitionedMetadata struct {
	Partitions int `json:"partitions"`
}

// PartitionedTopicStats sums the partitions' stats.
type PartitionedTopicStats struct {
	TopicStats
	Metadata   PartitionedMetadata   `json:"metadata"`
	Partitions map[string]TopicStats `json:"partitions,omitempty"`
}

// ReplicatorStats is Pulsar's ReplicatorStats: one remote cluster of a
// topic's stats.replication. Out: this cluster's replicator to it; in:
// what its replicator stored here.
type ReplicatorStats struct {
	Connected                 bool    `json:"connected"`
	MsgRateIn                 float64 `json:"msgRateIn"`
	MsgRateOut                float64 `json:"msgRateOut"`
	MsgThroughputIn           float64 `json:"msgThroughputIn"`
	MsgThroughputOut          float64 `json:"msgThroughputOut"`
	MsgRateExpired            float64 `json:"msgRateExpired"`
	ReplicationBacklog        int64   `json:"replicationBacklog"`
	ReplicationDelayInSeconds int64   `json:"replicationDelayInSeconds"`
	InboundConnection         string  `json:"inboundConnection"`
	InboundConnectedSince     string  `json:"inboundConnectedSince"`
	OutboundConnection        string  `json:"outboundConnection"`
	OutboundConnectedSince    string  `json:"outboundConnectedSince"`
}

// NewPartitionedTopicStats is the empty sum for n partitions.
func NewPartitionedTopicStats(n int) PartitionedTopicStats {
	return PartitionedTopicStats{Metadata: PartitionedMetadata{Partitions: n}, Partitions: map[string]TopicStats{},
		TopicStats: TopicStats{Subscriptions: map[string]SubscriptionStats{}, Replication: map[string]ReplicatorStats{},
			Publishers: []PublisherStats{}}}
}

// Add sums one partition's stats into the partitioned topic's
// (subscriptions merged by name).
func (s *PartitionedTopicStats) Add(p TopicStats) {
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
	s.LastPublishTimeStamp = max(s.LastPublishTimeStamp, p.LastPublishTimeStamp)
	s.Publishers = append(s.Publishers, p.Publishers...)
	for name, sub := range p.Subscriptions {
		sum, ok := s.Subscriptions[name]
		if !ok {
			sum = SubscriptionStats{Type: sub.Type, IsDurable: sub.IsDurable, Consumers: []ConsumerStats{},
				ConsumersAfterMarkDeletePosition: map[string]string{}, SubscriptionProperties: map[string]string{}}
		}
		sum.IsReplicated = sum.IsReplicated || sub.IsReplicated
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

// InternalStats is pulsaradmin's PersistentTopicInternalStats.
type InternalStats struct {
	EntriesAddedCounter    int64                  `json:"entriesAddedCounter"`
	NumberOfEntries        int64                  `json:"numberOfEntries"`
	TotalSize              int64                  `json:"totalSize"`
	CurrentLedgerEntries   int64                  `json:"currentLedgerEntries"`
	CurrentLedgerSize      int64                  `json:"currentLedgerSize"`
	WaitingCursorsCount    int                    `json:"waitingCursorsCount"`
	PendingAddEntriesCount int                    `json:"pendingAddEntriesCount"`
	LastConfirmedEntry     string                 `json:"lastConfirmedEntry"`
	State                  string                 `json:"state"`
	Ledgers                []LedgerInfo           `json:"ledgers"`
	Cursors                map[string]CursorStats `json:"cursors"`
	SchemaLedgers          []struct{}             `json:"schemaLedgers"`
	CompactedLedger        CompactedLedger        `json:"compactedLedger"`
}

// LedgerInfo is one ledger of the internal stats.
type LedgerInfo struct {
	LedgerID        int64  `json:"ledgerId"`
	Entries         int64  `json:"entries"`
	Size            int64  `json:"size"`
	Timestamp       int64  `json:"timestamp"`
	Offloaded       bool   `json:"offloaded"`
	MetaData        string `json:"metadata,omitempty"`
	UnderReplicated bool   `json:"underReplicated"`
}

// CompactedLedger is the compacted ledger of the internal stats.
type CompactedLedger struct {
	LedgerID int64 `json:"ledgerId"`
	Entries  int64 `json:"entries"`
	Size     int64 `json:"size"`
}

// CursorStats is one cursor of the internal stats.
type CursorStats struct {
	MarkDeletePosition                       string           `json:"markDeletePosition"`
	ReadPosition                             string           `json:"readPosition"`
	WaitingReadOp                            bool             `json:"waitingReadOp"`
	PendingReadOps                           int              `json:"pendingReadOps"`
	MessagesConsumedCounter                  int64            `json:"messagesConsumedCounter"`
	CursorLedger                             int64            `json:"cursorLedger"`
	CursorLedgerLastEntry                    int64            `json:"cursorLedgerLastEntry"`
	IndividuallyDeletedMessages              string           `json:"individuallyDeletedMessages"`
	State                                    string           `json:"state"`
	NumberOfEntriesSinceFirstNotAckedMessage int64            `json:"numberOfEntriesSinceFirstNotAckedMessage"`
	TotalNonContiguousDeletedMessagesRange   int              `json:"totalNonContiguousDeletedMessagesRange"`
	Properties                               map[string]int64 `json:"properties"`
}

// MessageID is Pulsar's MessageId in the REST API.
type MessageID struct {
	LedgerID       int64 `json:"ledgerId"`
	EntryID        int64 `json:"entryId"`
	PartitionIndex int   `json:"partitionIndex"`
	BatchIndex     int   `json:"batchIndex"`
	// IsExcluded is Pulsar's ResetCursorData.isExcluded (pulsar-admin's
	// -e): a reset starts after the message, an expiry stops before it.
	IsExcluded bool `json:"isExcluded,omitempty"`
}

// LatestLedger is the ledger (and entry) id of pulsaradmin's Latest
// (max:max, after the last entry); its Earliest is -1:-1.
const LatestLedger = int64(^uint64(0) >> 1)

// Metrics is Pulsar's Metrics: values with the dimensions they are for.
type Metrics struct {
	Metrics    map[string]any    `json:"metrics"`
	Dimensions map[string]string `json:"dimensions"`
}

// BookiesClusterInfo is Pulsar's BookiesClusterInfo.
type BookiesClusterInfo struct {
	Bookies []BookieInfo `json:"bookies"`
}

// BookiesRackConfiguration is Pulsar's BookiesRackConfiguration: group ->
// bookie ("host:port") -> where it stands.
type BookiesRackConfiguration map[string]map[string]BookieRackInfo

// BookieRackInfo is Pulsar's BookieInfo of the rack map: a network
// location "/region/rack" (or "/rack") and an optional host name.
type BookieRackInfo struct {
	Rack     string `json:"rack"`
	Hostname string `json:"hostname,omitempty"`
}

// BookieInfo is Pulsar's RawBookieInfo (bookieId) with the bookie's mode
// added.
type BookieInfo struct {
	BookieID   string `json:"bookieId"`
	ReadOnly   bool   `json:"readOnly"`
	Reason     string `json:"reason,omitempty"`
	OutOfSpace bool   `json:"outOfSpace,omitempty"`
}

// namespaceOwnership is Pulsar's NamespaceOwnershipStatus.
type namespaceOwnership struct {
	BrokerAssignment string `json:"broker_assignment"`
	IsControlled     bool   `json:"is_controlled"`
	IsActive         bool   `json:"is_active"`
}

// LongRunningStatus is Pulsar's LongRunningProcessStatus: the state of a
// topic's compaction or offload (NOT_RUN, RUNNING, SUCCESS, ERROR) and the
// last error.
type LongRunningStatus struct {
	Status    string `json:"status"`
	LastError string `json:"lastError"`
}

// OffloadStatus is Pulsar's OffloadProcessStatus: a LongRunningStatus and
// the first message still on the bookies.
type OffloadStatus struct {
	LongRunningStatus
	FirstUnoffloaded OffloadedMessageID `json:"firstUnoffloadedMessage"`
}

// OffloadedMessageID is the MessageIdImpl of an OffloadStatus.
type OffloadedMessageID struct {
	LedgerID       int64 `json:"ledgerId"`
	EntryID        int64 `json:"entryId"`
	PartitionIndex int   `json:"partitionIndex"`
}
