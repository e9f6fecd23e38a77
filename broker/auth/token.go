package auth

// Token authentication (AuthenticationProviderToken): the client sends a
// JWT; its role is the tokenAuthClaim claim (default sub).
//
// Behaviour:
//   - With tokenSecretKey the token must be signed with HMAC (HS256,
//     HS384, HS512) under that key; with tokenPublicKey with RSA (RS*, PS*)
//     or ECDSA (ES*) matching the key's type. alg "none" and any other
//     algorithm are refused, as are wrong signatures.
//   - exp is enforced (and nbf); a token without exp never expires, as in
//     Pulsar.
//   - With tokenAudienceClaim/tokenAudience set, the claim must contain
//     the audience.
//   - Keys are given as file:///path or data:;base64,...: the secret as raw
//     bytes, public keys as DER or PEM (what `pulsar tokens` and `magnetar
//     tokens` write).

import (
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// TokenConfig is the token provider's configuration.
type TokenConfig struct {
	// SecretKey is tokenSecretKey's bytes (HMAC); PublicKey is
	// tokenPublicKey's (RSA or EC). Exactly one is set.
	SecretKey []byte
	PublicKey any
	// AuthClaim is tokenAuthClaim ("sub" if empty).
	AuthClaim string
	// AudienceClaim and Audience are tokenAudienceClaim ("aud" if empty)
	// and tokenAudience ("": not checked).
	AudienceClaim, Audience string
}

// TokenProvider authenticates JWTs.
type TokenProvider struct {
	cfg     TokenConfig
	parser  *jwt.Parser
	keyFunc jwt.Keyfunc
}

// NewTokenProvider checks cfg and returns its provider.
func NewTokenProvider(cfg TokenConfig) (*TokenProvider, error) {
	if cfg.AuthClaim == "" {
		cfg.AuthClaim = "sub"
	}
	if cfg.AudienceClaim == "" {
		cfg.AudienceClaim = "aud"
	}
	var methods []string
	var key any
	switch {
	case len(cfg.SecretKey) > 0 && cfg.PublicKey != nil:
		return nil, errors.New("token authentication: set tokenSecretKey or tokenPublicKey, not both")
	case len(cfg.SecretKey) > 0:
		methods, key = []string{"HS256", "HS384", "HS512"}, cfg.SecretKey
	case cfg.PublicKey != nil:
		switch cfg.PublicKey.(type) {
		case *rsa.PublicKey:
			methods = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512"}
		case *ecdsa.PublicKey:
			methods = []string{"ES256", "ES384", "ES512"}
		default:
			return nil, fmt.Errorf("token authentication: tokenPublicKey of type %T is not supported (want RSA or EC)", cfg.PublicKey)
		}
		key = cfg.PublicKey
	default:
		return nil, errors.New("token authentication: tokenSecretKey or tokenPublicKey is required")
	}
	return &TokenProvider{cfg: cfg, parser: jwt.NewParser(jwt.WithValidMethods(methods)),
		keyFunc: func(*jwt.Token) (any, error) { return key, nil }}, nil
}

// Method is "token".
func (p *TokenProvider) Method() string { return "token" }

// Authenticate validates the token in c.Data.
func (p *TokenProvider) Authenticate(c Credentials) (string, error) {
	role, _, err := p.AuthenticateUntil(c)
	return role, err
}

// AuthenticateUntil validates the token in c.Data and returns when it
// expires (zero: never), for the binary protocol's auth refresh.
func (p *TokenProvider) AuthenticateUntil(c Credentials) (string, time.Time, error) {
	return p.validate(strings.TrimSpace(strings.TrimPrefix(string(c.Data), "Bearer ")))
}

// Validate returns the role of a valid token.
func (p *TokenProvider) Validate(token string) (string, error) {
	role, _, err := p.validate(token)
	return role, err
}

func (p *TokenProvider) validate(token string) (string, time.Time, error) {
	if token == "" {
		return "", time.Time{}, fmt.Errorf("%w: empty token", ErrUnauthenticated)
	}
	claims := jwt.MapClaims{}
	if _, err := p.parser.ParseWithClaims(token, claims, p.keyFunc); err != nil {
		// jwt's messages name the failed check, never the token.
		return "", time.Time{}, fmt.Errorf("%w: invalid token: %v", ErrUnauthenticated, err)
	}
	if p.cfg.Audience != "" && !hasAudience(claims[p.cfg.AudienceClaim], p.cfg.Audience) {
		return "", time.Time{}, fmt.Errorf("%w: token is not for audience %q", ErrUnauthenticated, p.cfg.Audience)
	}
	role, ok := claims[p.cfg.AuthClaim].(string)
	if !ok || role == "" {
		return "", time.Time{}, fmt.Errorf("%w: token has no %q claim naming a role", ErrUnauthenticated, p.cfg.AuthClaim)
	}
	var expires time.Time
	if exp, err := claims.GetExpirationTime(); err == nil && exp != nil {
		expires = exp.Time
	}
	return role, expires, nil
}

func hasAudience(claim any, want string) bool {
	switch v := claim.(type) {
	case string:
		return v == want
	case []any:
		for _, a := range v {
			if s, ok := a.(string); ok && s == want {
				return true
			}
		}
	}
	return false
}

// ReadKeyValue reads a key given as Pulsar does: file:///path,
// data:;base64,..., or (as Pulsar also accepts) the base64 text itself.
func ReadKeyValue(v string) ([]byte, error) {
	switch {
	case strings.HasPrefix(v, "file://"):
		b, err := os.ReadFile(strings.TrimPrefix(v, "file://"))
		if err != nil {
			return nil, fmt.Errorf("read key: %w", err)
		}
		return b, nil
	case strings.HasPrefix(v, "data:"):
		_, data, ok := strings.Cut(v, ",")
		if !ok {
			return nil, errors.New("key: want data:;base64,<base64>")
		}
		if !strings.Contains(v[:len(v)-len(data)], "base64") {
			return []byte(data), nil
		}
		return decodeBase64(data)
	}
	return decodeBase64(v)
}

func decodeBase64(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("key: not valid base64")
}

// ParsePublicKey reads an RSA or EC public key, DER (X.509
// SubjectPublicKeyInfo, as Pulsar writes it) or PEM.
func ParsePublicKey(b []byte) (any, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		b = blk.Bytes
	}
	k, err := x509.ParsePKIXPublicKey(b)
	if err != nil {
		if rk, err2 := x509.ParsePKCS1PublicKey(b); err2 == nil {
			return rk, nil
		}
		return nil, fmt.Errorf("public key: %w", err)
	}
	return k, nil
}

// ParsePrivateKey reads an RSA or EC private key, DER (PKCS#8, as Pulsar
// writes it) or PEM (PKCS#8, PKCS#1 or SEC 1).
func ParsePrivateKey(b []byte) (any, error) {
	if blk, _ := pem.Decode(b); blk != nil {
		b = blk.Bytes
	}
	if k, err := x509.ParsePKCS8PrivateKey(b); err == nil {
		return k, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(b); err == nil {
		return k, nil
	}
	if k, err := x509.ParseECPrivateKey(b); err == nil {
		return k, nil
	}
	return nil, errors.New("private key: not PKCS#8, PKCS#1 or SEC 1 (DER or PEM)")
}
