package proto

// Replica-to-replica link (issue 24): coordinator replicas sharing one
// database forward calls for nodes whose tunnels another replica holds.
// The link is mutual TLS 1.3 (replica certificates from the fleet's CA)
// carrying yamux, with the tunnel's own framing, so that a forwarded call
// is the node's call byte for byte.
const (
	// OpReplicaForward opens a forwarded call: its header names the node;
	// the call's own header follows at once, and from then on the holding
	// replica splices the stream to a stream of the node's tunnel, both
	// ways, without reading it. When it does not hold the node it answers
	// the forward header itself with 503 CodeNodeNotHeld.
	OpReplicaForward = "replica.forward" // ReplicaForward, then the call

	// CodeNodeNotHeld: the replica asked to forward does not hold the
	// node's tunnel (any more); the asker looks its holder up again.
	CodeNodeNotHeld = "node_not_held"
)

// ReplicaForward names the node a forwarded call is for.
type ReplicaForward struct {
	NodeID string `json:"node_id"`
}
