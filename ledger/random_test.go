package ledger

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/magnetar-io/magnetar/wire/bkproto"
)

var seeds = flag.Int("ledger.seeds", 200, "seeds of TestRandomizedFaults (make test-long runs more)")

// shortSeeds is n, or short under go test -short unless the flag name was
// set on the command line: the fast inner loop (make test-short) runs a
// short variant of a seeded suite, make test all of it.
func shortSeeds(name string, n, short int) int {
	if !testing.Short() {
		return n
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	if set {
		return n
	}
	return min(n, short)
}

// TestRandomizedFaults runs seeded scenarios: a random cluster and quorum,
// a writer under random faults (bookie crashes and restarts, partitions,
// lost requests and answers, delays), a concurrent recovery or a clean
// close; then the persistence property is checked. A failing seed is
// printed, and -run 'TestRandomizedFaults/seed=N' reruns it.
func TestRandomizedFaults(t *testing.T) {
	for seed := range uint64(shortSeeds("ledger.seeds", *seeds, 40)) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runScenario(t, seed) })
	}
}

func runScenario(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 42))
	n := 3 + rng.IntN(3)
	e := 2 + rng.IntN(n-1)
	w := 2 + rng.IntN(e-1)
	a := 1 + rng.IntN(w)
	c := newCluster(t, n, seed)
	c.faults.maxDelay = time.Duration(rng.IntN(300)) * time.Microsecond
	ctx := ctxFor(t, 60*time.Second)
	cfg := Config{AddTimeout: 100 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, SpeculativeReadTimeout: 20 * time.Millisecond}
	wh, err := c.client(t, cfg).Create(ctx, CreateOptions{EnsembleSize: e, WriteQuorumSize: w, AckQuorumSize: a, Password: password})
	if err != nil {
		t.Fatalf("E=%d Qw=%d Qa=%d on %d bookies: %v", e, w, a, n, err)
	}
	acked := newAcks()
	var wg sync.WaitGroup
	total := 40 + rng.IntN(80)
	faultAt, recoverAt := rng.IntN(total), rng.IntN(total+total/2)
	ids := sortedIDs(c)
	victim := ids[rng.IntN(len(ids))]
	kind := rng.IntN(4)
	t.Logf("n=%d E=%d Qw=%d Qa=%d total=%d faultAt=%d recoverAt=%d kind=%d victim=%s", n, e, w, a, total, faultAt, recoverAt, kind, victim) // shown on failure
	var recovered chan struct{}
	for i := range total {
		if i == faultAt {
			injectFault(c, kind, victim)
		}
		if i == recoverAt {
			recovered = make(chan struct{})
			go func() {
				defer close(recovered)
				c.client(t, cfg).OpenRecover(ctx, wh.ID(), password) // may fail under faults; checked below
			}()
		}
		wg.Add(1)
		wh.AppendAsync(payload(wh.ID(), int64(i)), acked.cb(&wg))
		if rng.IntN(8) == 0 {
			time.Sleep(time.Duration(rng.IntN(500)) * time.Microsecond)
		}
	}
	wg.Wait()
	if recovered == nil {
		_ = wh.Close(ctx) // may fail if the writer ran out of bookies: recovery closes it then
	} else {
		<-recovered
	}
	wh.finish()
	healAll(c)
	checkPersistence(t, c, wh.ID(), acked)
}

func sortedIDs(c *cluster) []string {
	var ids []string
	for i := range len(c.nodes) {
		ids = append(ids, fmt.Sprintf("bookie-%d", i))
	}
	return ids
}

func injectFault(c *cluster, kind int, victim string) {
	switch kind {
	case 0: // crash: unsynced data lost, comes back later
		c.stopBookie(victim)
	case 1:
		c.faults.partition(victim, true)
	case 2: // answers lost: adds applied but unacknowledged
		c.faults.addRule(func(id string, req *bkproto.Request) fate {
			if id == victim {
				return loseResponse
			}
			return deliver
		})
	case 3: // requests lost
		c.faults.addRule(func(id string, req *bkproto.Request) fate {
			if id == victim && req.Op == bkproto.OpAdd {
				return dropRequest
			}
			return deliver
		})
	}
}

// healAll restarts crashed bookies and removes every fault.
func healAll(c *cluster) {
	c.faults.mu.Lock()
	c.faults.rules = nil
	c.faults.partitioned = map[string]bool{}
	var down []string
	for id, nd := range c.nodes {
		if nd.core == nil {
			down = append(down, id)
		}
	}
	c.faults.mu.Unlock()
	for _, id := range down {
		c.startBookie(id)
	}
}
