package crc32c

import (
	"hash/crc32"
	"math/rand/v2"
	"testing"
)

// TestCombineMatchesHashingTheConcatenation: for random splits of random
// bytes (seeded, so a failure repeats), Combine of the parts' CRCs is the
// CRC of the whole.
func TestCombineMatchesHashingTheConcatenation(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 1))
	buf := make([]byte, 300_000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for i := 0; i < 2000; i++ {
		n := rng.IntN(len(buf))
		if i < 40 {
			n = i // every tiny length
		}
		split := 0
		if n > 0 {
			split = rng.IntN(n + 1)
		}
		a, b := buf[:split], buf[split:n]
		want := crc32.Checksum(buf[:n], crc32.MakeTable(crc32.Castagnoli))
		if got := Combine(Checksum(a), Checksum(b), len(b)); got != want {
			t.Fatalf("len %d split %d: Combine = %08x, CRC of the whole = %08x", n, split, got, want)
		}
	}
}

// TestCombineAgreesWithUpdate: Combine(crc(A), crc(B), len B) is what
// Update(crc(A), B) computes, for the prefixes the formats use (a 24- or
// 32-byte header in front of a payload).
func TestCombineAgreesWithUpdate(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 2))
	for _, headLen := range []int{2, 6, 16, 24, 32, 36} {
		for _, payloadLen := range []int{0, 1, 7, 1024, 4095, 4096, 65536, 1 << 20} {
			head, payload := make([]byte, headLen), make([]byte, payloadLen)
			for i := range head {
				head[i] = byte(rng.Uint32())
			}
			for i := range payload {
				payload[i] = byte(rng.Uint32())
			}
			want := Update(Checksum(head), payload)
			if got := Combine(Checksum(head), Checksum(payload), payloadLen); got != want {
				t.Fatalf("head %d payload %d: %08x, want %08x", headLen, payloadLen, got, want)
			}
		}
	}
}

// TestCombineIsAssociative: (A‖B)‖C and A‖(B‖C) give one CRC.
func TestCombineIsAssociative(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 3))
	for i := 0; i < 500; i++ {
		a, b, c := rng.Uint32(), rng.Uint32(), rng.Uint32()
		lb, lc := rng.IntN(1<<20), rng.IntN(1<<20)
		left := Combine(Combine(a, b, lb), c, lc)
		right := Combine(a, Combine(b, c, lc), lb+lc)
		if left != right {
			t.Fatalf("lengths %d, %d: %08x != %08x", lb, lc, left, right)
		}
	}
}

var sink uint32

func BenchmarkCombine(b *testing.B) {
	for _, n := range []int{1024, 4096, 80 << 10} {
		b.Run(itoa(n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				sink = Combine(sink, 0x1234, n+i&7)
			}
		})
	}
}

func BenchmarkChecksum(b *testing.B) {
	for _, n := range []int{1024, 4096, 80 << 10} {
		buf := make([]byte, n)
		b.Run(itoa(n), func(b *testing.B) {
			b.SetBytes(int64(n))
			for i := 0; i < b.N; i++ {
				sink = Checksum(buf)
			}
		})
	}
}

func itoa(n int) string {
	if n >= 1024 {
		return itoa(n/1024) + "KiB"
	}
	s := ""
	for ; n > 0 || s == ""; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// After gives the CRC of a‖B only where a format after it combines (B of
// CombineWorthFrom and more, its CRC known), and reads nothing otherwise.
func TestAfter(t *testing.T) {
	a, b := []byte("head"), make([]byte, CombineWorthFrom)
	for i := range b {
		b[i] = byte(i * 7)
	}
	whole := Checksum(append(append([]byte{}, a...), b...))
	if got := Of(Checksum(b)).After(a, len(b)); !got.OK || got.CRC != whole {
		t.Fatalf("After = %+v, want %08x", got, whole)
	}
	if got := Of(Checksum(b[:100])).After(a, 100); got.OK {
		t.Fatalf("a 100-byte part: After = %+v, want unknown", got)
	}
	if got := (Known{}).After(a, len(b)); got.OK {
		t.Fatalf("an unknown CRC: After = %+v, want unknown", got)
	}
	if !Of(whole).Matches(append(append([]byte{}, a...), b...)) || Of(whole+1).Matches(b) || !(Known{}).Matches(b) {
		t.Fatal("Matches is wrong")
	}
}

// TestUncombineRecoversTheSecondPart: for random splits of random bytes
// (seeded), Uncombine of the whole's and the first part's CRCs is the CRC
// of the second part.
func TestUncombineRecoversTheSecondPart(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 2))
	buf := make([]byte, 200_000)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	for i := 0; i < 1000; i++ {
		n := rng.IntN(len(buf))
		if i < 40 {
			n = i
		}
		split := 0
		if n > 0 {
			split = rng.IntN(n + 1)
		}
		a, b := buf[:split], buf[split:n]
		if got, want := Uncombine(Checksum(buf[:n]), Checksum(a), len(b)), Checksum(b); got != want {
			t.Fatalf("len %d split %d: Uncombine = %08x, CRC of the second part = %08x", n, split, got, want)
		}
	}
}
