package metadata_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/magnetar-io/magnetar/metadata"
	"github.com/magnetar-io/magnetar/metadata/zktest"
)

// casInput is one recorded operation on a key: a compare-and-set put
// (read=false) or a read.
type casInput struct {
	key      string
	read     bool
	expected int64
	value    string
}

// casOutput is what the store answered. unknown marks a put whose outcome
// the client never learnt (timeout, connection loss): it may or may not
// have been applied, at any time after it was called.
type casOutput struct {
	ok, badVersion, unknown bool
	version                 int64 // new version after a put, or the version read
	value                   string
}

type register struct {
	version int64
	value   string
}

// casModel is a versioned register per key, as ZooKeeper's setData with
// an expected version.
var casModel = porcupine.NondeterministicModel{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(casInput).key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, ops := range byKey {
			out = append(out, ops)
		}
		return out
	},
	Init: func() []any { return []any{register{}} },
	Step: func(state, input, output any) []any {
		s, in, out := state.(register), input.(casInput), output.(casOutput)
		next := register{version: s.version + 1, value: in.value}
		switch {
		case in.read:
			if out.version == s.version && out.value == s.value {
				return []any{s}
			}
		case out.unknown && s.version == in.expected:
			return []any{s, next}
		case out.unknown:
			return []any{s}
		case out.ok && s.version == in.expected && out.version == in.expected+1:
			return []any{next}
		case out.badVersion && s.version != in.expected:
			return []any{s}
		}
		return nil
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(casInput), output.(casOutput)
		if in.read {
			return fmt.Sprintf("read(%s) = v%d %q", in.key, out.version, out.value)
		}
		return fmt.Sprintf("cas(%s, v%d, %q) -> %+v", in.key, in.expected, in.value, out)
	},
}

// history records operations from many goroutines.
type history struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
}

func (h *history) now() int64 { return int64(time.Since(h.start)) }

func (h *history) add(client int, in casInput, out casOutput, call, ret int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Output: out, Call: call, Return: ret})
}

// TestZKLinearizableCAS records concurrent compare-and-set puts on a few
// keys from several sessions while the 3-node ensemble loses its leader
// and a follower and gets them back, then checks the history against a
// versioned-register model with porcupine.
func TestZKLinearizableCAS(t *testing.T) {
	zk := startZK(t, 3)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	keys := []string{"/lin/a", "/lin/b", "/lin/c"}
	setup := openZK(t, zk.Connection, metadata.ZKOptions{SessionTimeout: 15 * time.Second})
	for _, k := range keys {
		if _, _, err := setup.Create(context.Background(), k, nil, metadata.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	h := &history{start: time.Now()}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	const clients = 5
	for c := 0; c < clients; c++ {
		s := openZK(t, zk.Connection, metadata.ZKOptions{SessionTimeout: 15 * time.Second, OperationTimeout: 4 * time.Second})
		wg.Add(1)
		go func() {
			defer wg.Done()
			runCASClient(s, c, keys, rand.New(rand.NewPCG(uint64(seed), uint64(c))), h, stop)
		}()
	}
	kills := runNemesis(t, zk)
	close(stop)
	wg.Wait()
	finalReads(t, zk, keys, h)
	checkHistory(t, h, kills)
}

func runCASClient(s metadata.Store, client int, keys []string, rng *rand.Rand, h *history, stop <-chan struct{}) {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		key := keys[rng.IntN(len(keys))]
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
		_, st, err := s.Get(ctx, key)
		cancel()
		if err != nil { // reads pick versions; a failed one records nothing
			time.Sleep(50 * time.Millisecond)
			continue
		}
		in := casInput{key: key, expected: st.Version, value: fmt.Sprintf("c%d-%d", client, n)}
		// Half the puts use a stale or future version on purpose (never
		// -1, which is AnyVersion).
		if rng.IntN(2) == 0 {
			in.expected = max(0, in.expected+int64(rng.IntN(3))-1)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 4*time.Second)
		call := h.now()
		st, err = s.Put(ctx, key, []byte(in.value), in.expected)
		ret := h.now()
		cancel()
		out := casOutput{ok: err == nil, version: st.Version}
		switch {
		case err == nil:
		case errors.Is(err, metadata.ErrBadVersion):
			out.badVersion = true
		default:
			out.unknown, ret = true, math.MaxInt64
		}
		h.add(client, in, out, call, ret)
	}
}

// runNemesis kills the leader, later a follower, each for two seconds,
// and returns how many kills it made.
func runNemesis(t *testing.T, zk *zktest.Cluster) int {
	kills := 0
	time.Sleep(time.Second)
	for round, role := range []string{"leader", "follower", "leader"} {
		node := findNode(zk, role)
		if node == 0 {
			t.Logf("round %d: no %s found", round, role)
			continue
		}
		if err := zk.StopNode(node); err != nil {
			t.Fatal(err)
		}
		kills++
		time.Sleep(2 * time.Second)
		if err := zk.StartNode(node); err != nil {
			t.Fatalf("%v\n%s", err, zk.ServerLog(node))
		}
		time.Sleep(time.Second)
	}
	return kills
}

func findNode(zk *zktest.Cluster, role string) int {
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		for i, host := range zk.Hosts {
			out, err := zktest.FourLetter(host, "srvr")
			if err == nil && strings.Contains(out, "Mode: "+role) {
				return i + 1
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0
}

// finalReads reads every key from a fresh session once writers stopped,
// so the check also covers what survived the faults.
func finalReads(t *testing.T, zk *zktest.Cluster, keys []string, h *history) {
	s := openZK(t, zk.Connection, metadata.ZKOptions{})
	for _, k := range keys {
		// The session may be served by a follower just restarted by the
		// nemesis: caught up first, its read sees every completed write.
		if err := metadata.Sync(context.Background(), s, k); err != nil {
			t.Fatal(err)
		}
		call := h.now()
		v, st, err := s.Get(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		h.add(99, casInput{key: k, read: true}, casOutput{version: st.Version, value: string(v)}, call, h.now())
	}
}

func checkHistory(t *testing.T, h *history, kills int) {
	var ok, conflicts, unknown int
	for _, op := range h.ops {
		out := op.Output.(casOutput)
		switch {
		case out.ok:
			ok++
		case out.badVersion:
			conflicts++
		case out.unknown:
			unknown++
		}
	}
	t.Logf("history: %d ops, %d applied, %d conflicts, %d unknown outcomes, %d node kills", len(h.ops), ok, conflicts, unknown, kills)
	if kills < 2 || ok < 50 || conflicts < 20 {
		t.Fatalf("the run did not exercise enough: %d kills, %d applied, %d conflicts", kills, ok, conflicts)
	}
	res, info := porcupine.CheckOperationsVerbose(casModel.ToModel(), h.ops, time.Minute)
	switch res {
	case porcupine.Ok:
	case porcupine.Illegal:
		for _, partition := range info.PartialLinearizations() {
			t.Logf("longest linearizable prefix: %d ops", len(partition))
		}
		t.Fatal("history is not linearizable")
	default:
		t.Fatalf("porcupine gave up: %v", res)
	}
}
