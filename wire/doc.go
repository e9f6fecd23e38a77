// Package wire is the Pulsar binary protocol as the broker sees it: the frame
// codec here, the protobuf definitions in wire/proto and their generated Go
// code in wire/pb.
//
// # Frames
//
// All integers are big-endian uint32 unless marked otherwise. A simple frame
// carries one command:
//
//	+-----------+-------------+----------------------+
//	| totalSize | commandSize | BaseCommand          |
//	+-----------+-------------+----------------------+
//	  4 bytes     4 bytes       commandSize bytes
//	totalSize = 4 + commandSize
//
// A payload frame (SEND from producers, MESSAGE to consumers) continues after
// the command with an optional broker entry metadata section and the entry:
//
//	... BaseCommand | 0x0e02 | bemSize | BrokerEntryMetadata |     (optional)
//	                  2 bytes  4 bytes   bemSize bytes
//
//	| 0x0e01 | CRC32C | metadataSize | MessageMetadata | payload |
//	  2 bytes  4 bytes  4 bytes        metadataSize      the rest
//	         \_______________ entry: stored verbatim __________________/
//	                  \__________ covered by the CRC32C ____________/
//
// A frame is a payload frame exactly when totalSize > 4 + commandSize. The
// CRC32C (Castagnoli) covers metadataSize, MessageMetadata and payload.
//
// # What the broker keeps
//
// The entry, from the 0x0e01 magic to the end of the frame, is the unit of
// storage: the broker stores the producer's bytes unchanged and sends them
// back unchanged in MESSAGE frames, because clients insist on the 0x0e01 magic
// and a valid CRC. ParseFrame therefore returns the entry as a sub-slice of
// the read buffer, without copying, and AppendPayloadFrameHeader writes only
// the bytes that go in front of a stored entry so that header and entry can be
// written with one vectored write.
//
// # Limits and trust
//
// ParseFrame checks every size against the bytes present before using it, so
// no input makes it read outside the buffer. It decodes the BaseCommand
// (required fields enforced, as the clients do) and the entry's framing; it
// verifies the CRC and decodes MessageMetadata only when asked (Entry methods),
// because a broker that only stores and forwards need not pay for them.
//
// The constants below are part of the protocol and must never change.
package wire
