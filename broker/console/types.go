package console

// Session is who the caller is and what the console offers them.
type Session struct {
	AuthEnabled bool     `json:"authEnabled"`
	AuthMethods []string `json:"authMethods"`
	Role        string   `json:"role"`
	SuperUser   bool     `json:"superUser"`
	ReadOnly    bool     `json:"readOnly"`
	Cluster     string   `json:"cluster"`
	Version     string   `json:"version"`
}

// Rates are message and byte rates per second.
type Rates struct {
	MsgRateIn        float64 `json:"msgRateIn"`
	MsgRateOut       float64 `json:"msgRateOut"`
	MsgThroughputIn  float64 `json:"msgThroughputIn"`
	MsgThroughputOut float64 `json:"msgThroughputOut"`
}

// Add sums o into r.
func (r *Rates) Add(o Rates) {
	r.MsgRateIn += o.MsgRateIn
	r.MsgRateOut += o.MsgRateOut
	r.MsgThroughputIn += o.MsgThroughputIn
	r.MsgThroughputOut += o.MsgThroughputOut
}

// BrokerSummary is one broker's part of the overview.
type BrokerSummary struct {
	URL       string `json:"url"`
	Reachable bool   `json:"reachable"`
	Error     string `json:"error"`
	Topics    int    `json:"topics"`
	Bundles   int    `json:"bundles"`
	Rates
	StorageSize int64 `json:"storageSize"`
	Backlog     int64 `json:"backlog"`
	// TopicsOverQuota are its topics whose backlog exceeds their backlog
	// quota; MaxReplicationDelaySeconds its longest replication delay.
	TopicsOverQuota            []string `json:"topicsOverQuota"`
	MaxReplicationDelaySeconds int64    `json:"maxReplicationDelaySeconds"`
	ReplicationDelayTopic      string   `json:"replicationDelayTopic,omitempty"`
}

// Bookie is a bookie's state and disks.
type Bookie struct {
	ID         string `json:"id"`
	ReadOnly   bool   `json:"readOnly"`
	Reason     string `json:"reason"`
	OutOfSpace bool   `json:"outOfSpace"`
	Reachable  bool   `json:"reachable"`
	Error      string `json:"error,omitempty"`
	Disks
}

// Disks are a bookie's free and total bytes and its directories.
type Disks struct {
	FreeBytes  int64 `json:"freeBytes"`
	TotalBytes int64 `json:"totalBytes"`
	Dirs       []Dir `json:"dirs"`
}

// Dir is one journal or ledger directory's usage.
type Dir struct {
	Dir         string  `json:"dir"`
	Journal     bool    `json:"journal"`
	UsedPercent float64 `json:"usedPercent"`
}

// Totals sum the overview.
type Totals struct {
	Brokers         int `json:"brokers"`
	Bookies         int `json:"bookies"`
	WritableBookies int `json:"writableBookies"`
	Bundles         int `json:"bundles"`
	Topics          int `json:"topics"`
	Rates
	StorageSize int64 `json:"storageSize"`
	Backlog     int64 `json:"backlog"`
}

// Alert is a condition an operator should look at.
type Alert struct {
	Severity string `json:"severity"` // "warning" or "critical"
	Name     string `json:"name"`
	Summary  string `json:"summary"`
}

// Overview is the cluster overview page.
type Overview struct {
	Cluster string          `json:"cluster"`
	Brokers []BrokerSummary `json:"brokers"`
	Bookies []Bookie        `json:"bookies"`
	Totals  Totals          `json:"totals"`
	Alerts  []Alert         `json:"alerts"`
}

// TopicRow is one topic of a namespace's topics table (a partitioned
// topic: its partitions summed).
type TopicRow struct {
	Name       string `json:"name"`
	Partitions int    `json:"partitions"`
	Rates
	Backlog       int64                  `json:"backlog"`
	StorageSize   int64                  `json:"storageSize"`
	Producers     int                    `json:"producers"`
	Subscriptions int                    `json:"subscriptions"`
	Consumers     int                    `json:"consumers"`
	Loaded        bool                   `json:"loaded"`
	Replication   map[string]Replication `json:"replication"`
}

// Replication is a topic's replicator to one remote cluster.
type Replication struct {
	Connected                 bool    `json:"connected"`
	MsgRateOut                float64 `json:"msgRateOut"`
	ReplicationBacklog        int64   `json:"replicationBacklog"`
	ReplicationDelayInSeconds int64   `json:"replicationDelayInSeconds"`
}

// Add sums a partition's row into a partitioned topic's.
func (t *TopicRow) Add(p TopicRow) {
	t.Rates.Add(p.Rates)
	t.Backlog += p.Backlog
	t.StorageSize += p.StorageSize
	t.Producers += p.Producers
	t.Subscriptions = max(t.Subscriptions, p.Subscriptions)
	t.Consumers += p.Consumers
	t.Loaded = t.Loaded || p.Loaded
	for c, r := range p.Replication {
		if t.Replication == nil {
			t.Replication = map[string]Replication{}
		}
		sum, seen := t.Replication[c]
		sum.Connected = r.Connected && (sum.Connected || !seen) // every partition's replicator
		sum.MsgRateOut += r.MsgRateOut
		sum.ReplicationBacklog += r.ReplicationBacklog
		sum.ReplicationDelayInSeconds = max(sum.ReplicationDelayInSeconds, r.ReplicationDelayInSeconds)
		t.Replication[c] = sum
	}
}
