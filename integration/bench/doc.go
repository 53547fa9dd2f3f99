// Package bench measures olivares against baselines measured in the same
// run on 127.0.0.1, and reports ratios:
//
//   - TestReport: the tunnel (yamux and QUIC) against raw TLS 1.3 over TCP,
//     one stream's bulk throughput and a 64-byte round trip;
//   - TestRingReport: the ring's persisted write throughput against raw
//     bbolt batched sequential writes, and its idle delivery latency;
//   - TestRunsReport: runs end to end, real olivares-agent processes whose
//     children are the fakecli peer. stream: a child's stdout flood to an
//     SSE client through agent, tunnel (QUIC and yamux) and coordinator,
//     and input-to-echo latency, beside raw TLS and ssh to a throwaway sshd
//     (skipped, with the reason printed, when openssh-server is missing);
//     scale: 500 live runs on one agent, its RSS per run and attach latency
//     against one run.
//
// Its figures never fail a test: a loaded CI host would make them flaky.
// Each report prints whether its targets are met. The reports run only with
// OLIVARES_BENCH=1; run scripts/bench to read them.
package bench
