package chaos

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// goodTopic is a topic where sequences 0..n-1 were sent, acknowledged and
// received everywhere, in order, at ledger 1 entry seq.
func goodTopic(n int, dedup bool) *TopicRecord {
	t := &TopicRecord{Spec: TopicSpec{Name: "persistent://public/chaos-d/t", Dedup: dedup}, Producer: "p-t",
		Sent: int64(n), Subs: map[string][]Receipt{}, Readers: make([][]Receipt, 2)}
	var rs []Receipt
	for i := range int64(n) {
		id := fmt.Sprintf("1:%d:0", i)
		t.Acked = append(t.Acked, Ack{Seq: i, At: 1000 + 20*i, ID: id})
		rs = append(rs, Receipt{Seq: i, Key: KeyOf(i), ID: id})
	}
	for _, s := range Subscriptions {
		t.Subs[s.Name] = append([]Receipt{}, rs...)
	}
	for i := range t.Readers {
		t.Readers[i] = append([]Receipt{}, rs...)
	}
	return t
}

func TestCheckerAcceptsAGoodRun(t *testing.T) {
	tp := goodTopic(10, true)
	// Redeliveries of what was received already are allowed anywhere.
	tp.Subs["exclusive"] = append(tp.Subs["exclusive"], tp.Subs["exclusive"][3:6]...)
	// So is a resend deduplicated: its receipt has no position.
	tp.Acked = append(tp.Acked, Ack{Seq: 9, At: 1300, ID: "-1:-1:0"})
	v := Check(&Results{Topics: []*TopicRecord{tp}, Drained: true, StoppedAt: 1400})
	if !v.OK() || len(v.Problems) > 0 {
		t.Fatalf("%+v", v)
	}
	if v.MaxUnavailable != 120*time.Millisecond { // the last acknowledgement at 1280 to the stop at 1400
		t.Fatalf("unavailability %s", v.MaxUnavailable)
	}
}

// Each guarantee, broken on its own, is reported as that guarantee.
func TestCheckerFindsEachViolation(t *testing.T) {
	for name, c := range map[string]struct {
		breakIt func(*TopicRecord)
		field   func(Verdict) int
		want    string
	}{
		"lost": {func(tp *TopicRecord) { tp.Subs["shared"] = tp.Subs["shared"][:9] },
			func(v Verdict) int { return v.Lost }, "never reached shared"},
		"lost from a reader": {func(tp *TopicRecord) { tp.Readers[1] = tp.Readers[1][1:] },
			func(v Verdict) int { return v.Lost }, "never reached reader-1"},
		"reordered": {func(tp *TopicRecord) {
			f := tp.Subs["failover"]
			f[4], f[5] = f[5], f[4]
		}, func(v Verdict) int { return v.Reordered }, "failover: sequence 4 first received after 5"},
		"reordered per key": {func(tp *TopicRecord) {
			// Keys repeat every 8: 1 and 9 share k1.
			ks := tp.Subs["key_shared"]
			ks[1], ks[9] = ks[9], ks[1]
		}, func(v Verdict) int { return v.Reordered }, "key_shared: sequence 1 first received after 9"},
		"duplicated": {func(tp *TopicRecord) {
			tp.Readers[0] = append(tp.Readers[0], Receipt{Seq: 3, Key: KeyOf(3), ID: "2:0:0"})
		}, func(v Verdict) int { return v.Duplicated }, "sequence 3 stored 2 times"},
		"phantom": {func(tp *TopicRecord) {
			tp.Subs["shared"] = append(tp.Subs["shared"], Receipt{Seq: 42, Key: KeyOf(42), ID: "1:42:0"})
		}, func(v Verdict) int { return v.Phantom }, "sequence 42 received, only 0..9 sent"},
		"corrupt": {func(tp *TopicRecord) {
			tp.Subs["shared"] = append(tp.Subs["shared"], Receipt{Seq: 0, ID: "1:0:0", Bad: "crc mismatch"})
		}, func(v Verdict) int { return v.Phantom }, "crc mismatch"},
		"readers disagree": {func(tp *TopicRecord) {
			r := tp.Readers[1]
			r[2], r[3] = r[3], r[2]
		}, func(v Verdict) int { return v.ReaderMismatch }, "reader-0 and reader-1 differ at message 2"},
	} {
		t.Run(name, func(t *testing.T) {
			tp := goodTopic(10, true)
			c.breakIt(tp)
			v := Check(&Results{Topics: []*TopicRecord{tp}})
			if v.OK() || c.field(v) == 0 || !strings.Contains(strings.Join(v.Problems, "\n"), c.want) {
				t.Fatalf("want %q reported, got %+v", c.want, v)
			}
		})
	}
}

// geoTopic is goodTopic replicated: the subscription in the remote
// cluster received everything in order, at the remote's own positions.
func geoTopic(n int) *TopicRecord {
	t := goodTopic(n, true)
	t.Spec.Remote = remoteGroup
	for i := range int64(n) {
		t.Subs[GeoSubscription] = append(t.Subs[GeoSubscription], Receipt{Seq: i, Key: KeyOf(i), ID: fmt.Sprintf("77:%d:0", i)})
	}
	return t
}

// The remote cluster's subscription is held to the same rules; its
// positions differ from the source's without counting as duplicates.
func TestCheckerGeoSubscription(t *testing.T) {
	if v := Check(&Results{Topics: []*TopicRecord{geoTopic(10)}}); !v.OK() || len(v.Problems) > 0 {
		t.Fatalf("a good replicated run: %+v", v)
	}
	for name, c := range map[string]struct {
		breakIt func(*TopicRecord)
		field   func(Verdict) int
		want    string
	}{
		"lost": {func(tp *TopicRecord) { tp.Subs[GeoSubscription] = tp.Subs[GeoSubscription][1:] },
			func(v Verdict) int { return v.Lost }, "never reached " + GeoSubscription},
		"reordered": {func(tp *TopicRecord) {
			g := tp.Subs[GeoSubscription]
			g[2], g[3] = g[3], g[2]
		}, func(v Verdict) int { return v.Reordered }, GeoSubscription + " in c2: sequence 2 first received after 3"},
		"stored twice in the remote": {func(tp *TopicRecord) {
			tp.Subs[GeoSubscription] = append(tp.Subs[GeoSubscription], Receipt{Seq: 4, Key: KeyOf(4), ID: "78:0:0"})
		}, func(v Verdict) int { return v.Duplicated }, "(dedup on) in c2: sequence 4 stored 2 times"},
	} {
		t.Run(name, func(t *testing.T) {
			tp := geoTopic(10)
			c.breakIt(tp)
			v := Check(&Results{Topics: []*TopicRecord{tp}})
			if v.OK() || c.field(v) == 0 || !strings.Contains(strings.Join(v.Problems, "\n"), c.want) {
				t.Fatalf("want %q reported, got %+v", c.want, v)
			}
		})
	}
}

// Without deduplication a sequence stored twice is allowed, and counted.
func TestCheckerDuplicatesWithoutDedup(t *testing.T) {
	tp := goodTopic(10, false)
	tp.Readers[0] = append(tp.Readers[0], Receipt{Seq: 3, Key: KeyOf(3), ID: "2:0:0"})
	tp.Readers[1] = append(tp.Readers[1], Receipt{Seq: 3, Key: KeyOf(3), ID: "2:0:0"})
	v := Check(&Results{Topics: []*TopicRecord{tp}})
	if !v.OK() || v.DupNoDedup != 1 {
		t.Fatalf("%+v", v)
	}
}

func TestPayloadRoundTrip(t *testing.T) {
	p := Payload("p-x", 17, time.Unix(0, 5))
	prod, seq, err := ParsePayload(p)
	if err != nil || prod != "p-x" || seq != 17 {
		t.Fatalf("%q: %s %d %v", p, prod, seq, err)
	}
	p[2] ^= 1
	if _, _, err := ParsePayload(p); err == nil {
		t.Fatal("a flipped bit passed the CRC")
	}
}

func TestSeedList(t *testing.T) {
	if got := seedList([]int64{5, 1, 2, 3, 9, 10}); got != "1-3,5,9-10" {
		t.Fatal(got)
	}
}

// The transaction check fails on each broken guarantee: a committed
// message missing or twice in a sink, a sink message A never had, and a
// live delivery that is not the committed message (an aborted one).
func TestCheckTxn(t *testing.T) {
	source := &TopicRecord{Spec: TopicSpec{Name: "a"}, Sent: 3, Acked: []Ack{{Seq: 0}, {Seq: 1}, {Seq: 2}}}
	good := func() *TxnRecord {
		final := []Receipt{{Seq: 0, ID: "1:0"}, {Seq: 1, ID: "1:1"}, {Seq: 2, ID: "1:2"}}
		return &TxnRecord{Spec: TxnSpec{Source: "a", SinkB: "b", SinkC: "c"},
			Final: map[string][]Receipt{"b": final, "c": final},
			Live:  map[string][]Receipt{"b": {{Seq: 1, ID: "1:1"}}}}
	}
	var v Verdict
	checkTxn(&v, good(), source)
	if !v.OK() {
		t.Fatalf("a clean pipeline failed: %+v", v)
	}
	for name, breakIt := range map[string]func(r *TxnRecord){
		"lost":       func(r *TxnRecord) { r.Final["c"] = r.Final["c"][:2] },
		"duplicated": func(r *TxnRecord) { r.Final["b"] = append(r.Final["b"], Receipt{Seq: 2, ID: "1:7"}) },
		"phantom":    func(r *TxnRecord) { r.Final["b"] = append(r.Final["b"], Receipt{Seq: 9, ID: "1:8"}) },
		"aborted delivered": func(r *TxnRecord) {
			r.Live["b"] = append(r.Live["b"], Receipt{Seq: 0, ID: "1:5"})
		},
	} {
		r := good()
		breakIt(r)
		var v Verdict
		checkTxn(&v, r, source)
		if v.OK() {
			t.Errorf("%s: the check passed", name)
		}
	}
}

// Availability split by quorum, and the longest a subscription waited
// for an acknowledged message.
func TestAvailabilityByQuorumAndDelivery(t *testing.T) {
	acks := func(times ...int64) []Ack {
		var out []Ack
		for i, at := range times {
			out = append(out, Ack{Seq: int64(i), At: at})
		}
		return out
	}
	spare := &TopicRecord{Spec: TopicSpec{Name: "s", Qw: 3, Qa: 2}, Acked: acks(1000, 1100, 1200), Subs: map[string][]Receipt{}}
	noSpare := &TopicRecord{Spec: TopicSpec{Name: "n", Qw: 2, Qa: 2}, Acked: acks(1000, 5000), Subs: map[string][]Receipt{}}
	// Exclusive: receipts at 1010, 1110, then nothing until 4210 though
	// seq 2 was acknowledged at 1200: 3.1 s without a delivery. A
	// redelivery of seq 1 at 1500 does not count as progress.
	spare.Subs["exclusive"] = []Receipt{{Seq: 0, At: 1010}, {Seq: 1, At: 1110}, {Seq: 1, At: 1500}, {Seq: 2, At: 4600}}
	// Idle without a backlog does not count: nothing acknowledged between
	// 1010 and 5000.
	noSpare.Subs["exclusive"] = []Receipt{{Seq: 0, At: 1010}, {Seq: 1, At: 5010}}
	v := Check(&Results{Topics: []*TopicRecord{spare, noSpare}, StoppedAt: 5100})
	if v.UnavailableSpare != 3900*time.Millisecond || v.UnavailableNoSpare != 4000*time.Millisecond {
		t.Errorf("unavailable: spare %s (want 3.9s: 1200 to the stop), no spare %s (want 4s)", v.UnavailableSpare, v.UnavailableNoSpare)
	}
	if v.MaxUndelivered != 3100*time.Millisecond {
		t.Errorf("longest without a delivery %s, want 3.1s (1500 to 4600 with seq 2 acknowledged at 1200)", v.MaxUndelivered)
	}
}

func TestQuantileByNearestRank(t *testing.T) {
	ds := []time.Duration{5 * time.Second, time.Second, 3 * time.Second, 2 * time.Second}
	if q := quantile(ds, 0.5); q != 2*time.Second {
		t.Errorf("p50 of 1,2,3,5 s = %s, want 2s (nearest rank)", q)
	}
	if q := quantile(ds, 1); q != 5*time.Second {
		t.Errorf("max = %s", q)
	}
	if q := quantile(nil, 0.5); q != 0 {
		t.Errorf("p50 of nothing = %s", q)
	}
}
