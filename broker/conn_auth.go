package broker

// Authentication and authorization on the binary protocol (broker/auth
// decides; this file asks it).
//
// Behaviour:
//   - CONNECT: with authentication on, auth_method_name and auth_data (and,
//     on the TLS port, the client's verified certificate) give the
//     connection its role; a client without credentials gets
//     anonymousUserRole. Failure answers ERROR AuthenticationError (request
//     id -1, as Pulsar) and closes the connection; the log line names the
//     remote address and the reason, never the credentials.
//   - With authorization on: PRODUCER needs produce, SUBSCRIBE consume (and
//     the subscription's roles), LOOKUP and PARTITIONED_METADATA produce or
//     consume, GET_TOPICS_OF_NAMESPACE a grant in the namespace; refusals
//     answer AuthorizationError. The role is fixed at CONNECT (no auth
//     refresh is offered).

import (
	"crypto/x509"
	"errors"

	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// peerCertificates are the client's verified certificates, if the
// transport is TLS.
func (c *serverConn) peerCertificates() []*x509.Certificate {
	if t, ok := c.t.(interface{ PeerCertificates() []*x509.Certificate }); ok {
		return t.PeerCertificates()
	}
	return nil
}

// authenticate finds the role of a CONNECT; an error has been answered
// and closes the connection.
func (c *serverConn) authenticate(cmd *pb.CommandConnect) (string, error) {
	a := c.b.cfg.Authentication
	if a == nil {
		return "", nil
	}
	role, err := a.Authenticate(auth.Credentials{Method: cmd.GetAuthMethodName(), Data: cmd.GetAuthData(),
		PeerCertificates: c.peerCertificates()})
	if err != nil {
		c.log.Warn("authentication failed; connection closed", "method", auth.Clip(cmd.GetAuthMethodName()), "err", err)
		_ = c.sendError(^uint64(0), pb.ServerError_AuthenticationError, err.Error())
		return "", err
	}
	c.log.Debug("client authenticated", "role", role, "method", auth.Clip(cmd.GetAuthMethodName()))
	return role, nil
}

// connRole is the connection's role (set at CONNECT).
func (c *serverConn) connRole() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.role
}

// authorizeTopic decides op on name for this connection's role: ok, or
// the error code and message to answer.
func (c *serverConn) authorizeTopic(op auth.Op, name TopicName, subscription string) (pb.ServerError, error) {
	z := c.b.cfg.Authorization
	if z == nil {
		return 0, nil
	}
	err := z.AllowTopic(c.ctx, c.connRole(), op, authTopic(name), subscription)
	return authErrorCode(err), err
}

func authErrorCode(err error) pb.ServerError {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, auth.ErrForbidden):
		return pb.ServerError_AuthorizationError
	case errors.Is(err, auth.ErrUnauthenticated):
		return pb.ServerError_AuthenticationError
	}
	return pb.ServerError_MetadataError
}

// authTopic is name as authorization sees it: a partition counts as its
// partitioned topic.
func authTopic(name TopicName) auth.Topic {
	if base, _, ok := partitionOf(name); ok {
		name = base
	}
	return auth.Topic{Tenant: name.Tenant, Namespace: name.Namespace, Name: name.String()}
}
