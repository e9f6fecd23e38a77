package chaos

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A kept run's timeline holds the fault steps, the servers' notable
// events and the waiting producer's client lines inside the gap, folds
// repeats, and leaves out traces, routine lines, other topics and what
// happened before the fault or after the gap.
func TestTimelineOfAKeptRun(t *testing.T) {
	dir := t.TempDir()
	t0 := time.Date(2026, 12, 5, 1, 40, 30, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ts := func(ms int) string { return at(ms).Format(time.RFC3339Nano) }
	const slow = "persistent://public/chaos-n/x-2-t1"
	res := Results{StartedAt: at(-5000).UnixMilli(), StoppedAt: at(9000).UnixMilli(), Topics: []*TopicRecord{
		{Spec: TopicSpec{Name: "persistent://public/chaos-d/x-2-t0"}, Acked: []Ack{{At: at(-100).UnixMilli()}, {At: at(300).UnixMilli()}, {At: at(3000).UnixMilli()}, {At: at(8900).UnixMilli()}}},
		{Spec: TopicSpec{Name: slow}, Acked: []Ack{{At: at(-20).UnixMilli()}, {At: at(6300).UnixMilli()}, {At: at(8950).UnixMilli()}}},
	}}
	g := longestGapOf(&res)
	if g.Topic != slow || !g.From.Equal(at(-20)) || !g.To.Equal(at(6300)) {
		t.Fatalf("gap %+v", g)
	}
	write := func(name string, lines ...string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("br1.log",
		"time="+ts(-3000)+` level=WARN msg="before the fault"`,
		"time="+ts(300)+` level=WARN msg="broker refuses connections: lookups wait" broker=198.18.0.18:6650`,
		"time="+ts(400)+` level=INFO msg="trace: reader delivery" position=46:17`,
		"time="+ts(500)+` level=INFO msg="memory limit set"`,
		startMarker+"br1 "+ts(2400),
		"time="+ts(4000)+` level=INFO msg="bundle acquired" bundle=public/chaos-n/0xc0000000_0xffffffff`,
		"time="+ts(7000)+` level=INFO msg="bundle acquired" bundle=after/the-gap`)
	write("workload.log",
		"time="+ts(10)+` level=WARN msg="Connection was closed" topic=`+slow+` producer_name=p producerID=4`,
		"time="+ts(100)+` level=ERROR msg="Failed to get connection" topic=`+slow+` producer_name=p producerID=4`,
		"time="+ts(220)+` level=ERROR msg="Failed to get connection" topic=`+slow+` producer_name=p producerID=4`,
		"time="+ts(230)+` level=ERROR msg="Failed to create consumer" topic=`+slow+` subscription=s consumerID=3`,
		"time="+ts(240)+` level=ERROR msg="Failed to get connection" topic=persistent://public/chaos-d/x-2-t0 producer_name=q`)
	faults := []Moment{{At: at(-4000), Where: "chaos", What: "restarting stale bk1"}, {At: at(-1), Where: "chaos", What: injectMarker},
		{At: at(0), Where: "chaos", What: "kill -9 br2"}, {At: at(2400), Where: "chaos", What: "restarting br2 after 2.4s"}}
	if err := writeFaults(dir, faults); err != nil {
		t.Fatal(err)
	}
	back, err := readFaults(dir)
	if err != nil || len(back) != len(faults) || back[2].What != "kill -9 br2" || !back[2].At.Equal(at(0)) {
		t.Fatalf("faults.log round trip: %+v %v", back, err)
	}
	tl := Timeline(dir, back, g)
	var got []string
	for _, m := range tl {
		got = append(got, m.Where+": "+eventKey(m.What))
	}
	want := []string{
		"chaos: kill -9 br2",
		"client: WARN Connection was closed",
		"client: ERROR Failed to get connection",
		"br1: WARN broker refuses connections: lookups wait",
		"chaos: restarting br2 after 2.4s",
		"br1: process started",
		"br1: bundle acquired",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("timeline:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if tl[2].Count != 2 {
		t.Errorf("repeated client failure counted %d times, want 2", tl[2].Count)
	}
	var b strings.Builder
	writeTimelines(&b, map[string]*Slowest{"kill-broker": {Seed: 2, Unavailable: g.To.Sub(g.From), Gap: g, Moments: tl}})
	out := b.String()
	for _, s := range []string{"### kill-broker, seed 2: 6.3 s on " + slow, "+0.00 s  chaos   kill -9 br2",
		"(x2)", "+6.30 s  client  first acknowledgement after the gap", "-0.02 s  client  last acknowledgement"} {
		if !strings.Contains(out, s) {
			t.Errorf("report section lacks %q:\n%s", s, out)
		}
	}
	raw, _ := json.Marshal(res)
	write("results.json", string(raw))
	sl, err := timelineOfDir(dir, 2, nil)
	if err != nil || len(sl.Moments) != len(tl) || sl.Unavailable != 6320*time.Millisecond {
		t.Fatalf("timelineOfDir: %+v %v", sl, err)
	}
}

// parseLogLine reads slog's text format, quoted messages with escapes
// included.
func TestParseLogLine(t *testing.T) {
	l, ok := parseLogLine(`time=2026-12-05T01:40:33.338Z level=INFO msg="say \"hi\" now" k=v x="a b"`)
	if !ok || l.level != "INFO" || l.msg != `say "hi" now` || l.attrs != `k=v x="a b"` {
		t.Fatalf("%+v %v", l, ok)
	}
	if l, ok := parseLogLine(`time=2026-12-05T01:40:33Z level=WARN msg=bare k=v`); !ok || l.msg != "bare" || l.attrs != "k=v" {
		t.Fatalf("%+v %v", l, ok)
	}
	for _, bad := range []string{"", "hello", "time=nope level=INFO msg=x", `time=2026-12-05T01:40:33Z msg=x`} {
		if _, ok := parseLogLine(bad); ok {
			t.Errorf("parsed %q", bad)
		}
	}
}
