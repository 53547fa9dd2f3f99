// Package apitypes holds the JSON bodies of the public API, in one place:
// the coordinator and the agent produce them, and shared/apiclient (so the
// olivares CLI, the test harness and the benchmarks) reads them, so no two
// sides drift apart. It holds types and their constants only: no I/O.
package apitypes

import (
	"encoding/json"
	"time"
)

// Node is the registry's view of a node (GET /v1/nodes/{id}).
type Node struct {
	ID             string            `json:"id"`
	Tenant         string            `json:"tenant"`
	Hostname       string            `json:"hostname,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Connected      bool              `json:"connected"`
	Online         bool              `json:"online"`
	Transport      string            `json:"transport,omitempty"`
	ConnectedSince *time.Time        `json:"connected_since,omitempty"`
	LastHeartbeat  *time.Time        `json:"last_heartbeat,omitempty"`
	AgentVersion   string            `json:"agent_version,omitempty"`
	EnrolledAt     time.Time         `json:"enrolled_at"`
	CertSerial     string            `json:"cert_serial"`
	CertNotAfter   time.Time         `json:"cert_not_after"`
	RevokedAt      *time.Time        `json:"revoked_at,omitempty"`
	Capabilities   json.RawMessage   `json:"capabilities,omitempty"`
	// RTTMillis is the heartbeat round trip the agent last measured on its
	// live tunnel, in milliseconds; absent until it reported one.
	RTTMillis *float64 `json:"rtt_ms,omitempty"`
}

// NodeForgotten is DELETE /v1/nodes/{id}'s answer: the revoked node is gone
// from the registry, and with it the profiles and workspaces registered on
// it (they could never run again). Its runs stay in the index as history.
type NodeForgotten struct {
	ID                string `json:"id"`
	ProfilesRemoved   int    `json:"profiles_removed"`
	WorkspacesRemoved int    `json:"workspaces_removed"`
}

// State is the one-word link state a person reads.
func (n Node) State() string {
	switch {
	case n.RevokedAt != nil:
		return "revoked"
	case n.Connected:
		return "connected"
	case n.Online:
		return "reconnecting"
	}
	return "offline"
}

// NodeList is GET /v1/nodes.
type NodeList struct {
	Items []Node `json:"items"`
}

// Tenants is GET /v1/tenants: who the caller is and every tenant it
// belongs to, so a client (the console) can offer a choice before it sends
// X-Olivares-Tenant. It is also the body of a successful POST /v1/signin.
type Tenants struct {
	PrincipalID string       `json:"principal_id"`
	Name        string       `json:"name"`
	Kind        string       `json:"kind"`
	Items       []TenantRole `json:"items"`
	// ExpiresAt is when a console session ends (POST /v1/signin only).
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// TenantRole is one tenant of the caller and its role there.
type TenantRole struct {
	ID          string   `json:"id"`
	Role        string   `json:"role"`
	Permissions []string `json:"permissions"`
}
