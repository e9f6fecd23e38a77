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
//     answer AuthorizationError.
//   - Proxies (proxyRoles; auth.ProxyRoles): a proxy role must name the
//     client in original_principal, any other role must not; both the
//     proxy role and the client are authorized.
//   - Refresh: credentials that expire (tokens) are challenged with
//     AUTH_CHALLENGE once expired (checked every
//     authenticationRefreshCheckSeconds); the client's AUTH_RESPONSE must
//     authenticate as the same role. No answer by the next check, a
//     client that cannot refresh, or a different role closes the
//     connection. Unanswered, producers and consumers keep working until
//     then, as in Pulsar.

import (
	"crypto/x509"
	"errors"
	"fmt"
	"time"

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

// authenticate finds who a CONNECT acts as (with a proxy role, the
// client it speaks for too) and when its credentials expire; an error has
// been answered and closes the connection.
func (c *serverConn) authenticate(cmd *pb.CommandConnect) (auth.Subject, time.Time, error) {
	a := c.b.cfg.Authentication
	if a == nil {
		return auth.Subject{}, time.Time{}, nil
	}
	role, expires, err := a.AuthenticateUntil(auth.Credentials{Method: cmd.GetAuthMethodName(), Data: cmd.GetAuthData(),
		PeerCertificates: c.peerCertificates()})
	var subject auth.Subject
	if err == nil {
		subject, err = c.b.cfg.ProxyRoles.Subject(role, cmd.GetOriginalPrincipal())
	}
	if err != nil {
		c.log.Warn("authentication failed; connection closed", "method", auth.Clip(cmd.GetAuthMethodName()), "err", err)
		_ = c.sendError(^uint64(0), pb.ServerError_AuthenticationError, err.Error())
		return auth.Subject{}, time.Time{}, err
	}
	c.log.Debug("client authenticated", "subject", subject.String(), "method", auth.Clip(cmd.GetAuthMethodName()))
	return subject, expires, nil
}

// connSubject is who the connection acts as (set at CONNECT).
func (c *serverConn) connSubject() auth.Subject {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.authn.subject
}

// authorizeTopic decides op on name for this connection's subject: ok,
// or the error code and message to answer.
func (c *serverConn) authorizeTopic(op auth.Op, name TopicName, subscription string) (pb.ServerError, error) {
	z := c.b.cfg.Authorization
	if z == nil {
		return 0, nil
	}
	err := z.AllowTopicAs(c.ctx, c.connSubject(), op, authTopic(name), subscription)
	return authErrorCode(err), err
}

// connAuth is the connection's authentication state (guarded by
// serverConn.mu).
type connAuth struct {
	subject auth.Subject
	method  string
	// expires is when the credentials lapse (zero: never); refreshing is
	// set while an AUTH_CHALLENGE awaits its AUTH_RESPONSE.
	expires    time.Time
	refreshing bool
	// canRefresh: the client's CONNECT said it answers AUTH_CHALLENGE.
	canRefresh bool
}

// checkAuthExpiry runs every authenticationRefreshCheckSeconds: expired
// credentials are challenged (AUTH_CHALLENGE), and a connection whose
// client cannot refresh, or did not answer the last challenge, is closed.
// A proxied connection is not challenged: the challenge would reach the
// client, whose answer cannot renew the proxy's credentials; it is
// closed instead and the client reconnects through the proxy.
func (c *serverConn) checkAuthExpiry(now time.Time) {
	c.mu.Lock()
	st := c.authn
	expired := !st.expires.IsZero() && !now.Before(st.expires)
	var reason string
	switch {
	case !expired:
	case st.refreshing:
		reason = "the credentials expired and the client did not answer the authentication challenge"
	case !st.canRefresh:
		reason = "the credentials expired and the client does not support authentication refresh"
	case st.subject.Original != "":
		reason = "the proxy's credentials expired"
	default:
		c.authn.refreshing = true
	}
	c.mu.Unlock()
	if !expired {
		return
	}
	if reason != "" {
		c.log.Info("connection closed: "+reason, "subject", st.subject.String())
		c.t.Close(errors.New(reason))
		return
	}
	_ = c.send(&pb.BaseCommand{Type: pb.BaseCommand_AUTH_CHALLENGE.Enum(), AuthChallenge: &pb.CommandAuthChallenge{
		ServerVersion: ptr(c.b.cfg.Version), ProtocolVersion: ptr(c.protocol.Load()),
		Challenge: &pb.AuthData{AuthMethodName: ptr(st.method), AuthData: []byte("refresh")}}})
}

// handleAuthResponse checks the credentials a client sent for a
// challenge: the same role, valid, renew the connection's; anything else
// closes it. An answer nobody asked for is refused.
func (c *serverConn) handleAuthResponse(cmd *pb.CommandAuthResponse) error {
	c.mu.Lock()
	st := c.authn
	c.mu.Unlock()
	a := c.b.cfg.Authentication
	if a == nil || !st.refreshing {
		return c.sendError(0, pb.ServerError_NotAllowedError, "AUTH_RESPONSE without an authentication challenge")
	}
	resp := cmd.GetResponse()
	role, expires, err := a.AuthenticateUntil(auth.Credentials{Method: resp.GetAuthMethodName(), Data: resp.GetAuthData(),
		PeerCertificates: c.peerCertificates()})
	if err == nil && role != st.subject.Role {
		err = fmt.Errorf("%w: refreshed credentials name role %s, the connection's is %s", auth.ErrUnauthenticated, auth.Clip(role), st.subject.Role)
	}
	if err == nil && !expires.IsZero() && !time.Now().Before(expires) {
		err = fmt.Errorf("%w: refreshed credentials have expired too", auth.ErrUnauthenticated)
	}
	if err != nil {
		c.log.Warn("authentication refresh failed; connection closed", "subject", st.subject.String(), "err", err)
		_ = c.sendError(0, pb.ServerError_AuthenticationError, err.Error())
		return err
	}
	c.mu.Lock()
	c.authn.expires, c.authn.refreshing, c.authn.method = expires, false, resp.GetAuthMethodName()
	c.mu.Unlock()
	c.log.Debug("credentials refreshed", "subject", st.subject.String(), "expires", expires)
	return nil
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
