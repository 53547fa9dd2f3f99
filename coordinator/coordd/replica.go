package coordd

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/olivares-dev/olivares/shared/logging"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/certs"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/vault"
	"github.com/olivares-dev/olivares/shared/tunnel"
)

// ReplicaIDFile keeps the replica id made on first start when
// replica.id is not set.
const ReplicaIDFile = "replica-id"

// Names of the key material replicas must share, as recorded in the
// database (cluster_keys).
const (
	clusterKeyCA    = "ca"
	clusterKeyVault = "vault"
)

// replicaID is replica.id, or the id kept in the state dir.
func replicaID(cfg Config) (string, error) {
	if cfg.Replica.ID != "" {
		return cfg.Replica.ID, nil
	}
	path := filepath.Join(cfg.StateDir, ReplicaIDFile)
	b, err := os.ReadFile(path)
	if err == nil {
		id := strings.TrimSpace(string(b))
		if !validReplicaID(id) {
			return "", fmt.Errorf("%s holds %q, not a replica id; delete it (a new id is made) or set replica.id", path, id)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	id := "replica-" + hex.EncodeToString(r[:])
	return id, certs.WriteFileAtomic(path, []byte(id+"\n"), 0o600)
}

// checkSharedKeys refuses to serve with a CA or a vault key that is not
// the one the other replicas of the database use: nodes enrolled on one
// replica must be trusted by all, and a secret sealed on one must open on
// all. The operator distributes STATE_DIR/ca and STATE_DIR/vault.key to
// every replica (README, "Running more than one coordinator"). The CA
// matches when this replica's roots and the recorded ones share a root,
// which a rotation (rotate, then promote, on each replica) keeps true.
func checkSharedKeys(ctx context.Context, reps store.Replicas, a *certs.Authority, caCreated bool, v *vault.Vault, vaultCreated bool, stateDir string) error {
	pins := make([]string, 0, 2)
	for _, r := range a.Roots() {
		pins = append(pins, certs.Pin(r))
	}
	slices.Sort(pins)
	ours := strings.Join(pins, ",")
	stored, err := reps.ClusterKey(ctx, clusterKeyCA, ours)
	if err != nil {
		return fmt.Errorf("check the CA against the database: %w", err)
	}
	shared := false
	for _, p := range strings.Split(stored, ",") {
		shared = shared || slices.Contains(pins, p)
	}
	if !shared {
		if caCreated {
			// Made a moment ago by this start: nothing used it.
			os.RemoveAll(filepath.Join(stateDir, CADir))
		}
		return fmt.Errorf("this coordinator's CA (%s) is not the one the coordinators sharing this database use (%s): copy STATE_DIR/%s and STATE_DIR/%s from a running replica into %s, then start again",
			ours, stored, CADir, vault.KeyFile, stateDir)
	}
	if stored != ours {
		// A rotation moved on here: record the newer set.
		if err := reps.SetClusterKey(ctx, clusterKeyCA, ours); err != nil {
			return fmt.Errorf("record the CA in the database: %w", err)
		}
	}
	fp := v.Fingerprint()
	stored, err = reps.ClusterKey(ctx, clusterKeyVault, fp)
	if err != nil {
		return fmt.Errorf("check the vault key against the database: %w", err)
	}
	if stored != fp {
		if vaultCreated {
			os.Remove(filepath.Join(stateDir, vault.KeyFile))
		}
		return fmt.Errorf("this coordinator's vault key (%s) is not the one the coordinators sharing this database use (%s): copy STATE_DIR/%s from a running replica into %s, then start again",
			fp, stored, vault.KeyFile, stateDir)
	}
	return nil
}

// startReplica listens on the replica link, registers this replica and
// runs its heartbeat, all before the tunnel listeners accept anything.
func (c *Coordinator) startReplica(ctx context.Context) error {
	if c.replicas == nil {
		return nil
	}
	ln, err := net.Listen("tcp", c.cfg.Replica.Listen)
	if err != nil {
		return fmt.Errorf("replica listen %s: %w", c.cfg.Replica.Listen, err)
	}
	adv := c.cfg.Replica.Advertise
	if adv == "" {
		adv = ln.Addr().String()
		if host, _, _ := net.SplitHostPort(adv); net.ParseIP(host).IsUnspecified() {
			ln.Close()
			return fmt.Errorf("replica.listen %s names no host other replicas can dial: set replica.advertise", c.cfg.Replica.Listen)
		}
	}
	c.Fleet.SetRelayAddr(adv)
	c.relay = tunnel.ListenTCP(ln, tunnel.TCPListenerConfig{TLS: c.Fleet.RelayTLSConfig(), OnHandshakeError: func(err error) {
		c.log.Warn("replica link handshake refused", logging.Err(err))
	}})
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	err = c.Fleet.RegisterReplica(rctx)
	cancel()
	if err != nil {
		return err
	}
	rl := c.relay
	c.serve(func() error { return c.Fleet.ServeRelay(ctx, rl) })
	c.serve(func() error { c.Fleet.RunReplica(ctx); return nil })
	c.serve(func() error { c.API.FollowReplicas(ctx, c.replicas); return nil })
	return nil
}

// replicaCert is the current replica certificate (reissued by Reload).
func (c *Coordinator) replicaCert() *tls.Certificate { return c.certs.replica.Load() }

// issueReplicaCert issues this replica's certificate from the CA.
func (c *Coordinator) issueReplicaCert() error {
	if c.replicas == nil {
		return nil
	}
	rc, err := c.Authority.IssueReplica(c.replicaID, time.Now(), certs.ServerValidity)
	if err != nil {
		return err
	}
	c.certs.replica.Store(&rc)
	return nil
}

// ReplicaID is this coordinator's replica id, "" on bbolt.
func (c *Coordinator) ReplicaID() string { return c.replicaID }

// RelayAddr is the replica link's address, "" when not a replica.
func (c *Coordinator) RelayAddr() string {
	if c.relay == nil {
		return ""
	}
	return c.relay.Addr().String()
}
