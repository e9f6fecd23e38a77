package broker

// Session commands: CONNECT, LOOKUP, PARTITIONED_METADATA (PING/PONG are
// answered inline in dispatch).
//
// Behaviour:
//   - CONNECT must be the first frame; CONNECTED carries our version, the
//     negotiated protocol version (the lower of the client's and ours) and
//     maxMessageSize, which the client uses to size its batches.
//   - LOOKUP always answers Connect to this broker (one broker serves every
//     topic until ownership lands with the load-balancing issue), with
//     authoritative set so the client does not redirect.
//   - PARTITIONED_METADATA answers the partition count from the
//     configuration store (0: not partitioned; see partitioned.go).

import (
	"context"
	"fmt"

	"github.com/magnetar-io/magnetar/wire/pb"
)

// maxProtocolVersion is the newest protocol version we speak (v21 adds
// nothing we need beyond v20's commands).
const maxProtocolVersion = 21

func (c *serverConn) handleConnect(cmd *pb.CommandConnect) error {
	c.mu.Lock()
	if c.connected {
		c.mu.Unlock()
		return fmt.Errorf("second CONNECT on one connection")
	}
	c.connected = true
	c.mu.Unlock()
	version := min(cmd.GetProtocolVersion(), maxProtocolVersion)
	c.log.Debug("client connected", "client", cmd.GetClientVersion(), "protocol", version)
	return c.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECTED.Enum(), Connected: &pb.CommandConnected{
		ServerVersion:   ptr(c.b.cfg.Version),
		ProtocolVersion: ptr(version),
		MaxMessageSize:  ptr(int32(c.b.cfg.MaxMessageSize)),
		FeatureFlags:    &pb.FeatureFlags{},
	}})
}

func (c *serverConn) handleLookup(cmd *pb.CommandLookupTopic) error {
	id := cmd.GetRequestId()
	if _, err := ParseTopicName(cmd.GetTopic()); err != nil {
		return c.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: &pb.CommandLookupTopicResponse{
			RequestId: &id, Response: pb.CommandLookupTopicResponse_Failed.Enum(),
			Error: pb.ServerError_InvalidTopicName.Enum(), Message: ptr(err.Error())}})
	}
	url := "pulsar://" + c.b.advertisedAddress()
	return c.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: &pb.CommandLookupTopicResponse{
		RequestId: &id, Response: pb.CommandLookupTopicResponse_Connect.Enum(), BrokerServiceUrl: &url,
		Authoritative: ptr(true)}})
}

func (c *serverConn) handlePartitionedMetadata(cmd *pb.CommandPartitionedTopicMetadata) error {
	id := cmd.GetRequestId()
	name, err := ParseTopicName(cmd.GetTopic())
	if err != nil {
		return c.sendPartitions(id, 0, pb.ServerError_InvalidTopicName, err)
	}
	go func() { // reads the configuration store
		n, err := c.b.partitions(context.Background(), name)
		_ = c.sendPartitions(id, n, pb.ServerError_MetadataError, err)
	}()
	return nil
}

func (c *serverConn) sendPartitions(id uint64, n int, code pb.ServerError, err error) error {
	resp := &pb.CommandPartitionedTopicMetadataResponse{RequestId: &id}
	if err != nil {
		resp.Response = pb.CommandPartitionedTopicMetadataResponse_Failed.Enum()
		resp.Error, resp.Message = code.Enum(), ptr(err.Error())
	} else {
		resp.Response = pb.CommandPartitionedTopicMetadataResponse_Success.Enum()
		resp.Partitions = ptr(uint32(n))
	}
	return c.send(&pb.BaseCommand{Type: pb.BaseCommand_PARTITIONED_METADATA_RESPONSE.Enum(), PartitionMetadataResponse: resp})
}
