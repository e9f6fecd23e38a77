package perfledger

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
)

// payloadHeadLen is the (ledger id, entry id) every payload starts with,
// so an entry read back from the wrong place names where it came from.
const payloadHeadLen = 16

// patternSpread is how many distinct bodies payloads of one size can have:
// a body starts at an offset into the pattern chosen from its ledger and
// entry id. Prime, so consecutive entries never share one.
const patternSpread = 4093

// pattern is the seeded noise every payload body is cut from. Reads check
// every byte against it without keeping a copy of what was appended, and
// noise rather than zeros keeps any layer below from shortcutting it.
// Read-only once built.
type pattern struct{ buf []byte }

func newPattern(maxSize int) *pattern {
	rng := rand.New(rand.NewPCG(0x6c656467, 0x65727066))
	buf := make([]byte, maxSize+patternSpread+8)
	for i := 0; i+8 <= len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], rng.Uint64())
	}
	return &pattern{buf: buf}
}

// body is what follows the head in entry (ledgerID, entryID) of size bytes.
func (p *pattern) body(ledgerID, entryID int64, size int) []byte {
	off := int((uint64(ledgerID)*1_000_003 + uint64(entryID)*7919) % patternSpread)
	return p.buf[off : off+size-payloadHeadLen]
}

// fill writes the payload of entry (ledgerID, entryID) into buf.
func (p *pattern) fill(buf []byte, ledgerID, entryID int64) {
	binary.BigEndian.PutUint64(buf[0:], uint64(ledgerID))
	binary.BigEndian.PutUint64(buf[8:], uint64(entryID))
	copy(buf[payloadHeadLen:], p.body(ledgerID, entryID, len(buf)))
}

// check reports how payload differs from what was appended as entry
// (ledgerID, entryID) of size bytes.
func (p *pattern) check(payload []byte, ledgerID, entryID int64, size int) error {
	if len(payload) != size {
		return fmt.Errorf("ledger %d entry %d: read %d bytes, appended %d", ledgerID, entryID, len(payload), size)
	}
	l, e := int64(binary.BigEndian.Uint64(payload[0:])), int64(binary.BigEndian.Uint64(payload[8:]))
	if l != ledgerID || e != entryID {
		return fmt.Errorf("ledger %d entry %d: read back the payload of ledger %d entry %d", ledgerID, entryID, l, e)
	}
	if want := p.body(ledgerID, entryID, size); !bytes.Equal(payload[payloadHeadLen:], want) {
		i := 0
		for i < len(want) && payload[payloadHeadLen+i] == want[i] {
			i++
		}
		return fmt.Errorf("ledger %d entry %d: read bytes differ from those appended at offset %d", ledgerID, entryID, payloadHeadLen+i)
	}
	return nil
}
