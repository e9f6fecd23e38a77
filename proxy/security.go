package proxy

// Security: authenticating clients, authorizing their lookups, and the
// proxy's own connections to brokers (its credentials, TLS).
//
// Behaviour:
//   - With authentication on, CONNECT's credentials (and on the TLS port
//     the client's certificate) give the client's role, the principal the
//     proxy names to brokers as original_principal; bad credentials answer
//     ERROR AuthenticationError and close, logged with the client's
//     address, never the credentials. An unauthenticated client never
//     makes the proxy dial a broker.
//   - Credentials that expire (tokens) end the client's connection when
//     they expire: the proxy cannot renew a spliced connection, so the
//     client reconnects with fresh ones (the Go and Java clients do so on
//     their own).
//   - The proxy presents BrokerClient to brokers on every connection it
//     opens (direct and pooled); with forwardAuthorizationCredentials the
//     client's own credentials go along as original_auth_method/data.
//     Pooled lookup connections are per principal, so a broker authorizes
//     each lookup as the client it is for.
//   - With BrokerTLS, brokers are dialled on their TLS ports (whichever
//     port the client named), the certificate checked against the host
//     name the broker registered.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/magnetar-io/magnetar/broker/auth"
	"github.com/magnetar-io/magnetar/wire/pb"
)

// peerCertificates are the client's verified certificates on the TLS port.
func peerCertificates(c net.Conn) []*x509.Certificate {
	if tc, ok := c.(*tls.Conn); ok {
		return tc.ConnectionState().PeerCertificates
	}
	return nil
}

// authenticate sets the client's principal from its CONNECT; a failure
// has been answered.
func (c *clientConn) authenticate(connect *pb.CommandConnect) error {
	a := c.p.cfg.Authentication
	if a == nil {
		return nil
	}
	role, expires, err := a.AuthenticateUntil(auth.Credentials{Method: connect.GetAuthMethodName(), Data: connect.GetAuthData(),
		PeerCertificates: peerCertificates(c.conn)})
	if err != nil {
		c.p.m.authFailures.Inc()
		c.p.cfg.Logger.Warn("proxy: client authentication failed; connection closed", "client", c.conn.RemoteAddr().String(),
			"method", auth.Clip(connect.GetAuthMethodName()), "err", err)
		_ = c.sendError(^uint64(0), pb.ServerError_AuthenticationError, err.Error())
		return err
	}
	c.principal = role
	if !expires.IsZero() {
		// Ends the connection (either mode) when the credentials lapse.
		c.expiry = time.AfterFunc(time.Until(expires), func() {
			c.p.cfg.Logger.Info("proxy: client credentials expired; connection closed", "client", c.conn.RemoteAddr().String(), "role", role)
			c.conn.Close()
		})
	}
	return nil
}

// authorize checks a lookup-type request at the proxy (authorizationEnabled).
func (c *clientConn) authorize(ctx context.Context, cmd *pb.BaseCommand) (pb.ServerError, error) {
	z := c.p.cfg.Authorization
	if z == nil {
		return 0, nil
	}
	var err error
	switch cmd.GetType() {
	case pb.BaseCommand_GET_TOPICS_OF_NAMESPACE:
		tenant, ns, ok := strings.Cut(cmd.GetGetTopicsOfNamespace().GetNamespace(), "/")
		if !ok {
			return pb.ServerError_InvalidTopicName, fmt.Errorf("namespace %q is not tenant/namespace", auth.Clip(cmd.GetGetTopicsOfNamespace().GetNamespace()))
		}
		err = z.AllowNamespaceTopics(ctx, c.principal, tenant, ns)
	default:
		var t auth.Topic
		if t, err = authTopic(requestTopic(cmd)); err != nil {
			return pb.ServerError_InvalidTopicName, err
		}
		err = z.AllowTopic(ctx, c.principal, auth.OpLookup, t, "")
	}
	switch {
	case err == nil:
		return 0, nil
	case errors.Is(err, auth.ErrForbidden):
		return pb.ServerError_AuthorizationError, err
	}
	return pb.ServerError_ServiceNotReady, err
}

func requestTopic(cmd *pb.BaseCommand) string {
	switch cmd.GetType() {
	case pb.BaseCommand_LOOKUP:
		return cmd.GetLookupTopic().GetTopic()
	case pb.BaseCommand_PARTITIONED_METADATA:
		return cmd.GetPartitionMetadata().GetTopic()
	case pb.BaseCommand_GET_SCHEMA:
		return cmd.GetGetSchema().GetTopic()
	}
	return ""
}

// authTopic reads a topic name as the clients write it (persistent://t/ns/x,
// t/ns/x, or x in public/default; v1 names, four parts or more, as
// property/cluster/ns/x with namespace "cluster/ns", as the broker reads
// them); a partition counts as its topic.
func authTopic(name string) (auth.Topic, error) {
	domain, rest, ok := strings.Cut(name, "://")
	if !ok {
		domain, rest = "persistent", name
		if !strings.Contains(name, "/") {
			rest = "public/default/" + name
		}
	}
	parts := strings.SplitN(rest, "/", 4)
	if len(parts) == 4 {
		parts = []string{parts[0], parts[1] + "/" + parts[2], parts[3]}
		if strings.HasPrefix(parts[1], "/") || strings.HasSuffix(parts[1], "/") {
			parts[1] = ""
		}
	}
	if (domain != "persistent" && domain != "non-persistent") || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return auth.Topic{}, fmt.Errorf("topic %q is not domain://tenant/namespace/topic", auth.Clip(name))
	}
	local := parts[2]
	if i := strings.LastIndex(local, "-partition-"); i > 0 {
		local = local[:i]
	}
	return auth.Topic{Tenant: parts[0], Namespace: parts[1], Name: domain + "://" + parts[0] + "/" + parts[1] + "/" + local}, nil
}

// brokerConnect fills the proxy's own credentials into a CONNECT it sends
// for principal (with the client's credentials as original_auth_* when
// forwardAuthorizationCredentials is on).
func (p *Proxy) brokerConnect(cmd *pb.CommandConnect, principal string, client clientAuth) error {
	cmd.AuthMethodName, cmd.AuthData, cmd.AuthMethod = nil, nil, nil
	if m := p.cfg.BrokerClient.Method(); m != "" {
		data, err := p.cfg.BrokerClient.AuthData()
		if err != nil {
			return fmt.Errorf("proxy credentials: %w", err)
		}
		cmd.AuthMethodName, cmd.AuthData = ptr(m), data
	}
	cmd.OriginalPrincipal = nil
	if principal != "" {
		cmd.OriginalPrincipal = ptr(principal)
	}
	cmd.OriginalAuthMethod, cmd.OriginalAuthData = nil, nil
	if p.cfg.ForwardAuthorizationCredentials && client.method != "" {
		cmd.OriginalAuthMethod, cmd.OriginalAuthData = ptr(client.method), ptr(string(client.data))
	}
	return nil
}

// dialBroker connects to the broker at hostport (any of its registered
// addresses): its TLS port with BrokerTLS, else its plaintext one, after
// the target checks (brokers.go).
func (p *Proxy) dialBroker(ctx context.Context, hostport string) (net.Conn, error) {
	useTLS := p.cfg.BrokerTLS != nil
	if b, ok := p.reg.find(ctx, hostport, false); ok {
		if hostport = b.binary(useTLS); hostport == "" {
			return nil, fmt.Errorf("proxy: broker %s serves no TLS port (tlsEnabledWithBroker is on)", b.service)
		}
	}
	addr, err := p.reg.checkTarget(ctx, hostport, false)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil || !useTLS {
		return conn, err
	}
	cfg := p.cfg.BrokerTLS.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName, _, _ = net.SplitHostPort(hostport)
	}
	tc := tls.Client(conn, cfg)
	if err := tc.HandshakeContext(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("proxy: TLS to broker %s: %w", hostport, err)
	}
	return tc, nil
}
