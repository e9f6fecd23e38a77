package broker

// Session commands: CONNECT, LOOKUP, PARTITIONED_METADATA (PING/PONG are
// answered inline in dispatch).
//
// Behaviour:
//   - CONNECT must be the first frame; CONNECTED carries our version, the
//     negotiated protocol version (the lower of the client's and ours) and
//     maxMessageSize, which the client uses to size its batches.
//   - LOOKUP answers Connect to this broker when it serves every topic;
//     in cluster mode (cluster.go) Connect to the bundle's owner, or
//     Redirect to the leader or (authoritative) to the broker the leader
//     chose; failures are ServiceNotReady, which clients retry.
//   - PARTITIONED_METADATA answers the partition count from the
//     configuration store (0: not partitioned; see partitioned.go).

import (
	"fmt"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/broker/auth"

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
	c.mu.Unlock()
	subject, expires, err := c.authenticate(cmd)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.authn = connAuth{subject: subject, method: cmd.GetAuthMethodName(), expires: expires,
		canRefresh: cmd.GetFeatureFlags().GetSupportsAuthRefresh()}
	c.clientVersion = cmd.GetClientVersion()
	c.mu.Unlock()
	version := min(cmd.GetProtocolVersion(), maxProtocolVersion)
	c.log.Debug("client connected", "client", cmd.GetClientVersion(), "protocol", version)
	c.protocol.Store(version)
	c.endOfTopic.Store(handlesEndOfTopic(cmd.GetClientVersion(), version))
	c.brokerEntryMetadata.Store(c.b.cfg.ExposeBrokerEntryMetadata && version >= protoBrokerEntryMetadata &&
		cmd.GetFeatureFlags().GetSupportsBrokerEntryMetadata())
	err = c.send(&pb.BaseCommand{Type: pb.BaseCommand_CONNECTED.Enum(), Connected: &pb.CommandConnected{
		ServerVersion:   ptr(c.b.cfg.Version),
		ProtocolVersion: ptr(version),
		MaxMessageSize:  ptr(int32(c.b.cfg.MaxMessageSize)),
		// Broker entry metadata is understood (entrymetadata.go),
		// topic-list watchers are served (topicwatch.go) and expired
		// credentials are refreshed (conn_auth.go).
		FeatureFlags: &pb.FeatureFlags{SupportsBrokerEntryMetadata: ptr(true), SupportsTopicWatchers: ptr(true),
			SupportsAuthRefresh: ptr(c.b.cfg.Authentication != nil)},
	}})
	// Connected (so pinged by the keep-alive) only once CONNECTED is
	// queued: a PING queued before it would be the client's first frame,
	// and clients fail their connect on that. The connection's later
	// commands run on this same loop, after this returns.
	c.mu.Lock()
	c.connected = true
	c.mu.Unlock()
	return err
}

// handlesEndOfTopic reports whether a client may be sent
// REACHED_END_OF_TOPIC: the command came with protocol version 9, but the
// Go client (v0.19 and before) closes its connection on it as an unknown
// command, so it is not told.
func handlesEndOfTopic(clientVersion string, protocol int32) bool {
	return protocol >= protoReachedEndOfTopic && !strings.HasPrefix(clientVersion, "Pulsar-Go-")
}

func (c *serverConn) handleLookup(cmd *pb.CommandLookupTopic) error {
	id := cmd.GetRequestId()
	name, err := ParseTopicName(cmd.GetTopic())
	if err != nil {
		return c.sendLookupFailed(id, pb.ServerError_InvalidTopicName, err)
	}
	// Bounded as Pulsar's maxConcurrentLookupRequest: past it the client
	// is told TooManyRequests and retries after a back-off.
	if !c.b.lookups.TryAcquire(1) {
		return c.sendLookupFailed(id, pb.ServerError_TooManyRequests,
			fmt.Errorf("too many lookups in progress (maxConcurrentLookupRequest %d)", c.b.cfg.MaxConcurrentLookupRequest))
	}
	c.goSafe("LOOKUP", func() { // may read and write the metadata store
		defer c.b.lookups.Release(1)
		if code, err := c.authorizeTopic(auth.OpLookup, name, ""); err != nil {
			_ = c.sendLookupFailed(id, code, err)
			return
		}
		res, err := c.b.lookup(c.ctx, name, cmd.GetAuthoritative())
		if err != nil {
			// Retriable: the client looks up again after a back-off.
			_ = c.sendLookupFailed(id, pb.ServerError_ServiceNotReady, err)
			return
		}
		resp := &pb.CommandLookupTopicResponse{RequestId: &id, BrokerServiceUrl: &res.BrokerURL,
			Response: pb.CommandLookupTopicResponse_Connect.Enum(), Authoritative: ptr(true)}
		if res.BrokerURLTLS != "" {
			resp.BrokerServiceUrlTls = &res.BrokerURLTLS
		}
		if res.Redirect {
			resp.Response = pb.CommandLookupTopicResponse_Redirect.Enum()
			resp.Authoritative = ptr(res.Authoritative)
		}
		_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: resp})
	})
	return nil
}

func (c *serverConn) sendLookupFailed(id uint64, code pb.ServerError, err error) error {
	return c.send(&pb.BaseCommand{Type: pb.BaseCommand_LOOKUP_RESPONSE.Enum(), LookupTopicResponse: &pb.CommandLookupTopicResponse{
		RequestId: &id, Response: pb.CommandLookupTopicResponse_Failed.Enum(),
		Error: code.Enum(), Message: ptr(err.Error())}})
}

func (c *serverConn) handlePartitionedMetadata(cmd *pb.CommandPartitionedTopicMetadata) error {
	id := cmd.GetRequestId()
	name, err := ParseTopicName(cmd.GetTopic())
	if err != nil {
		return c.sendPartitions(id, 0, pb.ServerError_InvalidTopicName, err)
	}
	if !c.b.lookups.TryAcquire(1) { // shares LOOKUP's bound, as on Pulsar
		return c.sendPartitions(id, 0, pb.ServerError_TooManyRequests,
			fmt.Errorf("too many lookups in progress (maxConcurrentLookupRequest %d)", c.b.cfg.MaxConcurrentLookupRequest))
	}
	c.goSafe("PARTITIONED_METADATA", func() { // reads the configuration store
		defer c.b.lookups.Release(1)
		ctx := c.ctx
		if code, err := c.authorizeTopic(auth.OpLookup, name, ""); err != nil {
			_ = c.sendPartitions(id, 0, code, err)
			return
		}
		n, err := c.b.partitions(ctx, name)
		if err == nil && n == 0 {
			n, err = c.b.autoCreatePartitioned(ctx, name)
		}
		_ = c.sendPartitions(id, n, pb.ServerError_MetadataError, err)
	})
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

// clientInfo is what stats show about a producer's or consumer's client,
// fixed when it is created.
type clientInfo struct {
	version   string
	metadata  map[string]string
	connected time.Time
}

// clientInfo describes a producer or consumer created now on c with the
// metadata its client gave.
func (c *serverConn) clientInfo(metadata []*pb.KeyValue) clientInfo {
	c.mu.Lock()
	version := c.clientVersion
	c.mu.Unlock()
	info := clientInfo{version: version, connected: time.Now()}
	if len(metadata) > 0 {
		info.metadata = make(map[string]string, len(metadata))
		for _, kv := range metadata {
			info.metadata[kv.GetKey()] = kv.GetValue()
		}
	}
	return info
}

// connectedSince is Pulsar's stats timestamp (ISO 8601, milliseconds).
func (i clientInfo) connectedSince() string {
	return i.connected.UTC().Format("2006-01-02T15:04:05.000Z")
}
