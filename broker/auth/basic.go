package auth

// Basic authentication (AuthenticationProviderBasic): the client sends
// user:password (binary auth_data, or HTTP Authorization: Basic); the role
// is the user.
//
// Behaviour:
//   - The users file (basicAuthConf, Pulsar's -Dpulsar.auth.basic.conf) has
//     lines user:hash, as htpasswd writes them; blank lines and # comments
//     are skipped. It may be given as a path, file:///path or
//     data:;base64,... (Pulsar also takes the base64 of the file).
//   - Hashes: MD5-crypt, Apache's $apr1$ and the glibc $1$ forms (what
//     `htpasswd -m` writes and the Go client's suite uses). Pulsar's
//     commons-codec also verifies DES, $5$ and $6$ crypt: such a line is
//     refused when the file is read, naming the line, so nobody is locked
//     out silently.
//   - Passwords are compared in constant time.

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"
)

// BasicProvider authenticates user:password against a users file.
type BasicProvider struct {
	users map[string]string // user -> hash
}

// LoadBasicProvider reads the users file named by conf.
func LoadBasicProvider(conf string) (*BasicProvider, error) {
	var data []byte
	var err error
	if strings.HasPrefix(conf, "file://") || strings.HasPrefix(conf, "data:") {
		data, err = ReadKeyValue(conf)
	} else if data, err = os.ReadFile(conf); err != nil {
		if b, derr := decodeBase64(conf); derr == nil {
			data, err = b, nil
		}
	}
	if err != nil {
		return nil, fmt.Errorf("basic authentication: basicAuthConf: %w", err)
	}
	return ParseBasicUsers(data)
}

// ParseBasicUsers reads user:hash lines.
func ParseBasicUsers(data []byte) (*BasicProvider, error) {
	p := &BasicProvider{users: map[string]string{}}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("basic authentication: line %d: want user:hash", n)
		}
		if !strings.HasPrefix(hash, "$apr1$") && !strings.HasPrefix(hash, "$1$") {
			return nil, fmt.Errorf("basic authentication: line %d (user %q): only MD5 crypt hashes ($apr1$, $1$) are supported", n, user)
		}
		p.users[user] = hash
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("basic authentication: %w", err)
	}
	return p, nil
}

// Method is "basic".
func (p *BasicProvider) Method() string { return "basic" }

// Authenticate checks user:password in c.Data.
func (p *BasicProvider) Authenticate(c Credentials) (string, error) {
	user, password, ok := strings.Cut(string(c.Data), ":")
	if !ok || user == "" {
		return "", fmt.Errorf("%w: basic credentials must be user:password", ErrUnauthenticated)
	}
	hash, known := p.users[user]
	if !known {
		return "", fmt.Errorf("%w: unknown user or wrong password", ErrUnauthenticated)
	}
	magic, salt := "$1$", ""
	if strings.HasPrefix(hash, "$apr1$") {
		magic = "$apr1$"
	}
	salt, _, _ = strings.Cut(strings.TrimPrefix(hash, magic), "$")
	if subtle.ConstantTimeCompare([]byte(md5Crypt(password, salt, magic)), []byte(hash)) != 1 {
		return "", fmt.Errorf("%w: unknown user or wrong password", ErrUnauthenticated)
	}
	return user, nil
}

// md5Crypt is Poul-Henning Kamp's MD5-crypt with magic "$1$" or "$apr1$".
func md5Crypt(password, salt, magic string) string {
	if len(salt) > 8 {
		salt = salt[:8]
	}
	pw, sl := []byte(password), []byte(salt)
	alt := md5.Sum(append(append(append([]byte{}, pw...), sl...), pw...))
	ctx := append(append(append([]byte{}, pw...), magic...), sl...)
	for i := len(pw); i > 0; i -= 16 {
		ctx = append(ctx, alt[:min(i, 16)]...)
	}
	for i := len(pw); i > 0; i >>= 1 {
		if i&1 != 0 {
			ctx = append(ctx, 0)
		} else {
			ctx = append(ctx, pw[0])
		}
	}
	sum := md5.Sum(ctx)
	for i := 0; i < 1000; i++ {
		var b []byte
		if i&1 != 0 {
			b = append(b, pw...)
		} else {
			b = append(b, sum[:]...)
		}
		if i%3 != 0 {
			b = append(b, sl...)
		}
		if i%7 != 0 {
			b = append(b, pw...)
		}
		if i&1 != 0 {
			b = append(b, sum[:]...)
		} else {
			b = append(b, pw...)
		}
		sum = md5.Sum(b)
	}
	const itoa64 = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	var out strings.Builder
	out.WriteString(magic + salt + "$")
	enc := func(a, b, c byte, n int) {
		v := uint(a)<<16 | uint(b)<<8 | uint(c)
		for ; n > 0; n-- {
			out.WriteByte(itoa64[v&0x3f])
			v >>= 6
		}
	}
	enc(sum[0], sum[6], sum[12], 4)
	enc(sum[1], sum[7], sum[13], 4)
	enc(sum[2], sum[8], sum[14], 4)
	enc(sum[3], sum[9], sum[15], 4)
	enc(sum[4], sum[10], sum[5], 4)
	enc(0, 0, sum[11], 2)
	return out.String()
}
