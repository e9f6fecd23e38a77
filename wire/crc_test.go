package wire_test

import "testing"

// crc32c is a bit-at-a-time CRC-32C (Castagnoli, reflected polynomial
// 0x82f63b78), written independently of hash/crc32 so that the tests do not
// check the package's checksum against itself.
func crc32c(b []byte) uint32 {
	crc := ^uint32(0)
	for _, c := range b {
		crc ^= uint32(c)
		for range 8 {
			if crc&1 != 0 {
				crc = crc>>1 ^ 0x82f63b78
			} else {
				crc >>= 1
			}
		}
	}
	return ^crc
}

func TestCRC32CVector(t *testing.T) {
	if got := crc32c([]byte("123456789")); got != 0xe3069283 {
		t.Fatalf("crc32c(123456789) = %#x, want 0xe3069283", got)
	}
}
