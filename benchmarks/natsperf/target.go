package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// readyTimeout bounds the wait for a started server to take connections
// and answer JetStream requests.
const readyTimeout = 20 * time.Second

// target is the server a run loads: one natsperf started, or --url.
type target struct {
	url      string
	variant  string  // the report's Variant
	storeDir string  // where the stream's files land, for sizing it
	srv      *server // nil with --url
	info     string  // what was checked about the server, for the live output
}

// openTarget starts the server (or takes --url), waits until JetStream
// answers, and checks the sync setting is the one asked for. It returns a
// connection to it; close both when done.
func openTarget(ctx context.Context, cfg Config) (*target, *nats.Conn, error) {
	if cfg.URL != "" {
		return openExternal(ctx, cfg)
	}
	srv, err := startServer(cfg)
	if err != nil {
		return nil, nil, err
	}
	t := &target{url: srv.url, variant: variantName(cfg.Sync), storeDir: srv.dir, srv: srv}
	nc, err := t.ready(ctx)
	if err == nil {
		t.info, err = verifySync(ctx, srv.monitor, cfg.Sync)
		if err != nil {
			nc.Close()
		}
	}
	if err != nil {
		return nil, nil, errors.Join(err, srv.stop())
	}
	return t, nc, nil
}

// openExternal uses a server someone else runs: its sync setting cannot be
// seen, so the variant says it was not checked, and where it stores is not
// known either, so the stream is sized by the local temp dir's free space.
func openExternal(ctx context.Context, cfg Config) (*target, *nats.Conn, error) {
	t := &target{url: cfg.URL, variant: variantName(cfg.Sync) + " (unverified: --url)", storeDir: os.TempDir(),
		info: "sync setting not checked (--url)"}
	nc, err := t.ready(ctx)
	if err != nil {
		return nil, nil, err
	}
	return t, nc, nil
}

func variantName(sync string) string {
	if sync == syncAlways {
		return "sync_interval=always"
	}
	return syncDefault
}

// close stops the server this run started, if any.
func (t *target) close() error {
	if t.srv == nil {
		return nil
	}
	return t.srv.stop()
}

// ready connects, retrying while the server starts, then waits for
// JetStream to answer an account info request.
func (t *target) ready(ctx context.Context) (*nats.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var last error
	for {
		nc, err := nats.Connect(t.url, nats.Name("natsperf-admin"), nats.Timeout(time.Second), nats.NoReconnect())
		if err == nil {
			if err = jetStreamReady(ctx, nc); err == nil {
				return nc, nil
			}
			nc.Close()
		}
		last = err
		if err := t.waitRetry(ctx); err != nil {
			return nil, fmt.Errorf("%s not ready: %w (last: %v)", t.url, err, last)
		}
	}
}

func jetStreamReady(ctx context.Context, nc *nats.Conn) error {
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("jetstream context: %w", err)
	}
	ictx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ictx); err != nil {
		return fmt.Errorf("jetstream account info: %w", err)
	}
	return nil
}

// waitRetry pauses before the next connection attempt; it fails at once if
// the server this run started has exited, with its log.
func (t *target) waitRetry(ctx context.Context) error {
	var exited <-chan struct{}
	if t.srv != nil {
		exited = t.srv.exited
	}
	select {
	case <-exited:
		return fmt.Errorf("nats-server exited during startup (%v); its log:\n%s", t.srv.waitErr, t.srv.logTail())
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(100 * time.Millisecond):
		return nil
	}
}

// varz is the part of the server's /varz the check reads.
type varz struct {
	Version   string `json:"version"`
	JetStream struct {
		Config struct {
			SyncAlways   bool  `json:"sync_always"`
			SyncInterval int64 `json:"sync_interval"` // ns; servers before 2.10 omit it
		} `json:"config"`
	} `json:"jetstream"`
}

// verifySync asks the running server whether it fsyncs every write: the
// config file is only what was asked for, /varz is what the server took.
func verifySync(ctx context.Context, monitor, sync string) (string, error) {
	v, err := fetchVarz(ctx, monitor)
	if err != nil {
		return "", err
	}
	cfg := v.JetStream.Config
	if got := cfg.SyncAlways; got != (sync == syncAlways) {
		return "", fmt.Errorf("--sync %s but nats-server %s reports sync_always=%t in /varz", sync, v.Version, got)
	}
	interval := "not reported (servers before 2.10; streams sync every 2m)"
	if cfg.SyncInterval > 0 {
		interval = time.Duration(cfg.SyncInterval).String()
	}
	return fmt.Sprintf("nats-server %s, /varz: sync_always=%t sync_interval=%s", v.Version, cfg.SyncAlways, interval), nil
}

func fetchVarz(ctx context.Context, monitor string) (varz, error) {
	var v varz
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, monitor+"/varz", nil)
	if err != nil {
		return v, fmt.Errorf("varz request: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return v, fmt.Errorf("reading %s/varz: %w", monitor, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return v, fmt.Errorf("reading %s/varz: %w", monitor, err)
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return v, fmt.Errorf("decoding %s/varz: %w", monitor, err)
	}
	return v, nil
}
