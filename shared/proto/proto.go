// Package proto names the calls that cross the agent↔coordinator tunnel and
// the JSON bodies they carry. The framing itself is shared/wire's.
//
// Agent→coordinator: OpHello (the control stream, then heartbeat frames),
// OpRenew. Coordinator→agent: OpPing, OpStatus. Enrollment is not a tunnel
// call: it runs on its own TLS connection (ALPN olivares-enroll/1) before the
// node has a certificate.
package proto

import "time"

// Ops.
const (
	OpHello  = "hello"
	OpRenew  = "renew"
	OpPing   = "ping"
	OpStatus = "status"
	// OpMetrics → MetricsReply: the agent's own series (olivares_agent_*)
	// for the coordinator's /metrics (R-OBS-8).
	OpMetrics = "metrics"

	// CodeNodeRevoked is the coordinator's answer to the first stream of a
	// revoked (or forgotten) node's session, then the session closes: the
	// agent stops dialing instead of retrying (R-LIFE-8).
	CodeNodeRevoked = "node_revoked"
)

// EnrollRequest is what `olivares-agent enroll` sends once the coordinator's
// certificate matched the pin. The node's identity is NOT in it: the
// coordinator takes it from the token.
type EnrollRequest struct {
	Token string `json:"token"`
	CSR   []byte `json:"csr"` // DER, base64 in JSON
}

// EnrollResponse carries what the node stores.
type EnrollResponse struct {
	NodeID    string `json:"node_id"`
	Tenant    string `json:"tenant"`
	CertPEM   []byte `json:"cert_pem"`
	BundlePEM []byte `json:"ca_bundle_pem"`
}

// CLI is one vendor CLI found on the node's PATH.
type CLI struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Version string `json:"version,omitempty"`
	// Error says why the version could not be read, if it could not.
	Error string `json:"error,omitempty"`
}

// Capabilities is what a node can run (issue 2, R-ARCH-5).
type Capabilities struct {
	PTY              bool   `json:"pty"`
	Podman           string `json:"podman,omitempty"` // path when found
	Docker           string `json:"docker,omitempty"`
	WorktreeDir      string `json:"worktree_dir,omitempty"`
	WorktreeDirReady bool   `json:"worktree_dir_configured"`
	// Sandbox: isolation=sandbox works here (bubblewrap ran a contained
	// probe); SandboxError says why not (R-TR-7).
	Sandbox      bool   `json:"sandbox"`
	SandboxError string `json:"sandbox_error,omitempty"`
	// Container: isolation=container works here (podman ran a contained
	// probe); ContainerError says why not (R-TR-7).
	Container      bool   `json:"container"`
	ContainerError string `json:"container_error,omitempty"`
	CLIs           []CLI  `json:"clis"`
	// CodexSupervision is present only on a node that opted in
	// (R-CX-PERM-1) with a supported connection (R-CX-CONN-7).
	CodexSupervision *CodexSupervision `json:"codex_supervision,omitempty"`
	// ClaudeSupervision is present only on a node that opted in
	// (R-CL-PERM-1).
	ClaudeSupervision *ClaudeSupervision `json:"claude_supervision,omitempty"`
}

// Hello opens the control stream.
type Hello struct {
	Hostname     string       `json:"hostname"`
	AgentVersion string       `json:"agent_version"`
	Capabilities Capabilities `json:"capabilities"`
}

// HelloReply answers Hello.
type HelloReply struct {
	NodeID            string        `json:"node_id"`
	HeartbeatInterval time.Duration `json:"heartbeat_interval"`
}

// Heartbeat travels as a frame on the control stream, each way: the agent
// sends one, the coordinator echoes it. Seq lets the agent match echoes.
// RTT is the round trip the agent measured on the previous echo (zero
// before the first), so the coordinator can show it (GET /v1/nodes).
type Heartbeat struct {
	Seq  uint64        `json:"seq"`
	Sent time.Time     `json:"sent"`
	RTT  time.Duration `json:"rtt,omitempty"`
}

// RenewRequest asks for a fresh certificate for a key the node just made.
type RenewRequest struct {
	CSR []byte `json:"csr"`
}

// RenewResponse is the new certificate and the current CA bundle (which may
// hold a next root during a CA rotation).
type RenewResponse struct {
	CertPEM   []byte `json:"cert_pem"`
	BundlePEM []byte `json:"ca_bundle_pem"`
}

// PingReply answers OpPing.
type PingReply struct {
	NodeID string    `json:"node_id"`
	At     time.Time `json:"at"`
}

// MetricsReply answers OpMetrics: the agent's olivares_agent_* families in
// the Prometheus text format (version 0.0.4), at most wire.MaxMessage.
type MetricsReply struct {
	Text string `json:"text"`
}
