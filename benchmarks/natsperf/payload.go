package main

import (
	"encoding/binary"
	"time"
)

// newPayload returns a size-byte buffer with a fixed filler after the
// stamp; the stamp is written at each send.
func newPayload(size int) []byte {
	b := make([]byte, size)
	for i := headerBytes; i < size; i++ {
		b[i] = byte('a' + i%26)
	}
	return b
}

// stamp writes the send time and whether the message counts (see the
// package doc for the layout).
func stamp(b []byte, sent time.Time, measured bool) {
	binary.LittleEndian.PutUint64(b, uint64(sent.UnixNano()))
	b[8] = 0
	if measured {
		b[8] = 1
	}
}

// readStamp is stamp's inverse; ok is false for a message too short to
// carry one (not ours).
func readStamp(b []byte) (sent time.Time, measured, ok bool) {
	if len(b) < headerBytes {
		return time.Time{}, false, false
	}
	return time.Unix(0, int64(binary.LittleEndian.Uint64(b))), b[8] == 1, true
}
