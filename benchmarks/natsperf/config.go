package main

import (
	"flag"
	"fmt"
	"io"
	"time"
)

// Sync variants (--sync) and load modes (--mode).
const (
	syncAlways  = "always"
	syncDefault = "default"
	modeProduce = "produce"
	modeE2E     = "e2e"
)

// headerBytes is the payload's stamp: send time and measure flag.
const headerBytes = 9

// Config of one run, from the flags.
type Config struct {
	ServerBin  string        // nats-server to start
	Sync       string        // syncAlways or syncDefault
	Size       int           // payload bytes
	Rate       float64       // msg/s over all producers, 0 = unthrottled
	Producers  int           // each with its own connection
	MaxPending int           // publishes awaiting a PubAck, per producer
	Duration   time.Duration // measured window
	Warmup     time.Duration // load before the window, not measured
	Mode       string        // modeProduce or modeE2E
	Progress   time.Duration // live line and timeline interval
	JSON       bool          // report as JSON on stdout
	Dir        string        // the server's store goes in a fresh directory under it
	URL        string        // use this server instead of starting one
}

// parseFlags reads and checks the command line. Errors name the flag.
func parseFlags(args []string, stderr io.Writer) (Config, error) {
	var c Config
	fl := flag.NewFlagSet("natsperf", flag.ContinueOnError)
	fl.SetOutput(stderr)
	fl.StringVar(&c.ServerBin, "server-bin", "nats-server", "nats-server binary to start (2.10+ for --sync always)")
	fl.StringVar(&c.Sync, "sync", syncDefault, "JetStream sync: always (fsync every write) or default (every 2 min)")
	fl.IntVar(&c.Size, "size", 1024, "message payload bytes")
	fl.Float64Var(&c.Rate, "rate", 0, "total msg/s over all producers (0 = unthrottled)")
	fl.IntVar(&c.Producers, "producers", 1, "producers, each on its own connection")
	fl.IntVar(&c.MaxPending, "max-pending", 1000, "async publishes awaiting a PubAck per producer")
	fl.DurationVar(&c.Duration, "duration", 30*time.Second, "measured window")
	fl.DurationVar(&c.Warmup, "warmup", 2*time.Second, "load before the window, excluded from the numbers")
	fl.StringVar(&c.Mode, "mode", modeProduce, "produce or e2e (produce plus one acking consumer)")
	fl.DurationVar(&c.Progress, "progress", 5*time.Second, "interval of the live line on stderr and of the timeline")
	fl.BoolVar(&c.JSON, "json", false, "print the report as JSON on stdout")
	fl.StringVar(&c.Dir, "dir", "", "the server's store goes in a fresh directory under this one, removed after (default: os temp dir)")
	fl.StringVar(&c.URL, "url", "", "use the NATS server at this URL instead of starting one (its sync setting is not checked)")
	if err := fl.Parse(args); err != nil {
		return c, err
	}
	if fl.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fl.Args())
	}
	return c, c.validate()
}

func (c Config) validate() error {
	switch {
	case c.Sync != syncAlways && c.Sync != syncDefault:
		return fmt.Errorf("--sync %q: want %s or %s", c.Sync, syncAlways, syncDefault)
	case c.Mode != modeProduce && c.Mode != modeE2E:
		return fmt.Errorf("--mode %q: want %s or %s", c.Mode, modeProduce, modeE2E)
	case c.Size < headerBytes:
		return fmt.Errorf("--size %d: want at least %d (the send time and measure flag)", c.Size, headerBytes)
	case c.Rate < 0:
		return fmt.Errorf("--rate %g: want 0 (unthrottled) or more", c.Rate)
	case c.Producers < 1:
		return fmt.Errorf("--producers %d: want at least 1", c.Producers)
	case c.MaxPending < 1:
		return fmt.Errorf("--max-pending %d: want at least 1", c.MaxPending)
	case c.Duration <= 0:
		return fmt.Errorf("--duration %s: want more than 0", c.Duration)
	case c.Warmup < 0:
		return fmt.Errorf("--warmup %s: want 0 or more", c.Warmup)
	case c.Progress <= 0:
		return fmt.Errorf("--progress %s: want more than 0", c.Progress)
	}
	return nil
}

// interval is each producer's gap between sends; 0 when unthrottled.
func (c Config) interval() time.Duration {
	if c.Rate == 0 {
		return 0
	}
	return time.Duration(float64(time.Second) * float64(c.Producers) / c.Rate)
}
