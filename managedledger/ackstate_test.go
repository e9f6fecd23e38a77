package managedledger

import (
	"fmt"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// TestBKCursorRestoreLargeAckedRanges: restoring a snapshot inserted its
// acknowledged ranges one index at a time, each insertion scanning the
// ranges: 600 ranges of 1000 entries took seconds (10,000 ranges, the
// most a snapshot keeps, took minutes), in Open, under the ledger's lock.
func TestBKCursorRestoreLargeAckedRanges(t *testing.T) {
	ml := &bkLedger{}
	ml.mu.ledgers = []*ledgerInfo{{meta: ledgerMeta{ID: 1, Entries: 1 << 40}}}
	c := &bkCursor{ml: ml}
	s := cursorSnapshot{MarkDelete: Position{1, 0}}
	for r := range int64(600) {
		lo := 10 + r*2000
		s.Acked = append(s.Acked, [2]Position{{1, lo}, {1, lo + 999}})
	}
	s.Acked = append(s.Acked, [2]Position{{1, 2}, {1, 9}}) // out of order: merges with the first
	start := time.Now()
	c.restoreLocked(s)
	if took := time.Since(start); took > time.Second {
		t.Errorf("restoring 600 acked ranges took %v", took)
	}
	if len(c.acked) != 600 || c.acked[0] != (indexRange{2, 1009}) || c.acked[599] != (indexRange{10 + 599*2000, 10 + 599*2000 + 999}) {
		t.Fatalf("restored %d ranges, first %v", len(c.acked), c.acked[:1])
	}
	if c.markDelete != 0 || c.backlog(0, 2000) != 2000-1-1008 {
		t.Fatalf("mark-delete %d, backlog %d", c.markDelete, c.backlog(0, 2000))
	}
}

// TestAckStateAddAckedRange checks addAckedRange against addAcked.
func TestAckStateAddAckedRange(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var a, b ackState
		for range rapid.IntRange(0, 20).Draw(rt, "n") {
			lo := rapid.Int64Range(0, 60).Draw(rt, "lo")
			hi := lo + rapid.Int64Range(-1, 8).Draw(rt, "len")
			for i := lo; i <= hi; i++ {
				a.addAcked(i)
			}
			b.addAckedRange(lo, hi)
			if fmt.Sprint(a.acked) != fmt.Sprint(b.acked) {
				rt.Fatalf("after [%d, %d]: addAcked %v, addAckedRange %v", lo, hi, a.acked, b.acked)
			}
		}
	})
}
