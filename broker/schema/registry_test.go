package schema

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/metadata"
)

const topic = "persistent://t/ns/orders"

func newStore(t *testing.T) metadata.Store {
	t.Helper()
	st, err := metadata.Open(context.Background(), "memory:", metadata.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newRegistry(t *testing.T, st metadata.Store, cfg Config) *Registry {
	t.Helper()
	cfg.Store = st
	r, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func mustPut(t *testing.T, r *Registry, topic string, info Info) int64 {
	t.Helper()
	v, err := r.PutIfCompatible(context.Background(), topic, info, "test")
	if err != nil {
		t.Fatalf("PutIfCompatible: %v", err)
	}
	return v
}

func TestPutGetAndIdenticalSchema(t *testing.T) {
	ctx := context.Background()
	now := time.UnixMilli(1_700_000_000_123)
	r := newRegistry(t, newStore(t), Config{Now: func() time.Time { return now }})
	if _, err := r.GetLatest(ctx, topic); !errors.Is(err, ErrNotFound) {
		t.Fatalf("empty GetLatest = %v, want ErrNotFound", err)
	}
	props := map[string]string{"__alwaysAllowNull": "true"}
	if v := mustPut(t, r, topic, Info{Type: Avro, Data: []byte(userV1), Properties: props}); v != 0 {
		t.Fatalf("first version = %d", v)
	}
	// The same schema, respaced, on another partition: the same version.
	if v := mustPut(t, r, topic+"-partition-2", avroInfo(userV1Spaced)); v != 0 {
		t.Fatalf("identical schema got version %d, want 0", v)
	}
	if v := mustPut(t, r, topic, avroInfo(userAgeDefault)); v != 1 {
		t.Fatalf("second version = %d", v)
	}
	latest, err := r.GetLatest(ctx, "t/ns/orders")
	if err != nil || latest.Version != 1 || string(latest.Data) != userAgeDefault || latest.User != "test" {
		t.Fatalf("GetLatest = %+v, %v", latest, err)
	}
	v0, err := r.GetVersion(ctx, topic, 0)
	if err != nil || v0.Properties["__alwaysAllowNull"] != "true" || !v0.Timestamp.Equal(now) {
		t.Fatalf("GetVersion(0) = %+v, %v", v0, err)
	}
	all, err := r.GetAll(ctx, topic)
	if err != nil || len(all) != 2 {
		t.Fatalf("GetAll = %d versions, %v", len(all), err)
	}
	if v, err := r.FindVersion(ctx, topic, avroInfo(userAgeDefault)); v != 1 || err != nil {
		t.Fatalf("FindVersion = %d, %v", v, err)
	}
	if v, err := r.FindVersion(ctx, topic, avroInfo(userAgeNoDef)); v != -1 || err != nil {
		t.Fatalf("FindVersion(unknown) = %d, %v", v, err)
	}
	if _, err := r.GetVersion(ctx, topic, 7); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetVersion(7) = %v", err)
	}
}

func TestPutRefusesIncompatible(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t, newStore(t), Config{DefaultStrategy: Backward})
	mustPut(t, r, topic, avroInfo(userV1))
	_, err := r.PutIfCompatible(ctx, topic, avroInfo(userAgeNoDef), "")
	if !errors.Is(err, ErrIncompatible) || !strings.Contains(err.Error(), "BACKWARD") {
		t.Fatalf("add field without default under BACKWARD = %v", err)
	}
	_, err = r.PutIfCompatible(ctx, topic, Info{Type: Avro, Data: []byte(`{"type":"record","name":"User","fields":[{"name":"x"}]}`)}, "")
	if !errors.Is(err, ErrInvalidSchema) {
		t.Fatalf("invalid Avro = %v, want ErrInvalidSchema", err)
	}
	if _, err := r.PutIfCompatible(ctx, topic, Info{Type: String, Data: make([]byte, MaxDataSize+1)}, ""); !errors.Is(err, ErrInvalidSchema) ||
		!strings.Contains(err.Error(), "limit") {
		t.Fatalf("oversized schema = %v", err)
	}
	if all, _ := r.GetAll(ctx, topic); len(all) != 1 {
		t.Fatalf("refused schemas were stored: %d versions", len(all))
	}
}

func TestStrategyResolution(t *testing.T) {
	ctx := context.Background()
	var nsStrategy Strategy
	r := newRegistry(t, newStore(t), Config{
		NamespaceStrategy: func(_ context.Context, tenant, ns string) (Strategy, bool, error) {
			if tenant != "t" || ns != "ns" {
				t.Errorf("policy asked for %s/%s", tenant, ns)
			}
			return nsStrategy, true, nil
		},
	})
	mustPut(t, r, topic, avroInfo(userV1))
	// UNDEFINED namespace strategy: the broker default, FULL.
	if s, err := r.CheckCompatibility(ctx, topic, avroInfo(userAgeNoDef)); s != Full || !errors.Is(err, ErrIncompatible) {
		t.Fatalf("CheckCompatibility under the default = %s, %v", s, err)
	}
	nsStrategy = Forward
	if s, err := r.CheckCompatibility(ctx, topic, avroInfo(userAgeNoDef)); s != Forward || err != nil {
		t.Fatalf("CheckCompatibility under FORWARD = %s, %v", s, err)
	}
	if all, _ := r.GetAll(ctx, topic); len(all) != 1 {
		t.Fatal("CheckCompatibility stored a version")
	}
	nsStrategy = AlwaysIncompatible
	if _, err := r.PutIfCompatible(ctx, topic, avroInfo(userAgeDefault), ""); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("ALWAYS_INCOMPATIBLE = %v", err)
	}
	if v := mustPut(t, r, topic, avroInfo(userV1)); v != 0 {
		t.Fatalf("ALWAYS_INCOMPATIBLE still finds the identical schema, got %d", v)
	}
}

func TestAutoUpdateDisabled(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t, newStore(t), Config{
		NamespaceStrategy: func(context.Context, string, string) (Strategy, bool, error) { return Full, false, nil },
	})
	if _, err := r.PutIfCompatible(ctx, topic, avroInfo(userV1), ""); !errors.Is(err, ErrIncompatible) ||
		!strings.Contains(err.Error(), "auto updating is disabled") {
		t.Fatalf("producer on an empty history = %v, want refused as in Pulsar", err)
	}
	if v, err := r.PutAdmin(ctx, topic, avroInfo(userV1), "admin"); v != 0 || err != nil {
		t.Fatalf("PutAdmin = %d, %v", v, err)
	}
	if v := mustPut(t, r, topic, avroInfo(userV1)); v != 0 {
		t.Fatalf("registered schema = %d", v)
	}
	if _, err := r.PutIfCompatible(ctx, topic, avroInfo(userAgeDefault), ""); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("new compatible schema with auto update off = %v", err)
	}
}

func TestNamespacePolicyError(t *testing.T) {
	boom := errors.New("boom")
	r := newRegistry(t, newStore(t), Config{
		NamespaceStrategy: func(context.Context, string, string) (Strategy, bool, error) { return 0, false, boom },
	})
	if _, err := r.PutIfCompatible(context.Background(), topic, avroInfo(userV1), ""); !errors.Is(err, boom) {
		t.Fatalf("policy error = %v", err)
	}
}

func TestDeleteThenAdd(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t, newStore(t), Config{})
	mustPut(t, r, topic, avroInfo(userV1))
	if v, err := r.Delete(ctx, topic, "admin"); v != 1 || err != nil {
		t.Fatalf("Delete = %d, %v", v, err)
	}
	if v, err := r.Delete(ctx, topic, "admin"); v != -1 || err != nil {
		t.Fatalf("second Delete = %d, %v; want nothing to delete", v, err)
	}
	if _, err := r.GetLatest(ctx, topic); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetLatest after delete = %v", err)
	}
	if all, err := r.GetAll(ctx, topic); len(all) != 0 || err != nil {
		t.Fatalf("GetAll after delete = %d, %v", len(all), err)
	}
	// A fresh history: a change of type is fine, numbering goes on.
	if v := mustPut(t, r, topic, Info{Type: String}); v != 2 {
		t.Fatalf("first version after delete = %d, want 2", v)
	}
	if _, err := r.GetVersion(ctx, topic, 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("version before the delete = %v, want ErrNotFound", err)
	}
	// The old schema is no longer "identical": it is checked, and refused.
	if _, err := r.PutIfCompatible(ctx, topic, avroInfo(userV1), ""); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("pre-delete schema = %v, want incompatible with STRING", err)
	}
	if last, err := r.HardDelete(ctx, topic); last != 2 || err != nil {
		t.Fatalf("HardDelete = %d, %v", last, err)
	}
	if ok, _, _ := r.store.Exists(ctx, historyPath(ID{"t", "ns", "orders"})); ok {
		t.Fatal("HardDelete left the history node")
	}
	if v := mustPut(t, r, topic, avroInfo(userV1)); v != 0 {
		t.Fatalf("after hard delete the numbering restarts, got %d", v)
	}
}

func TestConsumerCompatibility(t *testing.T) {
	ctx := context.Background()
	r := newRegistry(t, newStore(t), Config{})
	if err := r.CheckConsumerCompatibility(ctx, topic, avroInfo(userV1)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("no schema = %v", err)
	}
	mustPut(t, r, topic, avroInfo(userAgeNoDef))
	if err := r.CheckConsumerCompatibility(ctx, topic, avroInfo(userV1)); err != nil {
		t.Fatalf("consumer reading a subset: %v", err)
	}
	if err := r.CheckConsumerCompatibility(ctx, topic, avroInfo(personV1)); !errors.Is(err, ErrIncompatible) {
		t.Fatalf("renamed record = %v", err)
	}
	if err := r.CheckConsumerCompatibility(ctx, topic, Info{Type: AutoConsume}); err != nil {
		t.Fatalf("AUTO_CONSUME: %v", err)
	}
}

// TestConcurrentPuts: two brokers (sessions) racing put distinct,
// mutually compatible schemas; every put gets its own version and the
// versions are 0..n-1 with no gaps or duplicates.
func TestConcurrentPuts(t *testing.T) {
	const perWriter = 12
	srv := metadata.NewMemoryServer()
	var regs [2]*Registry
	for i := range regs {
		st := srv.NewSession()
		t.Cleanup(func() { _ = st.Close() })
		regs[i] = newRegistry(t, st, Config{})
	}
	versions := make([][]int64, len(regs))
	var wg sync.WaitGroup
	for w, r := range regs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				v, err := r.PutIfCompatible(context.Background(), topic, optionalField(fmt.Sprintf("w%d_%d", w, i)), "")
				if err != nil {
					t.Errorf("writer %d: %v", w, err)
					return
				}
				versions[w] = append(versions[w], v)
			}
		}()
	}
	wg.Wait()
	all := slices.Concat(versions...)
	slices.Sort(all)
	for i, v := range all {
		if v != int64(i) {
			t.Fatalf("versions %v: want 0..%d each once", all, 2*perWriter-1)
		}
	}
	stored, err := regs[0].GetAll(context.Background(), topic)
	if err != nil || len(stored) != 2*perWriter {
		t.Fatalf("GetAll = %d versions, %v", len(stored), err)
	}
}

// TestConcurrentIdenticalPuts: racing puts of one schema agree on one version.
func TestConcurrentIdenticalPuts(t *testing.T) {
	r := newRegistry(t, newStore(t), Config{})
	got := make([]int64, 8)
	var wg sync.WaitGroup
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := r.PutIfCompatible(context.Background(), topic, avroInfo(userV1), "")
			if err != nil {
				t.Error(err)
			}
			got[i] = v
		}()
	}
	wg.Wait()
	for _, v := range got {
		if v != 0 {
			t.Fatalf("versions %v, want all 0", got)
		}
	}
}

// optionalField is a User record whose one extra field has a default, so
// any two such schemas are FULL-compatible.
func optionalField(name string) Info {
	return avroInfo(`{"type":"record","name":"User","fields":[{"name":"name","type":"string"},` +
		`{"name":"` + name + `","type":"int","default":0}]}`)
}

func TestCorruptHistory(t *testing.T) {
	ctx := context.Background()
	id := ID{"t", "ns", "orders"}
	cases := map[string]struct {
		path  string
		value string
	}{
		"not JSON":      {versionPath(id, 0), "{not json"},
		"unknown type":  {versionPath(id, 0), `{"version":0,"type":"FANCY","data":""}`},
		"wrong version": {versionPath(id, 0), `{"version":5,"type":"STRING","data":""}`},
		"bad base64":    {versionPath(id, 0), `{"version":0,"type":"STRING","data":"%%%"}`},
		"foreign child": {historyPath(id) + "/lock", `{}`},
		"short name":    {historyPath(id) + "/12", `{"version":12,"type":"STRING","data":""}`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			st := newStore(t)
			r := newRegistry(t, st, Config{})
			if _, err := st.Put(ctx, c.path, []byte(c.value), metadata.AnyVersion); err != nil {
				t.Fatal(err)
			}
			_, err := r.GetLatest(ctx, topic)
			if !errors.Is(err, ErrCorrupt) || errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), historyPath(id)) {
				t.Fatalf("GetLatest = %v, want ErrCorrupt naming the path", err)
			}
			if _, err := r.PutIfCompatible(ctx, topic, Info{Type: String}, ""); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("PutIfCompatible over a corrupt history = %v, want ErrCorrupt", err)
			}
			if _, err := r.HardDelete(ctx, topic); err != nil {
				t.Fatalf("HardDelete of a corrupt history: %v", err)
			}
			if v := mustPut(t, r, topic, Info{Type: String}); v != 0 {
				t.Fatalf("after removal, version %d", v)
			}
		})
	}
}

func TestInvalidTopic(t *testing.T) {
	r := newRegistry(t, newStore(t), Config{})
	if _, err := r.PutIfCompatible(context.Background(), "a/b", Info{Type: String}, ""); !errors.Is(err, ErrInvalidTopic) {
		t.Fatalf("bad topic = %v", err)
	}
	if _, err := New(Config{}); err == nil {
		t.Fatal("New without a store")
	}
	if _, err := New(Config{Store: r.store, DefaultStrategy: Strategy(42)}); err == nil {
		t.Fatal("New with an unknown strategy")
	}
	bad := newRegistry(t, newStore(t), Config{
		NamespaceStrategy: func(context.Context, string, string) (Strategy, bool, error) { return Strategy(-7), true, nil },
	})
	if _, err := bad.PutIfCompatible(context.Background(), topic, Info{Type: String}, ""); err == nil {
		t.Fatal("an unknown namespace strategy must not pass as compatible")
	}
}

// FuzzDecodeRecord: the stored-record decoder never panics, fails only
// with ErrCorrupt, and what it accepts survives an encode/decode round.
func FuzzDecodeRecord(f *testing.F) {
	good, _ := encodeRecord(Version{Info: Info{Type: Avro, Data: []byte(userV1), Properties: map[string]string{"a": "b"}},
		Version: 3, Timestamp: time.UnixMilli(1_700_000_000_000), User: "u"})
	f.Add(good)
	f.Add([]byte(`{"version":3,"type":"NONE","data":"","deleted":true}`))
	f.Add([]byte(`{"version":3,"type":"KEY_VALUE","data":null,"properties":{}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := decodeRecord("/schemas/t/ns/x/0000000003", 3, b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
			return
		}
		b2, err := encodeRecord(v)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		v2, err := decodeRecord("/schemas/t/ns/x/0000000003", 3, b2)
		if err != nil {
			t.Fatalf("re-decode %s: %v", b2, err)
		}
		if v.Type != v2.Type || string(v.Data) != string(v2.Data) || !mapsEqual(v.Properties, v2.Properties) ||
			!v.Timestamp.Equal(v2.Timestamp) || v.User != v2.User || v.Deleted != v2.Deleted || v.Version != v2.Version {
			t.Fatalf("round trip changed %+v into %+v", v, v2)
		}
	})
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
