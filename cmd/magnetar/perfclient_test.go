package main

import (
	"bytes"
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/pulsar-client-go/pulsar"
)

// TestPerfClientBadFlags: a bad choice exits 2 naming its flag, before
// anything connects.
func TestPerfClientBadFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"e2e", "--subscription-type", "Bogus"}, "--subscription-type"},
		{[]string{"produce", "--compression", "brotli"}, "--compression"},
		{[]string{"consume", "--topics", "0"}, "--topics"},
		{[]string{"produce", "--no-such-flag"}, "no-such-flag"},
		{[]string{"e2e", "--size", "4"}, "size 4"},
		{[]string{"produce", "--start-barrier", "/nonexistent/barrier"}, "--start-barrier"},
	} {
		var stdout, stderr bytes.Buffer
		if code := runPerf(tc.args, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.flag) {
			t.Errorf("%v: exit %d, stderr %q; want 2 naming %s", tc.args, code, stderr.String(), tc.flag)
		}
	}
}

// TestPerfClientFlagsConfig: flags and topic arguments land in the config.
func TestPerfClientFlagsConfig(t *testing.T) {
	var stderr bytes.Buffer
	args := []string{"--topics", "2", "--subscription-type", "key_shared", "--compression", "zstd", "--rate", "5000",
		"--batching=false", "--batch-delay", "5ms", "--num-messages", "100", "--variant", "v", "a", "b"}
	fl := flag.NewFlagSet("perf e2e", flag.ContinueOnError)
	f := newClientPerfFlags(fl)
	if err := fl.Parse(args); err != nil {
		t.Fatal(err)
	}
	c, err := f.config("e2e", fl.Args(), &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(c.Topics, []string{"a-0", "a-1", "b-0", "b-1"}) || c.SubscriptionType != pulsar.KeyShared ||
		c.Compression != pulsar.ZSTD || c.Rate != 5000 || c.Batching || c.BatchDelay != 5*time.Millisecond ||
		c.NumMessages != 100 || c.Variant != "v" || c.System != "magnetar" || c.Mode != "e2e" {
		t.Errorf("config %+v", c)
	}
}
