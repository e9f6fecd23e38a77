package netio

import (
	"encoding/binary"
	"fmt"
)

// frameLen checks a 4-byte size prefix against maxSize and returns the
// length of the whole frame, prefix included.
func frameLen(prefix []byte, maxSize int) (int, error) {
	size := binary.BigEndian.Uint32(prefix)
	if size == 0 {
		return 0, ErrEmptyFrame
	}
	if uint64(size) > uint64(maxSize) {
		return 0, fmt.Errorf("%w: size %d bytes exceeds the limit of %d", ErrFrameTooLarge, size, maxSize)
	}
	return frameHeaderLen + int(size), nil
}

// nextFrame is the framing rule over one contiguous buffer: the first frame
// of buf (a sub-slice, prefix included), or nil and how many bytes buf
// needs before the next step can decide (4 for the prefix, then the whole
// frame), or the error that closes the connection.
func nextFrame(buf []byte, maxSize int) (frame []byte, need int, err error) {
	if len(buf) < frameHeaderLen {
		return nil, frameHeaderLen, nil
	}
	total, err := frameLen(buf[:frameHeaderLen], maxSize)
	if err != nil {
		return nil, 0, err
	}
	if len(buf) < total {
		return nil, total, nil
	}
	return buf[:total], total, nil
}

// inbound is the part of gnet.Conn that frame extraction uses, so the same
// loop runs against a fake in tests. Peek(n) must fail when fewer than n
// bytes are buffered and return bytes valid until the next Discard.
type inbound interface {
	InboundBuffered() int
	Peek(n int) ([]byte, error)
	Discard(n int) (int, error)
}

// frameSink receives frames from drainFrames.
type frameSink interface {
	// stopped reports that no more frames may be delivered now (reading
	// paused, or a close requested).
	stopped() bool
	// frame handles one frame; the slice is valid only during the call.
	frame(frame []byte) error
}

// peekFrame returns the next whole frame in in without consuming it, or nil
// if it has not fully arrived. A partial frame is never copied: it waits in
// gnet's buffer until the rest arrives.
func peekFrame(in inbound, maxSize int) ([]byte, error) {
	buffered := in.InboundBuffered()
	if buffered < frameHeaderLen {
		return nil, nil
	}
	prefix, err := in.Peek(frameHeaderLen)
	if err != nil {
		return nil, fmt.Errorf("netio: peek frame size: %w", err)
	}
	total, err := frameLen(prefix, maxSize)
	if err != nil || buffered < total {
		return nil, err
	}
	frame, err := in.Peek(total)
	if err != nil {
		return nil, fmt.Errorf("netio: peek frame of %d bytes: %w", total, err)
	}
	return frame, nil
}

// drainFrames hands every whole frame buffered in in to sink, consuming
// each after sink.frame returns, until less than a frame is left, the sink
// stops, or an error (bad size, or the sink's) ends it. Every iteration
// consumes at least 5 bytes, so it is bounded by what is buffered.
func drainFrames(in inbound, maxSize int, sink frameSink) error {
	for !sink.stopped() {
		frame, err := peekFrame(in, maxSize)
		if err != nil || frame == nil {
			return err
		}
		err = sink.frame(frame)
		// Consumed even when the sink failed: the connection closes anyway,
		// and Discard returns gnet's copy, if Peek made one, to its pool.
		if _, derr := in.Discard(len(frame)); derr != nil && err == nil {
			err = fmt.Errorf("netio: discard frame: %w", derr)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
