package fleet

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/wire"
)

// The fleet's metrics (R-OBS-7). Labels are bounded: ops are the
// coordinator's own, results and reasons are the constants below, and
// transports are two. No node id, run ref or free text is a label.
type metrics struct {
	reconnects        prometheus.Counter
	handshakeFailures *prometheus.CounterVec
	calls             *prometheus.HistogramVec
}

// Tunnel call results.
const (
	resultOK = "ok"
	// resultError: the agent answered with an error (a refusal).
	resultError       = "error"
	resultUnreachable = "unreachable"
	// resultFailed: the stream broke before the reply.
	resultFailed   = "failed"
	resultCanceled = "canceled"
)

// Handshake failure reasons.
const (
	reasonRevoked      = "revoked"
	reasonRegistry     = "registry_unavailable"
	reasonNoClientCert = "no_client_certificate"
	reasonBadCert      = "bad_certificate"
	reasonTimeout      = "timeout"
	reasonTLS          = "tls"
	reasonNoNodeID     = "no_node_identity"
)

var (
	errNoClientCert = errors.New("fleet: no client certificate")
	errRegistry     = errors.New("registry check failed")
)

// callBuckets: from a loopback round trip (~100 µs) to a slow node's
// reply (10 s).
var callBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

func newMetrics(f *Fleet, reg prometheus.Registerer) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &metrics{
		reconnects: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "olivares_tunnel_reconnects_total",
			Help: "Tunnel sessions that replaced or followed an earlier one of the same node.",
		}),
		handshakeFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "olivares_tunnel_handshake_failures_total",
			Help: "Refused tunnel handshakes by reason.",
		}, []string{"reason"}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "olivares_tunnel_call_duration_seconds",
			Help:    "Coordinator-to-agent calls by op and result: the time from opening the stream to the agent's reply header (a stream's frames are not included).",
			Buckets: callBuckets,
		}, []string{"op", "result"}),
	}
	for _, r := range []string{reasonRevoked, reasonRegistry, reasonNoClientCert, reasonBadCert, reasonTimeout, reasonTLS, reasonNoNodeID} {
		m.handshakeFailures.WithLabelValues(r)
	}
	reg.MustRegister(m.reconnects, m.handshakeFailures, m.calls, linkCollector{f})
	return m
}

// handshakeReason names why a listener's handshake failed.
func handshakeReason(err error) string {
	var ua x509.UnknownAuthorityError
	var ci x509.CertificateInvalidError
	var cv *tls.CertificateVerificationError
	var ne net.Error
	switch {
	case errors.Is(err, errNoClientCert):
		return reasonNoClientCert
	case errors.Is(err, errRegistry):
		return reasonRegistry
	case errors.As(err, &ua), errors.As(err, &ci), errors.As(err, &cv):
		return reasonBadCert
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return reasonTimeout
	}
	// QUIC reports the TLS alert as text only.
	s := err.Error()
	switch {
	case strings.Contains(s, "certificate required"):
		return reasonNoClientCert
	case strings.Contains(s, "bad certificate"), strings.Contains(s, "unknown certificate authority"), strings.Contains(s, "x509:"):
		return reasonBadCert
	case strings.Contains(s, "timeout"):
		return reasonTimeout
	}
	return reasonTLS
}

// callResult classifies Open's error.
func callResult(err error) string {
	var we *wire.Error
	switch {
	case err == nil:
		return resultOK
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return resultCanceled
	case errors.As(err, &we) && we.Code == codeUnreachable:
		return resultUnreachable
	case errors.As(err, &we) && we.Code == codeCallFailed:
		return resultFailed
	case errors.As(err, &we):
		return resultError
	}
	return resultFailed
}

const (
	codeUnreachable = "node_unreachable"
	codeCallFailed  = "node_call_failed"
)

// linkCollector reads the live links at scrape time: nodes connected by
// transport, and the streams open on their tunnels.
type linkCollector struct{ f *Fleet }

var (
	descConnected = prometheus.NewDesc("olivares_nodes_connected", "Nodes with a live tunnel, by transport.", []string{"transport"}, nil)
	descStreams   = prometheus.NewDesc("olivares_tunnel_open_streams", "Streams open on all tunnels.", nil, nil)
)

func (c linkCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descConnected
	ch <- descStreams
}

func (c linkCollector) Collect(ch chan<- prometheus.Metric) {
	byTransport := map[string]int{tunnel.TransportQUIC: 0, tunnel.TransportYamux: 0}
	streams := 0
	c.f.mu.Lock()
	for _, l := range c.f.links {
		byTransport[l.sess.Transport()]++
		streams += l.sess.NumStreams()
	}
	c.f.mu.Unlock()
	for t, n := range byTransport {
		ch <- prometheus.MustNewConstMetric(descConnected, prometheus.GaugeValue, float64(n), t)
	}
	ch <- prometheus.MustNewConstMetric(descStreams, prometheus.GaugeValue, float64(streams))
}
