package integration

import (
	"crypto/x509"
	"path/filepath"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/coordinator/coordd"
	"github.com/olivares-dev/olivares/shared/tunnel"
)

// A CA rotation never cuts nodes off: the next root reaches nodes in the
// bundle of their renewal, and after the promote the old root stays trusted
// for the certificates it signed.
func TestCARotation(t *testing.T) {
	t.Parallel()
	// The node certificate lives long enough to outlast a coordinator
	// restart under load (an agent renews at half its life, and an
	// expired node certificate is refused by design: a life of 3 s left a
	// restart 1.5 s before the node was cut off), and short enough that a
	// renewal comes within the test.
	const validity = 30 * time.Second
	env := NewEnv(t, Options{NodeCertValidity: validity})
	a := env.StartAgent(AgentOptions{Transport: tunnel.TransportYamux})
	a.AwaitConnected(10 * time.Second)
	oldPin := certs.Pin(env.Coord.Authority.Current)

	caDir := func(state string) string { return filepath.Join(state, coordd.CADir) }
	// The agent finds a coordinator back after a restart of D within
	// about 2D (R-TUN-4): the wait grows with the restart, which takes
	// seconds on a loaded machine, and a loaded machine's reconnect (a
	// backoff step, the TLS handshake with a fresh chain) took over 15 s
	// twice: the deadline leaves room for that, it is not a timing.
	restart := func(change func(state string)) time.Duration {
		start := time.Now()
		env.RestartCoordinatorWith(change)
		return 30*time.Second + 2*time.Since(start)
	}
	within := restart(func(state string) {
		ca, err := certs.LoadAuthority(caDir(state))
		if err != nil {
			t.Fatal(err)
		}
		if err := ca.Rotate(caDir(state), time.Now()); err != nil {
			t.Fatal(err)
		}
	})
	a.AwaitConnected(within)
	next := env.Coord.Authority.Next
	if next == nil {
		t.Fatal("no next root after rotate")
	}
	// Wait for a renewal that carries the two-root bundle.
	Await(t, validity, "the agent to trust the next root", func() bool {
		_, err := next.Verify(x509VerifyOpts(a))
		return err == nil
	})

	within = restart(func(state string) {
		ca, err := certs.LoadAuthority(caDir(state))
		if err != nil {
			t.Fatal(err)
		}
		if err := ca.Promote(caDir(state), time.Now()); err != nil {
			t.Fatal(err)
		}
	})
	if got := certs.Pin(env.Coord.Authority.Current); got == oldPin {
		t.Fatal("promote kept the old signer")
	}
	// The server certificate now chains to the new root; the node's
	// certificate may still be from the old one. Both sides accept.
	a.AwaitConnected(within)
}

func x509VerifyOpts(a *Agent) x509.VerifyOptions {
	return x509.VerifyOptions{Roots: a.TrustPool()}
}
