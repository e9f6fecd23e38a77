package main

// magnetar tokens: JWTs for token authentication, as `pulsar tokens`.
//
// Behaviour:
//   - create-secret-key [-a HS256|HS384|HS512] [-o FILE] [-b]: a random
//     HMAC key (32, 48 or 64 bytes), raw to FILE or stdout, base64 with -b.
//     The broker reads it as tokenSecretKey=file:///FILE.
//   - create-key-pair [-a RS256|...|ES256|ES384|ES512]
//     --output-private-key FILE --output-public-key FILE: DER files (PKCS#8
//     private, X.509 public), as Pulsar writes them; tokenPublicKey takes
//     the public one.
//   - create --subject ROLE (--secret-key | --private-key) KEY
//     [--expiry-time 1y|30d|12h|10m|60s] [-a ALG]: prints a token whose sub
//     is ROLE. KEY is file:///path or data:;base64,...
//   - show (-i TOKEN | -f FILE): prints the header and claims, unchecked.
//   - validate (-i TOKEN | -f FILE) (--secret-key | --public-key) KEY:
//     prints the claims of a valid token; exit 1 for an invalid one.

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/magnetar-io/magnetar/broker/auth"
)

func runTokens(args []string, stdout, stderr io.Writer) int {
	cmds := map[string]func([]string, io.Writer) error{
		"create-secret-key": tokensCreateSecretKey, "create-key-pair": tokensCreateKeyPair,
		"create": tokensCreate, "show": tokensShow, "validate": tokensValidate,
	}
	if len(args) == 0 || cmds[args[0]] == nil {
		fmt.Fprintln(stderr, "usage: magnetar tokens create-secret-key | create-key-pair | create | show | validate [flags]")
		if len(args) == 0 {
			return 2
		}
		fmt.Fprintf(stderr, "unknown command %q\n", args[0])
		return 2
	}
	if err := cmds[args[0]](args[1:], stdout); err != nil {
		fmt.Fprintf(stderr, "magnetar tokens %s: %v\n", args[0], err)
		if errors.Is(err, flag.ErrHelp) || strings.HasPrefix(err.Error(), "usage") {
			return 2
		}
		return 1
	}
	return 0
}

func tokensFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("magnetar tokens "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

var hmacSizes = map[string]int{"HS256": 32, "HS384": 48, "HS512": 64}

func tokensCreateSecretKey(args []string, stdout io.Writer) error {
	fs := tokensFlags("create-secret-key")
	alg := fs.String("a", "HS256", "signature algorithm: HS256, HS384, HS512")
	fs.StringVar(alg, "signature-algorithm", "HS256", "signature algorithm")
	out := fs.String("o", "", "output file (default stdout)")
	fs.StringVar(out, "output", "", "output file")
	b64 := fs.Bool("b", false, "base64-encode the key")
	fs.BoolVar(b64, "base64", false, "base64-encode the key")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	n, ok := hmacSizes[*alg]
	if !ok {
		return fmt.Errorf("usage: -a %q: want HS256, HS384 or HS512", *alg)
	}
	key := make([]byte, n)
	if _, err := rand.Read(key); err != nil {
		return err
	}
	if *b64 {
		key = []byte(base64.StdEncoding.EncodeToString(key))
	}
	if *out == "" {
		_, err := stdout.Write(key)
		return err
	}
	return os.WriteFile(*out, key, 0o600)
}

func tokensCreateKeyPair(args []string, _ io.Writer) error {
	fs := tokensFlags("create-key-pair")
	alg := fs.String("a", "RS256", "signature algorithm: RS256, RS384, RS512, ES256, ES384, ES512")
	fs.StringVar(alg, "signature-algorithm", "RS256", "signature algorithm")
	priv := fs.String("output-private-key", "", "private key file (DER, PKCS#8)")
	pub := fs.String("output-public-key", "", "public key file (DER, X.509)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	if *priv == "" || *pub == "" {
		return errors.New("usage: --output-private-key and --output-public-key are required")
	}
	var key any
	var err error
	switch *alg {
	case "RS256", "RS384", "RS512":
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	case "ES256":
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "ES384":
		key, err = ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	case "ES512":
		key, err = ecdsa.GenerateKey(elliptic.P521(), rand.Reader)
	default:
		return fmt.Errorf("usage: -a %q: want RS256, RS384, RS512, ES256, ES384 or ES512", *alg)
	}
	if err != nil {
		return err
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(key.(crypto.Signer).Public())
	if err != nil {
		return err
	}
	if err := os.WriteFile(*priv, privDER, 0o600); err != nil {
		return err
	}
	return os.WriteFile(*pub, pubDER, 0o644)
}

func tokensCreate(args []string, stdout io.Writer) error {
	fs := tokensFlags("create")
	subject := fs.String("subject", "", "the role (sub claim)")
	secret := fs.String("secret-key", "", "HMAC key: file:///path or data:;base64,...")
	private := fs.String("private-key", "", "RSA or EC private key: file:///path or data:;base64,...")
	expiry := fs.String("expiry-time", "", "lifetime: 30s, 10m, 12h, 30d, 2w, 1y (default: never expires)")
	alg := fs.String("a", "", "signature algorithm (default HS256 for a secret key, RS256 or ES256 for a private key)")
	fs.StringVar(alg, "signature-algorithm", "", "signature algorithm")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("usage: %w", err)
	}
	if *subject == "" || (*secret == "") == (*private == "") {
		return errors.New("usage: --subject and one of --secret-key, --private-key are required")
	}
	claims := jwt.MapClaims{"sub": *subject}
	if *expiry != "" {
		secs, err := parseRelativeTime("expiry-time", *expiry)
		if err != nil || secs == 0 {
			return fmt.Errorf("usage: --expiry-time %q: want a positive time (30s, 10m, 12h, 30d, 2w, 1y)", *expiry)
		}
		claims["exp"] = time.Now().Unix() + secs
	}
	key, method, err := signingKey(*secret, *private, *alg)
	if err != nil {
		return err
	}
	token, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(stdout, token)
	return err
}

func signingKey(secret, private, alg string) (any, jwt.SigningMethod, error) {
	if secret != "" {
		key, err := auth.ReadKeyValue(secret)
		if err != nil {
			return nil, nil, err
		}
		if alg == "" {
			alg = "HS256"
		}
		m := jwt.GetSigningMethod(alg)
		if _, ok := m.(*jwt.SigningMethodHMAC); !ok {
			return nil, nil, fmt.Errorf("usage: -a %q does not go with a secret key (want HS256, HS384, HS512)", alg)
		}
		return key, m, nil
	}
	b, err := auth.ReadKeyValue(private)
	if err != nil {
		return nil, nil, err
	}
	key, err := auth.ParsePrivateKey(b)
	if err != nil {
		return nil, nil, err
	}
	if alg == "" {
		alg = "RS256"
		if _, ok := key.(*ecdsa.PrivateKey); ok {
			alg = "ES256"
		}
	}
	m := jwt.GetSigningMethod(alg)
	if m == nil || strings.HasPrefix(alg, "HS") || alg == "none" {
		return nil, nil, fmt.Errorf("usage: -a %q: want RS*, PS* or ES* for a private key", alg)
	}
	return key, m, nil
}

// tokenInput reads -i TOKEN or -f FILE.
func tokenInput(fs *flag.FlagSet, args []string) (string, error) {
	in := fs.String("i", "", "the token")
	fs.StringVar(in, "token", "", "the token")
	file := fs.String("f", "", "file holding the token")
	fs.StringVar(file, "token-file", "", "file holding the token")
	if err := fs.Parse(args); err != nil {
		return "", fmt.Errorf("usage: %w", err)
	}
	switch {
	case *in != "" && *file == "":
		return strings.TrimSpace(*in), nil
	case *file != "" && *in == "":
		b, err := os.ReadFile(*file)
		return strings.TrimSpace(string(b)), err
	}
	if env := os.Getenv("TOKEN"); env != "" {
		return strings.TrimSpace(env), nil
	}
	return "", errors.New("usage: give the token with -i or -f")
}

func tokensShow(args []string, stdout io.Writer) error {
	token, err := tokenInput(tokensFlags("show"), args)
	if err != nil {
		return err
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT (want header.claims.signature)")
	}
	for _, p := range parts[:2] {
		b, err := base64.RawURLEncoding.DecodeString(p)
		if err != nil {
			return fmt.Errorf("not a JWT: %w", err)
		}
		if _, err := fmt.Fprintln(stdout, string(b)); err != nil {
			return err
		}
	}
	return nil
}

func tokensValidate(args []string, stdout io.Writer) error {
	fs := tokensFlags("validate")
	secret := fs.String("secret-key", "", "HMAC key: file:///path or data:;base64,...")
	public := fs.String("public-key", "", "RSA or EC public key: file:///path or data:;base64,...")
	token, err := tokenInput(fs, args)
	if err != nil {
		return err
	}
	cfg := auth.TokenConfig{}
	switch {
	case *secret != "" && *public == "":
		if cfg.SecretKey, err = auth.ReadKeyValue(*secret); err != nil {
			return err
		}
	case *public != "" && *secret == "":
		b, err := auth.ReadKeyValue(*public)
		if err != nil {
			return err
		}
		if cfg.PublicKey, err = auth.ParsePublicKey(b); err != nil {
			return err
		}
	default:
		return errors.New("usage: give one of --secret-key, --public-key")
	}
	p, err := auth.NewTokenProvider(cfg)
	if err != nil {
		return err
	}
	if _, err := p.Validate(token); err != nil {
		return err
	}
	claims := jwt.MapClaims{}
	if _, _, err := jwt.NewParser().ParseUnverified(token, claims); err != nil {
		return err
	}
	out, _ := json.Marshal(claims)
	_, err = fmt.Fprintln(stdout, string(out))
	return err
}
