// Package bench measures the tunnel against raw TLS 1.3 over TCP, measured
// in the same run on 127.0.0.1: one stream's bulk throughput and a 64-byte
// round trip, for yamux and QUIC.
//
// Its figures are reported as ratios to raw TLS and never fail a test: a
// loaded CI host would make them flaky. Run scripts/bench to read them.
package bench
