package perfbookie

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// patternSpread is how many distinct bodies entries of one size can have:
// an entry's body starts at an offset into the pattern chosen from its
// ledger and entry id. Prime, so consecutive entries never share one.
const patternSpread = 4093

// pattern is the seeded noise every entry body is cut from. Reads check
// every byte against it, so they need no copy of what was written, and
// noise rather than zeros keeps any layer below from shortcutting it.
// Read-only once built.
type pattern struct{ buf []byte }

func newPattern(maxSize int) *pattern {
	rng := rand.New(rand.NewPCG(0x6d61676e, 0x65746172))
	buf := make([]byte, maxSize+patternSpread)
	for i := 0; i+8 <= len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], rng.Uint64())
	}
	return &pattern{buf: buf}
}

// body is what follows the head in entry (ledgerID, entryID) of size bytes.
func (p *pattern) body(ledgerID, entryID int64, size int) []byte {
	off := int((uint64(ledgerID)*1_000_003 + uint64(entryID)*7919) % patternSpread)
	return p.buf[off : off+size-bkproto.EntryHeadLen]
}

// fill writes the entry into buf (len(buf) == size).
func (p *pattern) fill(buf []byte, ledgerID, entryID, lac int64) {
	bkproto.PutEntryHead(buf, bkproto.EntryHead{LedgerID: ledgerID, EntryID: entryID, LAC: lac})
	copy(buf[bkproto.EntryHeadLen:], p.body(ledgerID, entryID, len(buf)))
}

// check reports how data differs from what the writer sent for the entry.
// The head's LAC is the writer's at sending time: only its range is known.
func (p *pattern) check(data []byte, ledgerID, entryID int64, size int) error {
	if len(data) != size {
		return fmt.Errorf("ledger %d entry %d: read %d bytes, wrote %d", ledgerID, entryID, len(data), size)
	}
	h, err := bkproto.ParseEntryHead(data)
	if err != nil {
		return fmt.Errorf("ledger %d entry %d: %w", ledgerID, entryID, err)
	}
	if h.LedgerID != ledgerID || h.EntryID != entryID || h.LAC < -1 || h.LAC >= entryID {
		return fmt.Errorf("ledger %d entry %d: read back the head of ledger %d entry %d (LAC %d)",
			ledgerID, entryID, h.LedgerID, h.EntryID, h.LAC)
	}
	if want := p.body(ledgerID, entryID, size); !bytes.Equal(data[bkproto.EntryHeadLen:], want) {
		i := 0
		for i < len(want) && data[bkproto.EntryHeadLen+i] == want[i] {
			i++
		}
		return fmt.Errorf("ledger %d entry %d: read bytes differ from those written at offset %d",
			ledgerID, entryID, bkproto.EntryHeadLen+i)
	}
	return nil
}
