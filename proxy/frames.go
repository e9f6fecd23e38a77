package proxy

import (
	"bufio"
	"io"

	"github.com/magnetar-io/magnetar/wire"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// readFrame reads one whole frame (at most max bytes) and parses its
// command into a new BaseCommand. Payload frames are refused by the
// callers: no command the proxy reads itself carries one.
func readFrame(br *bufio.Reader, max int) (*pb.BaseCommand, []byte, error) {
	head, err := br.Peek(4)
	if err != nil {
		return nil, nil, err
	}
	n, err := wire.FrameLen(head, max)
	if err != nil {
		return nil, nil, err
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(br, buf); err != nil {
		return nil, nil, err
	}
	cmd := &pb.BaseCommand{}
	if _, _, err := wire.ParseFrame(buf, max, cmd); err != nil {
		return nil, nil, err
	}
	return cmd, buf, nil
}

func encodeFrame(cmd *pb.BaseCommand) ([]byte, error) {
	return wire.AppendSimpleFrame(make([]byte, 0, 64), cmd)
}

func ptr[T any](v T) *T { return &v }
