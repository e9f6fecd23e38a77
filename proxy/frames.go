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

// requestID is the request id of the lookup-type commands and their
// responses; ok false for any other command.
func requestID(cmd *pb.BaseCommand) (uint64, bool) {
	switch cmd.GetType() {
	case pb.BaseCommand_LOOKUP:
		return cmd.GetLookupTopic().GetRequestId(), true
	case pb.BaseCommand_PARTITIONED_METADATA:
		return cmd.GetPartitionMetadata().GetRequestId(), true
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		return cmd.GetGetTopicsOfNamespace().GetRequestId(), true
	case pb.BaseCommand_GET_SCHEMA:
		return cmd.GetGetSchema().GetRequestId(), true
	case pb.BaseCommand_LOOKUP_RESPONSE:
		return cmd.GetLookupTopicResponse().GetRequestId(), true
	case pb.BaseCommand_PARTITIONED_METADATA_RESPONSE:
		return cmd.GetPartitionMetadataResponse().GetRequestId(), true
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE:
		return cmd.GetGetTopicsOfNamespaceResponse().GetRequestId(), true
	case pb.BaseCommand_GET_SCHEMA_RESPONSE:
		return cmd.GetGetSchemaResponse().GetRequestId(), true
	case pb.BaseCommand_ERROR:
		return cmd.GetError().GetRequestId(), true
	}
	return 0, false
}

// setRequestID sets the request id of the commands requestID knows.
func setRequestID(cmd *pb.BaseCommand, id uint64) {
	switch cmd.GetType() {
	case pb.BaseCommand_LOOKUP:
		cmd.LookupTopic.RequestId = &id
	case pb.BaseCommand_PARTITIONED_METADATA:
		cmd.PartitionMetadata.RequestId = &id
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		cmd.GetTopicsOfNamespace.RequestId = &id
	case pb.BaseCommand_GET_SCHEMA:
		cmd.GetSchema.RequestId = &id
	case pb.BaseCommand_LOOKUP_RESPONSE:
		cmd.LookupTopicResponse.RequestId = &id
	case pb.BaseCommand_PARTITIONED_METADATA_RESPONSE:
		cmd.PartitionMetadataResponse.RequestId = &id
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE_RESPONSE:
		cmd.GetTopicsOfNamespaceResponse.RequestId = &id
	case pb.BaseCommand_GET_SCHEMA_RESPONSE:
		cmd.GetSchemaResponse.RequestId = &id
	case pb.BaseCommand_ERROR:
		cmd.Error.RequestId = &id
	}
}
