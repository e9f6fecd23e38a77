package main

// magnetar admin's credentials and TLS trust, as pulsar-admin takes them:
// --auth-plugin and --auth-params (token, tls, basic; Pulsar's class
// names or short names), --tls-trust-certs-file-path, --tls-allow-insecure,
// --tls-enable-hostname-verification, and the same keys of Pulsar's
// client.conf ($PULSAR_CLIENT_CONF, else conf/client.conf when present):
// webServiceUrl, authPlugin, authParams, tlsTrustCertsFilePath,
// tlsAllowInsecureConnection, tlsEnableHostnameVerification. Flags win
// over the environment ($MAGNETAR_ADMIN_URL), which wins over the file.

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin"
	adminauth "github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/auth"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/admin/config"
	"github.com/apache/pulsar-client-go/pulsaradmin/pkg/rest"
)

// adminSecurity are the credential and trust options.
type adminSecurity struct {
	authPlugin, authParams, trustCerts string
	allowInsecure, verifyHostname      bool
}

func (s *adminSecurity) define(fs *flag.FlagSet) {
	fs.StringVar(&s.authPlugin, "auth-plugin", s.authPlugin, "authentication plugin: token, tls, basic (or Pulsar's class name)")
	fs.StringVar(&s.authParams, "auth-params", s.authParams, "the plugin's parameters: token:<jwt> or file:///path (token); tlsCertFile:...,tlsKeyFile:... (tls); {\"userId\":...,\"password\":...} (basic)")
	fs.StringVar(&s.trustCerts, "tls-trust-certs-file-path", s.trustCerts, "CA certificates (PEM) to trust for https:// admin URLs")
	fs.BoolVar(&s.allowInsecure, "tls-allow-insecure", s.allowInsecure, "accept any server certificate (tests only)")
	fs.BoolVar(&s.verifyHostname, "tls-enable-hostname-verification", s.verifyHostname, "check the server certificate's host name")
}

// clientConfPath is Pulsar's client.conf for admin, or "".
func clientConfPath() string {
	if p := os.Getenv("PULSAR_CLIENT_CONF"); p != "" {
		return p
	}
	return confFile("", "conf/client.conf")
}

// applyClientConf sets what client.conf gives to g (before flags are
// parsed, so flags win); the URL only when the environment gave none.
func (g *adminGlobals) applyClientConf(urlFromEnv bool) error {
	path := clientConfPath()
	if path == "" {
		return nil
	}
	conf, err := readConf(path)
	if err != nil {
		return err
	}
	if u := conf["webServiceUrl"]; u != "" && !urlFromEnv {
		g.url = strings.TrimSuffix(u, "/")
	}
	s := &g.sec
	for k, p := range map[string]*string{"authPlugin": &s.authPlugin, "authParams": &s.authParams, "tlsTrustCertsFilePath": &s.trustCerts} {
		if v, ok := conf[k]; ok {
			*p = v
		}
	}
	for k, p := range map[string]*bool{"tlsAllowInsecureConnection": &s.allowInsecure, "tlsEnableHostnameVerification": &s.verifyHostname} {
		if v, ok := conf[k]; ok && v != "" {
			if err := setBool(p)(v); err != nil {
				return fmt.Errorf("config %s: %s: %w", path, k, err)
			}
		}
	}
	return nil
}

// clients builds the pulsaradmin client and the raw REST client for url
// with these credentials.
func (s adminSecurity) clients(url string) (admin.Client, *rest.Client, error) {
	cfg := &config.Config{WebServiceURL: url, TLSTrustCertsFilePath: s.trustCerts,
		TLSAllowInsecureConnection: s.allowInsecure, TLSEnableHostnameVerification: s.verifyHostname}
	basic := ""
	switch plugin := shortPlugin(s.authPlugin); plugin {
	case "":
	case "token", "tls":
		cfg.AuthPlugin, cfg.AuthParams = plugin, s.authParams
	case "basic":
		header, err := basicHeader(s.authParams)
		if err != nil {
			return nil, nil, err
		}
		basic = header
	default:
		return nil, nil, fmt.Errorf("--auth-plugin %q: want token, tls or basic", s.authPlugin)
	}
	provider, err := adminauth.GetAuthProvider(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("authentication: %w", err)
	}
	if basic != "" {
		provider = &basicAuthTransport{Provider: provider, header: basic}
	}
	raw := &rest.Client{ServiceURL: url, HTTPClient: &http.Client{Timeout: admin.DefaultHTTPTimeOutDuration, Transport: provider},
		VersionInfo: "magnetar-admin"}
	return admin.NewWithAuthProvider(cfg, provider), raw, nil
}

// shortPlugin maps Pulsar's client plugin class names to short names.
func shortPlugin(p string) string {
	switch p {
	case "org.apache.pulsar.client.impl.auth.AuthenticationToken":
		return "token"
	case "org.apache.pulsar.client.impl.auth.AuthenticationTls":
		return "tls"
	case "org.apache.pulsar.client.impl.auth.AuthenticationBasic":
		return "basic"
	}
	return strings.ToLower(p)
}

// basicHeader reads basic's parameters, {"userId":"u","password":"p"} or
// userId:u,password:p.
func basicHeader(params string) (string, error) {
	var p struct {
		UserID   string `json:"userId"`
		Password string `json:"password"`
	}
	if err := json.Unmarshal([]byte(params), &p); err != nil {
		for _, kv := range strings.Split(params, ",") {
			k, v, _ := strings.Cut(kv, ":")
			switch strings.TrimSpace(k) {
			case "userId":
				p.UserID = v
			case "password":
				p.Password = v
			}
		}
	}
	if p.UserID == "" || p.Password == "" {
		return "", errors.New(`--auth-params for basic: want {"userId":"...","password":"..."}`)
	}
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(p.UserID+":"+p.Password)), nil
}

// basicAuthTransport adds the Authorization header.
type basicAuthTransport struct {
	adminauth.Provider
	header string
}

func (t *basicAuthTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", t.header)
	return t.Provider.RoundTrip(req)
}
