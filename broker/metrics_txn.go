package broker

// Transaction metrics, with Pulsar's names: per coordinator hosted here
// (label coordinator_id) and per topic with a transaction buffer.

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

var (
	coordinatorLabels = []string{"cluster", "coordinator_id"}
	descTxnActive     = prometheus.NewDesc("pulsar_txn_active_count", "Open transactions of the coordinator.", coordinatorLabels, nil)
	descTxnCreated    = prometheus.NewDesc("pulsar_txn_created_count", "Transactions the coordinator opened since it loaded here.", coordinatorLabels, nil)
	descTxnCommitted  = prometheus.NewDesc("pulsar_txn_committed_count", "Transactions the coordinator committed since it loaded here.", coordinatorLabels, nil)
	descTxnAborted    = prometheus.NewDesc("pulsar_txn_aborted_count", "Transactions the coordinator aborted since it loaded here (timeouts included).", coordinatorLabels, nil)
	descTxnTimeout    = prometheus.NewDesc("pulsar_txn_timeout_count", "Transactions the coordinator aborted at their timeout since it loaded here.", coordinatorLabels, nil)
)

var txnDescs = []*prometheus.Desc{descTxnActive, descTxnCreated, descTxnCommitted, descTxnAborted, descTxnTimeout}

// collectCoordinators emits the coordinators' series.
func (m *Metrics) collectCoordinators(ch chan<- prometheus.Metric) {
	for tc, c := range m.b.hostedCoordinators() {
		st := c.Stats()
		labels := []string{m.b.cfg.ClusterName, strconv.FormatUint(tc, 10)}
		m.emit(ch, descTxnActive, prometheus.GaugeValue, float64(st.Ongoing), labels)
		m.emit(ch, descTxnCreated, prometheus.CounterValue, float64(st.Created), labels)
		m.emit(ch, descTxnCommitted, prometheus.CounterValue, float64(st.Committed), labels)
		m.emit(ch, descTxnAborted, prometheus.CounterValue, float64(st.Aborted), labels)
		m.emit(ch, descTxnTimeout, prometheus.CounterValue, float64(st.TimedOut), labels)
	}
}

// sampleTxnBuffer adds a topic's buffer series (none for a topic that
// never had a transaction).
func sampleTxnBuffer(s *topicSample, t *topic) {
	tb := t.txns.Load()
	if tb == nil {
		return
	}
	st := tb.stats()
	s.set(sTbActive, float64(st.Ongoing))
	s.set(sTbCommitted, float64(st.Committed))
	s.set(sTbAborted, float64(st.AbortedN))
}
