package ownership

// The JSON shapes below follow Pulsar's (LocalBrokerData,
// NamespaceEphemeralData, LeaderBroker), so operators' tools and
// pulsaradmin's broker-stats decode them.

// BrokersPath holds one ephemeral node per live broker, named by its id
// (host:webPort), valued by its BrokerData: where the proxy and tools
// discover the brokers of a cluster.
const BrokersPath = brokersRoot

const (
	brokersRoot = "/loadbalance/brokers"
	leaderPath  = "/loadbalance/leader"
	ownerRoot   = "/namespace"
)

// ResourceUsage is one resource's use and limit (percent = 100*usage/limit).
type ResourceUsage struct {
	Usage float64 `json:"usage"`
	Limit float64 `json:"limit"`
}

// Percent is the usage as a percentage of the limit (0 with no limit).
func (r ResourceUsage) Percent() float64 {
	if r.Limit <= 0 {
		return 0
	}
	return 100 * r.Usage / r.Limit
}

// BundleStats is one bundle's traffic (Pulsar's NamespaceBundleStats).
type BundleStats struct {
	MsgRateIn        float64 `json:"msgRateIn"`
	MsgThroughputIn  float64 `json:"msgThroughputIn"`
	MsgRateOut       float64 `json:"msgRateOut"`
	MsgThroughputOut float64 `json:"msgThroughputOut"`
	ConsumerCount    int     `json:"consumerCount"`
	ProducerCount    int     `json:"producerCount"`
	Topics           int     `json:"topics"`
}

// Load is what a broker reports about itself.
type Load struct {
	CPU              ResourceUsage          `json:"cpu"`
	Memory           ResourceUsage          `json:"memory"`
	BandwidthIn      ResourceUsage          `json:"bandwidthIn"`
	BandwidthOut     ResourceUsage          `json:"bandwidthOut"`
	MsgThroughputIn  float64                `json:"msgThroughputIn"`
	MsgThroughputOut float64                `json:"msgThroughputOut"`
	MsgRateIn        float64                `json:"msgRateIn"`
	MsgRateOut       float64                `json:"msgRateOut"`
	NumTopics        int                    `json:"numTopics"`
	NumConsumers     int                    `json:"numConsumers"`
	NumProducers     int                    `json:"numProducers"`
	LastStats        map[string]BundleStats `json:"lastStats"` // by bundle ("tenant/ns/0x.._0x..")
}

// BrokerData is a registered broker: where to reach it and its latest
// load report (Pulsar's LocalBrokerData).
type BrokerData struct {
	WebServiceURL    string `json:"webServiceUrl"`
	PulsarServiceURL string `json:"pulsarServiceUrl"`
	// The TLS ports' URLs, omitted when off.
	WebServiceURLTLS    string `json:"webServiceUrlTls,omitempty"`
	PulsarServiceURLTLS string `json:"pulsarServiceUrlTls,omitempty"`
	Load
	NumBundles    int      `json:"numBundles"`
	Bundles       []string `json:"bundles"`
	LastUpdate    int64    `json:"lastUpdate"` // Unix milliseconds
	BrokerVersion string   `json:"brokerVersionString"`
}

// maxUsage is the highest resource use, in percent: what overload is
// judged by.
func (d BrokerData) maxUsage() float64 {
	return max(d.CPU.Percent(), d.Memory.Percent(), d.BandwidthIn.Percent(), d.BandwidthOut.Percent())
}

// msgRate is the broker's total message rate, what shedding balances.
func (d BrokerData) msgRate() float64 { return d.MsgRateIn + d.MsgRateOut }

// OwnerData is the value of a bundle's ownership node (Pulsar's
// NamespaceEphemeralData).
type OwnerData struct {
	NativeURL string `json:"nativeUrl"`
	HTTPURL   string `json:"httpUrl"`
	// The TLS ports' URLs, omitted when off.
	NativeURLTLS string `json:"nativeUrlTls,omitempty"`
	HTTPURLTLS   string `json:"httpUrlTls,omitempty"`
	Disabled     bool   `json:"disabled"`
}

// LeaderInfo is the leader node's value (Pulsar's LeaderBroker).
type LeaderInfo struct {
	ServiceURL string `json:"serviceUrl"`
	BrokerID   string `json:"brokerId"`
}
