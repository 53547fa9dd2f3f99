package tunnel

import (
	"crypto/tls"
	"errors"
	"fmt"
)

// ErrNoClientAuth: a server TLS config does not require and verify client
// certificates. Only enrollment may be served without one.
var ErrNoClientAuth = errors.New("tunnel: server TLS config must set ClientAuth to tls.RequireAndVerifyClientCert")

// withALPN is c with our one protocol and TLS 1.3 at least; everything else,
// identity checks included, is the caller's.
func withALPN(c *tls.Config, proto string) *tls.Config {
	c = c.Clone()
	c.NextProtos = []string{proto}
	if c.MinVersion < tls.VersionTLS13 {
		c.MinVersion = tls.VersionTLS13
	}
	return c
}

// tunnelServerTLS returns the server config for ALPNTunnel: conf with the
// ALPN set, also on the configs its GetConfigForClient picks per handshake,
// each of which must still require client certificates.
func tunnelServerTLS(conf *tls.Config) (*tls.Config, error) {
	if conf == nil {
		return nil, errors.New("tunnel: no server TLS config")
	}
	if conf.ClientAuth != tls.RequireAndVerifyClientCert {
		return nil, ErrNoClientAuth
	}
	tc := withALPN(conf, ALPNTunnel)
	if inner := conf.GetConfigForClient; inner != nil {
		tc.GetConfigForClient = func(hi *tls.ClientHelloInfo) (*tls.Config, error) {
			c, err := inner(hi)
			if err != nil || c == nil {
				return c, err
			}
			if c.ClientAuth != tls.RequireAndVerifyClientCert {
				return nil, fmt.Errorf("%w (in the config from GetConfigForClient)", ErrNoClientAuth)
			}
			return withALPN(c, ALPNTunnel), nil
		}
	}
	return tc, nil
}
