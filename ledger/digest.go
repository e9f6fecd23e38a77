package ledger

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/magnetar-io/magnetar/internal/crc32c"
	"github.com/magnetar-io/magnetar/wire/bkproto"
)

// DigestType is how entries are checksummed (BookKeeper's digest types).
type DigestType string

// Digest types.
const (
	// DigestCRC32C: a CRC32C of the entry header and payload (default).
	DigestCRC32C DigestType = "CRC32C"
	// DigestMAC: an HMAC-SHA256 keyed by the ledger password, so a reader
	// without the password cannot forge or undetectably alter entries.
	DigestMAC DigestType = "MAC"
	// DigestDummy: no digest (tests and benchmarks only).
	DigestDummy DigestType = "DUMMY"
)

// entryHeaderLen: ledger id, entry id, LAC, length (the bookie reads the
// first three, bkproto.EntryHeadLen).
const entryHeaderLen = bkproto.EntryHeadLen + 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// digester computes and checks entry digests for one ledger.
type digester struct {
	typ    DigestType
	macKey []byte
}

func newDigester(typ DigestType, password []byte) (digester, error) {
	switch typ {
	case DigestCRC32C, DigestDummy:
		return digester{typ: typ}, nil
	case DigestMAC:
		k := sha256.Sum256(append([]byte("magnetar-ledger-mac:"), password...))
		return digester{typ: typ, macKey: k[:]}, nil
	}
	return digester{}, fmt.Errorf("unknown digest type %q (want CRC32C, MAC or DUMMY)", typ)
}

func (d digester) size() int {
	switch d.typ {
	case DigestCRC32C:
		return 4
	case DigestMAC:
		return sha256.Size
	}
	return 0
}

// sum appends the digest of the header and payload to dst. ps is the
// payload's CRC32C if the caller has it: a CRC32C digest is then combined
// from it (for payloads large enough that this is cheaper) instead of
// read off the payload again.
func (d digester) sum(dst, header, payload []byte, ps crc32c.Known) []byte {
	switch d.typ {
	case DigestCRC32C:
		c := ps.Continue(crc32.Checksum(header, castagnoli), payload)
		return binary.BigEndian.AppendUint32(dst, c)
	case DigestMAC:
		m := hmac.New(sha256.New, d.macKey)
		m.Write(header)
		m.Write(payload)
		return m.Sum(dst)
	}
	return dst
}

// masterKey is what bookies check on adds and fences: derived from the
// password, so the password itself never travels to bookies.
func masterKey(password []byte) []byte {
	k := sha256.Sum256(append([]byte("magnetar-ledger-key:"), password...))
	return k[:20]
}

// encodeEntry builds an entry as sent to bookies:
//
//	0 ledgerID int64 | 8 entryID int64 | 16 lac int64 | 24 length int64 |
//	32 digest [size] | payload
//
// length is the ledger's length including this entry; the digest covers
// bytes 0..32 and the payload. All integers big-endian.
// Headroom is what AppendAsyncInPlace needs in front of a payload: the
// entry header and the largest digest.
const Headroom = entryHeaderLen + sha256.Size

// encodeInPlace encodes the entry in front of the payload buf[Headroom:]
// and returns the encoded entry, a suffix of buf: no copy of the payload.
func (d digester) encodeInPlace(ledgerID, entryID, lac, length int64, buf []byte, ps crc32c.Known) []byte {
	payload := buf[Headroom:]
	e := buf[Headroom-entryHeaderLen-d.size():]
	bkproto.PutEntryHead(e, bkproto.EntryHead{LedgerID: ledgerID, EntryID: entryID, LAC: lac})
	binary.BigEndian.PutUint64(e[bkproto.EntryHeadLen:], uint64(length))
	d.sum(e[entryHeaderLen:entryHeaderLen], e[:entryHeaderLen], payload, ps)
	return e
}

func (d digester) encodeEntry(ledgerID, entryID, lac, length int64, payload []byte) []byte {
	b := make([]byte, entryHeaderLen, entryHeaderLen+d.size()+len(payload))
	bkproto.PutEntryHead(b, bkproto.EntryHead{LedgerID: ledgerID, EntryID: entryID, LAC: lac})
	binary.BigEndian.PutUint64(b[bkproto.EntryHeadLen:], uint64(length))
	b = d.sum(b, b[:entryHeaderLen], payload, crc32c.Known{})
	return append(b, payload...)
}

// Entry is a verified entry read from a ledger.
type Entry struct {
	LedgerID int64
	EntryID  int64
	LAC      int64 // the writer's LAC when it wrote the entry
	Length   int64 // ledger length up to and including this entry
	Payload  []byte
}

// decodeEntry verifies an entry read from a bookie; any mismatch is
// ErrDigestMismatch (the replica is damaged or the data not ours).
func (d digester) decodeEntry(ledgerID, entryID int64, b []byte) (Entry, error) {
	n := entryHeaderLen + d.size()
	if len(b) < n {
		return Entry{}, fmt.Errorf("%w: ledger %d entry %d: %d bytes, shorter than its %d-byte header", ErrDigestMismatch, ledgerID, entryID, len(b), n)
	}
	h, _ := bkproto.ParseEntryHead(b)
	if h.LedgerID != ledgerID || h.EntryID != entryID {
		return Entry{}, fmt.Errorf("%w: asked for ledger %d entry %d, got ledger %d entry %d", ErrDigestMismatch, ledgerID, entryID, h.LedgerID, h.EntryID)
	}
	payload := b[n:]
	want := d.sum(nil, b[:entryHeaderLen], payload, crc32c.Known{})
	if subtle.ConstantTimeCompare(want, b[entryHeaderLen:n]) != 1 {
		return Entry{}, fmt.Errorf("%w: ledger %d entry %d", ErrDigestMismatch, ledgerID, entryID)
	}
	return Entry{LedgerID: ledgerID, EntryID: entryID, LAC: h.LAC,
		Length: int64(binary.BigEndian.Uint64(b[bkproto.EntryHeadLen:])), Payload: payload}, nil
}

// encodeLAC builds explicit-LAC data: ledger id, LAC, digest of both.
func (d digester) encodeLAC(ledgerID, lac int64) []byte {
	b := make([]byte, 16, 16+d.size())
	binary.BigEndian.PutUint64(b, uint64(ledgerID))
	binary.BigEndian.PutUint64(b[8:], uint64(lac))
	return d.sum(b, b, nil, crc32c.Known{})
}

// decodeLAC verifies explicit-LAC data.
func (d digester) decodeLAC(ledgerID int64, b []byte) (int64, error) {
	if len(b) != 16+d.size() || int64(binary.BigEndian.Uint64(b)) != ledgerID {
		return 0, fmt.Errorf("%w: explicit LAC of ledger %d", ErrDigestMismatch, ledgerID)
	}
	if subtle.ConstantTimeCompare(d.sum(nil, b[:16], nil, crc32c.Known{}), b[16:]) != 1 {
		return 0, fmt.Errorf("%w: explicit LAC of ledger %d", ErrDigestMismatch, ledgerID)
	}
	return int64(binary.BigEndian.Uint64(b[8:])), nil
}
