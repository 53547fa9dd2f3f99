// Package outbound is the coordinator's one client for the requests it
// sends where a tenant said: webhook deliveries and Web Push. A tenant's
// URL is untrusted input, so the guard resolves its host, checks every
// address against the ranges of the coordinator's own network (loopback,
// private, link-local and metadata, unique-local, unspecified, mapped and
// the other special forms) unless the operator allowed them, and dials the
// address it checked, so a name that answers differently the second time
// (DNS rebinding) reaches nothing new.
//
// outbound never follows a redirect, never dials an address it did not
// check, and never hands a receiver's body to its caller: a tenant sees a
// status and a short reason, so the coordinator is no window onto its
// network and no port scanner.
package outbound

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"
)

// Defaults of Options.
const (
	DefaultTimeout     = 10 * time.Second
	DefaultMaxResponse = 64 << 10
	maxHeaderBytes     = 16 << 10
)

// Errors a destination's check answers; Reason turns any error of Do
// into what a tenant may read.
var (
	// ErrScheme: the URL is not absolute http(s), or not https where only
	// https is taken.
	ErrScheme = errors.New("outbound: not an absolute URL of an allowed scheme")
	// ErrInternal: the host is, or resolves to, an address of the
	// coordinator's own network that the operator did not allow.
	ErrInternal = errors.New("outbound: the destination is an internal address")
	// ErrUnresolved: the host has no address.
	ErrUnresolved = errors.New("outbound: the host does not resolve")
)

// Options configure a Guard.
type Options struct {
	// Allow lists the private destinations the operator means: CIDR
	// prefixes ("10.20.0.0/16", "127.0.0.1/32") or host names
	// ("hooks.corp.example", exact, case-insensitive). An allowed name's
	// addresses are all taken; otherwise each address must be public or in
	// an allowed prefix. When empty, every internal address is refused.
	Allow []string
	// Timeout bounds one request, from the lookup to the end of the
	// answer's body. When zero, DefaultTimeout.
	Timeout time.Duration
	// MaxResponse is the most of an answer's body read (and thrown away,
	// so the connection can be reused). When zero, DefaultMaxResponse.
	MaxResponse int64
	// RootCAs are the roots trusted for https. When nil, the system's.
	RootCAs *x509.CertPool
	// Lookup resolves a host name. When nil, net.DefaultResolver's
	// LookupNetIP ("ip" network).
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
}

// Guard checks destinations and sends requests to them.
type Guard struct {
	allowNets  []netip.Prefix
	allowHosts map[string]bool
	timeout    time.Duration
	maxResp    int64
	lookup     func(ctx context.Context, host string) ([]netip.Addr, error)
	client     *http.Client
	dialer     net.Dialer
}

// New checks o and builds a Guard; an error names the bad allow entry.
func New(o Options) (*Guard, error) {
	g := &Guard{allowHosts: map[string]bool{}, timeout: o.Timeout, maxResp: o.MaxResponse, lookup: o.Lookup}
	for _, a := range o.Allow {
		a = strings.TrimSpace(a)
		if p, err := netip.ParsePrefix(a); err == nil {
			g.allowNets = append(g.allowNets, p.Masked())
			continue
		}
		if ip, err := netip.ParseAddr(a); err == nil {
			g.allowNets = append(g.allowNets, netip.PrefixFrom(ip.Unmap(), ip.Unmap().BitLen()))
			continue
		}
		if a == "" || strings.ContainsAny(a, "/:@ ") {
			return nil, fmt.Errorf("%q is neither a CIDR prefix (10.0.0.0/8) nor a host name", a)
		}
		g.allowHosts[strings.ToLower(strings.TrimSuffix(a, "."))] = true
	}
	if g.timeout <= 0 {
		g.timeout = DefaultTimeout
	}
	if g.maxResp <= 0 {
		g.maxResp = DefaultMaxResponse
	}
	if g.lookup == nil {
		g.lookup = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	g.dialer = net.Dialer{Timeout: g.timeout}
	tr := &http.Transport{
		Proxy:                  nil, // a proxy would dial what it likes
		DialContext:            g.dial,
		TLSClientConfig:        &tls.Config{RootCAs: o.RootCAs, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout:    g.timeout,
		ResponseHeaderTimeout:  g.timeout,
		MaxResponseHeaderBytes: maxHeaderBytes,
		MaxIdleConns:           32,
		IdleConnTimeout:        90 * time.Second,
		ForceAttemptHTTP2:      true,
	}
	g.client = &http.Client{Transport: tr, Timeout: g.timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return g, nil
}

// Check is the check of a URL before it is stored: its form (an absolute
// http or https URL, https only when httpsOnly) and every address its
// host resolves to now. A name that does not resolve yet is no refusal:
// a receiver may be set up after its hook, a resolver may be down for a
// moment, and Do checks again at each send, where it fails as "could not
// connect".
func (g *Guard) Check(ctx context.Context, raw string, httpsOnly bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil || (u.Scheme != "https" && (httpsOnly || u.Scheme != "http")) {
		return ErrScheme
	}
	if _, err = g.resolve(ctx, u.Hostname()); errors.Is(err, ErrUnresolved) && u.Hostname() != "" && !numeric(u.Hostname()) {
		return nil
	}
	return err
}

// numeric reports whether host is an address in one of the forms a
// resolver may take and netip does not (2130706433, 0x7f.1, 127.1): such
// a "name" is no name to wait for, and is refused at once.
func numeric(host string) bool {
	for _, l := range strings.Split(strings.TrimSuffix(host, "."), ".") {
		l = strings.ToLower(l)
		if h, ok := strings.CutPrefix(l, "0x"); ok {
			l = h
			if strings.Trim(l, "0123456789abcdef") != "" {
				return false
			}
			continue
		}
		if l == "" || strings.Trim(l, "0123456789") != "" {
			return false
		}
	}
	return true
}

// resolve answers the addresses of host the guard lets a request reach:
// all of them, or an error when any is refused (a name that answers both a
// public and an internal address is refused whole).
func (g *Guard) resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if ip, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		if ip.Zone() != "" || !g.allowed(ip) {
			return nil, ErrInternal
		}
		return []netip.Addr{ip.Unmap()}, nil
	}
	if host == "" {
		return nil, ErrUnresolved
	}
	// "localhost" and its subdomains are loopback whatever a resolver
	// says (RFC 6761).
	if (host == "localhost" || strings.HasSuffix(host, ".localhost")) && !g.allowHosts[host] {
		return nil, ErrInternal
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	addrs, err := g.lookup(ctx, host)
	if err != nil || len(addrs) == 0 {
		return nil, ErrUnresolved
	}
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap().WithZone("")
		if !g.allowHosts[host] && !g.allowed(a) {
			return nil, ErrInternal
		}
		out = append(out, a)
	}
	return out, nil
}

// allowed: a public address, or one in a prefix the operator allowed.
func (g *Guard) allowed(ip netip.Addr) bool {
	ip = ip.Unmap()
	for _, p := range g.allowNets {
		if p.Contains(ip) {
			return true
		}
	}
	return !Internal(ip)
}

// dial is the transport's only way out: the host resolved and checked
// here, and the connection made to a checked address, never to the name.
func (g *Guard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	ips, err := g.resolve(ctx, host)
	if err != nil {
		return nil, err
	}
	var first error
	for _, ip := range ips {
		c, err := g.dialer.DialContext(ctx, network, net.JoinHostPort(ip.String(), port))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

// Do sends req through the guard and answers the status of the answer:
// a redirect is an answer (3xx), never followed. The body is read up to
// MaxResponse and thrown away.
func (g *Guard) Do(req *http.Request) (int, error) {
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return 0, ErrScheme
	}
	resp, err := g.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, g.maxResp))
	return resp.StatusCode, nil
}

// Timeout is the bound of one request.
func (g *Guard) Timeout() time.Duration { return g.timeout }

// Reason is what a tenant is told of a failed Do: a short sentence that
// says no more than the coordinator may. A refused destination, a closed
// port, a name that does not resolve and a failed TLS handshake all read
// "could not connect", so the answers are no port scan.
func Reason(err error) string {
	var ne net.Error
	switch {
	case err == nil:
		return ""
	case errors.Is(err, ErrScheme):
		return "the URL is not an allowed http or https URL"
	case errors.Is(err, context.Canceled):
		return "cancelled: the coordinator is stopping"
	case errors.As(err, &ne) && ne.Timeout() && !dialError(err):
		return "no answer in time"
	}
	return "could not connect"
}

// dialError: err happened before a connection was up.
func dialError(err error) bool {
	var op *net.OpError
	return errors.Is(err, ErrInternal) || errors.Is(err, ErrUnresolved) || (errors.As(err, &op) && op.Op == "dial")
}

// specialNets are the ranges besides those netip names (loopback,
// private, link-local, multicast, unspecified) that no tenant's request may
// reach: IANA's special-purpose registries (RFC 6890 and after).
var specialNets = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (CGNAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("192.88.99.0/24"),  // 6to4 relay anycast
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated)
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use IPv4/IPv6 translation
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments (Teredo, ORCHID, ...)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
}

// Internal reports whether ip is one of the coordinator's own network's
// addresses rather than a public one: loopback, private (RFC 1918 and
// unique-local fc00::/7), link-local (169.254.0.0/16, where cloud
// metadata services answer, and fe80::/10), multicast, unspecified, and
// the special ranges above. An IPv4 address inside IPv6 (mapped, 6to4,
// NAT64) is judged by the IPv4 address it carries.
func Internal(ip netip.Addr) bool {
	ip = ip.Unmap()
	if v4, ok := embeddedV4(ip); ok {
		return Internal(v4)
	}
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range specialNets {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

var (
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	sixTo = netip.MustParsePrefix("2002::/16")
)

// embeddedV4 is the IPv4 address an IPv6 translation form carries.
func embeddedV4(ip netip.Addr) (netip.Addr, bool) {
	b := ip.As16()
	switch {
	case !ip.Is6():
		return netip.Addr{}, false
	case nat64.Contains(ip):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixTo.Contains(ip):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}
