package main

// The proxy section (proxy issue): "1 KiB batched publish and end-to-end
// through one proxy vs direct, in one run: throughput at least 0.9 x
// direct, added publish p99 at 50% of the maximum at most 1 ms, proxy CPU
// per GiB forwarded". A durable standalone and one `magnetar proxy` in
// front of it (static brokerServiceURL/brokerWebServiceURL); the 1 KiB
// maximum direct and through the proxy, alternated; then e2e at 50% of
// the direct maximum (the median) both ways. The proxy's CPU comes from
// /proc/<pid>/stat, its bytes from its /metrics (pulsar_proxy_binary_bytes).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// proxyRounds is how many direct and proxied maximum runs alternate.
const proxyRounds = 2

// Targets of the proxy and security issues.
const (
	targetTLSvsPlain      = 0.8 // TLS 1 KiB publish over plaintext
	targetProxyVsDirect   = 0.9 // proxied 1 KiB publish over direct
	targetProxyAddedP99Ms = 1.0 // added publish p99 at 50% of the direct maximum
)

// runProxy measures direct and proxied runs against one standalone.
func (r *runner) runProxy(ctx context.Context) error {
	d := &r.res.Proxy
	dir := filepath.Join(r.o.work, "proxy")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	t, err := r.startStandalone(filepath.Join(dir, "data"))
	if err != nil {
		return err
	}
	defer t.servers[0].stop()
	px, pt, err := r.startProxy(dir, t)
	if err != nil {
		return err
	}
	defer px.stop()
	d.Ran = true
	d.Setup = "one durable standalone and one `magnetar proxy` process in front of it (static brokerServiceURL, " +
		"plaintext both sides); 1 KiB, batching on; maximum runs alternated direct/proxy, then e2e at 50% of the " +
		"direct maximum (median) each way"
	proxied := func(label, mode string, args ...string) (Run, error) {
		cpu0, err1 := px.cpuSeconds()
		b0, err2 := proxyBytes(ctx, pt.admin)
		run, err := r.perf(ctx, pt, label, mode, args...)
		cpu1, err3 := px.cpuSeconds()
		b1, err4 := proxyBytes(ctx, pt.admin)
		if err := errorsJoin(err, err1, err2, err3, err4); err != nil {
			return run, err
		}
		d.ProxyCPUSeconds += cpu1 - cpu0
		d.ProxyBytes += b1 - b0
		return run, nil
	}
	for i := range proxyRounds {
		run, err := r.perf(ctx, t, fmt.Sprintf("direct max 1 KiB #%d", i+1), "produce", maxArgs(fmt.Sprintf("proxy-direct-%d", i))...)
		if err != nil {
			return err
		}
		d.DirectMax = append(d.DirectMax, run)
		run, err = proxied(fmt.Sprintf("proxy max 1 KiB #%d", i+1), "produce", maxArgs(fmt.Sprintf("proxy-proxied-%d", i))...)
		if err != nil {
			return err
		}
		d.ProxyMax = append(d.ProxyMax, run)
	}
	rate := ftoa(medianPS(d.DirectMax) / 2)
	direct, err := r.perf(ctx, t, "direct e2e at 50%", "e2e", "--size", "1024", "--topic", "persistent://public/default/proxy-direct-fixed", "--rate", rate)
	if err != nil {
		return err
	}
	direct.Percent = 50
	d.DirectFixed = &direct
	through, err := proxied("proxy e2e at 50%", "e2e", "--size", "1024", "--topic", "persistent://public/default/proxy-proxied-fixed", "--rate", rate)
	if err != nil {
		return err
	}
	through.Percent = 50
	d.ProxyFixed = &through
	return nil
}

// startProxy starts magnetar proxy in front of t; the returned target
// is t through the proxy, its servers t's and the proxy's.
func (r *runner) startProxy(dir string, t target) (*server, target, error) {
	bin, err1 := freePort()
	web, err2 := freePort()
	if err1 != nil || err2 != nil {
		return nil, target{}, fmt.Errorf("free ports: %v %v", err1, err2)
	}
	conf := filepath.Join(dir, "proxy.conf")
	if err := os.WriteFile(conf, []byte(strings.Join([]string{"brokerServiceURL=" + t.service, "brokerWebServiceURL=" + t.admin,
		"bindAddress=127.0.0.1", "servicePort=" + itoa(bin), "webServicePort=" + itoa(web),
		"brokerProxyAllowedHostNames=*", "brokerProxyAllowedIPAddresses=*", "brokerProxyAllowedTargetPorts=*", ""}, "\n")), 0o644); err != nil {
		return nil, target{}, err
	}
	s, err := startServer("proxy", r.o.magnetar, filepath.Join(r.logDir, "proxy.log"), "proxy", "--config", conf)
	if err != nil {
		return nil, target{}, err
	}
	if err := s.waitReady(time.Minute); err != nil {
		_ = s.stop()
		return nil, target{}, err
	}
	pt := target{name: "proxy", service: fmt.Sprintf("pulsar://127.0.0.1:%d", bin), admin: fmt.Sprintf("http://127.0.0.1:%d", web),
		servers: append([]*server{s}, t.servers...)}
	return s, pt, nil
}

// proxyBytes is the proxy's pulsar_proxy_binary_bytes counter (both ways).
func proxyBytes(ctx context.Context, admin string) (float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return metricValue(resp.Body, "pulsar_proxy_binary_bytes")
}

// metricValue sums a metric's samples (any labels; name or name_total)
// in Prometheus text format.
func metricValue(r io.Reader, name string) (float64, error) {
	var sum float64
	found := false
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// name{labels} value [timestamp]: labels may hold spaces.
		series, rest := line, ""
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			series, rest = line[:i+1], line[i+1:]
		} else if i := strings.IndexByte(line, ' '); i >= 0 {
			series, rest = line[:i], line[i:]
		}
		n, _, _ := strings.Cut(series, "{")
		vals := strings.Fields(rest)
		if n != name && n != name+"_total" || len(vals) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(vals[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric %s: %w", name, err)
		}
		sum, found = sum+v, true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("no metric %s", name)
	}
	return sum, nil
}

// writeProxy is the proxy section of the report.
func writeProxy(w io.Writer, res *Results) {
	d := res.Proxy
	if !d.Ran {
		skippedSection(w, "Proxy", d.Skipped)
		return
	}
	fmt.Fprintf(w, "## Proxy: 1 KiB through one magnetar proxy vs direct\n\n%s.\n\n", d.Setup)
	writeAlternated(w, "path", "server cores (proxy included)", "direct", d.DirectMax, "proxy", d.ProxyMax)
	direct, proxied := medianPS(d.DirectMax), medianPS(d.ProxyMax)
	if direct > 0 {
		fmt.Fprintf(w, "\nMedians: direct %.0f msg/s, through the proxy %.0f msg/s: **%.2f ×** direct.\n\n", direct, proxied, proxied/direct)
	}
	if d.Skipped != "" {
		fmt.Fprintf(w, "Not measured through the proxy: %s\n\n", oneLine(d.Skipped))
	}
	if d.DirectFixed != nil || d.ProxyFixed != nil {
		fmt.Fprintf(w, "| path | rate | achieved | publish p50 | p99 | p99.9 | e2e p50 | p99 | p99.9 | lost |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, p := range []struct {
			name string
			run  *Run
		}{{"direct", d.DirectFixed}, {"proxy", d.ProxyFixed}} {
			if p.run == nil {
				continue
			}
			r, pl, el := p.run.Report, lat(p.run.Report.PublishLatency), lat(p.run.Report.E2ELatency)
			fmt.Fprintf(w, "| %s | %.0f | %.0f | %s | %s | %s | %s | %s | %s | %d |\n", p.name, r.TargetRate, r.PublishPS,
				us(pl.P50), us(pl.P99), us(pl.P999), us(el.P50), us(el.P99), us(el.P999), r.Published-r.Consumed)
		}
		fmt.Fprintln(w)
	}
	if d.ProxyBytes > 0 {
		fmt.Fprintf(w, "Proxy CPU: %.1f s over %.2f GiB forwarded (both ways, every proxied run): **%.1f CPU seconds per GiB**.\n\n",
			d.ProxyCPUSeconds, d.ProxyBytes/(1<<30), d.CPUPerGiB())
	}
}
