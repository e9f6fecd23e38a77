package broker

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
	pulsarlog "github.com/apache/pulsar-client-go/pulsar/log"
	"github.com/sirupsen/logrus"
)

// failureLog collects the brokers' and the client's logs of one test and
// prints them only if the test fails: cluster tests fail on timing under
// load (CI runs every package at once on two cores), and without the logs
// such a failure cannot be explained afterwards.
type failureLog struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// failureLogTail bounds what a failure prints; the end of the log is
// where the failure is.
const failureLogTail = 256 << 10

func newFailureLog(t *testing.T) *failureLog {
	l := &failureLog{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of brokers and client (last %d KiB):\n%s", failureLogTail>>10, l.tail())
		}
	})
	return l
}

func (l *failureLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// count is how many times s occurs in the log so far.
func (l *failureLog) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Count(l.buf.Bytes(), []byte(s))
}

func (l *failureLog) tail() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buf.Bytes()
	if len(b) > failureLogTail {
		b = b[len(b)-failureLogTail:]
	}
	return string(b)
}

func (l *failureLog) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// clientLogger gives the Go client's reconnect decisions (lookups, backoff
// delays, errors from the broker) to the same log.
func (l *failureLog) clientLogger() pulsarlog.Logger {
	lr := logrus.New()
	lr.SetOutput(l)
	lr.SetLevel(logrus.InfoLevel)
	lr.SetFormatter(&logrus.TextFormatter{DisableColors: true, TimestampFormat: "15:04:05.000", FullTimestamp: true})
	return pulsarlog.NewLoggerWithLogrus(lr)
}

// newClient connects through the first broker, as clients with one
// service URL do, logging into the cluster's failure log.
func (c *testCluster) newClient(t *testing.T) pulsar.Client {
	t.Helper()
	client, err := pulsar.NewClient(pulsar.ClientOptions{URL: c.brokers[0].url(), OperationTimeout: 10 * time.Second,
		ConnectionTimeout: 5 * time.Second, Logger: c.logs.clientLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(client.Close)
	return client
}
