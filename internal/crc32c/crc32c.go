// Package crc32c is CRC32C (Castagnoli), the checksum of the Pulsar frame,
// BookKeeper's CRC32C digest, the journal and the entry logs, with what
// lets one pass over an entry's bytes serve all four: Combine, which gives
// the CRC of a concatenation from the CRCs of its parts.
//
// A CRC is linear over GF(2): crc(A‖B) is crc(A) carried through len(B)
// zero bytes, xor crc(B) (the initial and final inversions cancel, as in
// zlib's crc32_combine). Carrying through n zero bytes is a multiplication
// by x^(8n) mod P; the powers x^(2^k) mod P are tabulated, so Combine costs
// one multiplication per set bit of n, about as much as hashing a few
// hundred bytes with the CPU's CRC instruction: worth it for large parts,
// not for small ones (see Combine).
package crc32c

import "hash/crc32"

// Table is the CRC32C table of hash/crc32 (hardware-accelerated where the
// CPU has the instruction).
var Table = crc32.MakeTable(crc32.Castagnoli)

// poly is the Castagnoli polynomial, bit-reversed as hash/crc32 uses it.
const poly = 0x82f63b78

// powers[k] is x^(2^k) mod P.
var powers = makePowers()

func makePowers() (t [64]uint32) {
	p := uint32(1) << 30 // x^1: bit 31 is x^0 in the reversed order
	for k := range t {
		t[k] = p
		p = multModP(p, p)
	}
	return t
}

// Checksum returns the CRC32C of b.
func Checksum(b []byte) uint32 { return crc32.Checksum(b, Table) }

// Update returns the CRC32C of the bytes summed in crc followed by b.
func Update(crc uint32, b []byte) uint32 { return crc32.Update(crc, Table, b) }

// multModP returns a·b mod P, both in the reversed representation.
func multModP(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; a != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
			a ^= m
		}
		if b&1 != 0 {
			b = b>>1 ^ poly
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow8n returns x^(8n) mod P.
func xPow8n(n uint64) uint32 {
	p := uint32(1) << 31 // x^0
	for k := 3; n != 0; n, k = n>>1, k+1 {
		if n&1 != 0 {
			p = multModP(powers[k&63], p)
		}
	}
	return p
}

// Combine returns the CRC32C of A‖B given crcA = CRC32C(A), crcB =
// CRC32C(B) and lenB = len(B). It costs about what hashing
// CombineWorthFrom bytes does; below that, hash the bytes.
func Combine(crcA, crcB uint32, lenB int) uint32 {
	if lenB <= 0 {
		return crcA
	}
	return multModP(xPow8n(uint64(lenB)), crcA) ^ crcB
}

// Uncombine returns CRC32C(B) given crcAB = CRC32C(A‖B), crcA =
// CRC32C(A) and lenB = len(B): Combine solved for crcB, so a format that
// replaces A (a re-encoded header) keeps B's checksum without reading B.
func Uncombine(crcAB, crcA uint32, lenB int) uint32 {
	if lenB <= 0 {
		return 0
	}
	return multModP(xPow8n(uint64(lenB)), crcA) ^ crcAB
}

// CombineWorthFrom is the part size from which Combine is cheaper than
// hashing the part again: BenchmarkCombine takes about 300 ns whatever the
// length, BenchmarkChecksum 67 ns for 1 KiB, 222 ns for 4 KiB and 4.1 µs
// for 80 KiB (AMD EPYC, SSE4.2, data in cache; data out of cache makes
// hashing dearer still).
const CombineWorthFrom = 4096

// Known is a CRC32C a caller may have (the zero value: it has none),
// handed down so the next format's checksum is combined from it instead of
// read off the bytes again.
type Known struct {
	CRC uint32
	OK  bool
}

// Of is crc, known.
func Of(crc uint32) Known { return Known{CRC: crc, OK: true} }

// After returns the CRC32C of a‖B, k being B's CRC32C and lenB its
// length, where a format after this one can use it: B at least
// CombineWorthFrom long. Below that, or when k is unknown, it is unknown,
// and nothing is hashed: each format hashes such small entries itself.
func (k Known) After(a []byte, lenB int) Known {
	if !k.OK || lenB < CombineWorthFrom {
		return Known{}
	}
	return Of(Combine(Checksum(a), k.CRC, lenB))
}

// Matches reports whether k, if known, is b's CRC32C (for invariant
// checks: it reads b).
func (k Known) Matches(b []byte) bool { return !k.OK || k.CRC == Checksum(b) }

// Continue returns the CRC32C of A‖B from crcA = CRC32C(A) and B, k being
// B's CRC32C if known: combined when that is cheaper (B at least
// CombineWorthFrom long), else by hashing B.
func (k Known) Continue(crcA uint32, b []byte) uint32 {
	if k.OK && len(b) >= CombineWorthFrom {
		return Combine(crcA, k.CRC, len(b))
	}
	return Update(crcA, b)
}
