package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/auditchain"
)

// replicaCases (R-CFG-5) run writers on two stores that share one database, as two
// coordinator replicas do (Backend.Share). Each gets the pair.
var replicaCases = []struct {
	name string
	fn   func(t *testing.T, s [2]store.Store)
}{
	{"Replicas/EnrollRace", testReplicasEnrollRace},
	{"Replicas/AuditAppendRace", testReplicasAuditRace},
	{"Replicas/RunRevRace", testReplicasRunRevRace},
	{"Replicas/PinRace", testReplicasPinRace},
	{"Replicas/SigninRace", testReplicasSigninRace},
}

// race runs fn(replica, i) for n writers on each replica, all released at
// once, and waits for them.
func race(s [2]store.Store, n int, fn func(st store.Store, replica, i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for r := range 2 {
		for i := range n {
			wg.Go(func() {
				<-start
				fn(s[r], r, i)
			})
		}
	}
	close(start)
	wg.Wait()
}

// A join token is single use also when two coordinators take the same
// token at the same moment: one enrollment, every other attempt
// ErrTokenUsed, and both replicas see the one node.
func testReplicasEnrollRace(t *testing.T, s [2]store.Store) {
	ctx := t.Context()
	jt := newJoinToken("join-1", "n1", "t1")
	mustCreateJoinToken(t, s[0], jt)
	const n = 8
	var (
		mu     sync.Mutex
		ok     []int
		issued int
	)
	race(s, n, func(st store.Store, replica, i int) {
		_, err := st.Enroll(ctx, jt.Hash, t0, func(seen store.JoinToken) (store.Node, error) {
			mu.Lock()
			issued++
			mu.Unlock()
			nd := nodeFor(seen)
			nd.Hostname = fmt.Sprintf("replica-%d-%d", replica, i)
			return nd, nil
		})
		switch {
		case err == nil:
			mu.Lock()
			ok = append(ok, replica)
			mu.Unlock()
		case !errors.Is(err, store.ErrTokenUsed):
			t.Errorf("Enroll on replica %d: got %v, want nil or %v", replica, err, store.ErrTokenUsed)
		}
	})
	if len(ok) != 1 {
		t.Fatalf("successful Enrolls across two replicas: got %d, want 1", len(ok))
	}
	if issued != 1 {
		t.Errorf("issue called %d times, want once (a used token issues nothing)", issued)
	}
	for r, st := range s {
		nodes, err := st.ListNodes(ctx, "")
		if err != nil {
			t.Fatalf("ListNodes on replica %d: %v", r, err)
		}
		if len(nodes) != 1 || nodes[0].ID != "n1" {
			t.Errorf("nodes on replica %d: got %+v, want n1 only", r, nodes)
		}
	}
}

// Audit appends from two coordinators, through every path that appends
// (AppendAudit, a meta update's entry, a windowed read), stay one hash chain
// per tenant that auditchain verifies, with no seq taken twice or skipped.
func testReplicasAuditRace(t *testing.T, s [2]store.Store) {
	ctx := t.Context()
	tenants := []string{"t1", "t2"}
	for _, tn := range tenants {
		putRuns(t, s[0], tn, 1)
	}
	const n = 12
	race(s, n, func(st store.Store, replica, i int) {
		for _, tn := range tenants {
			ref := tn + "-r-000"
			at := t0.Add(time.Duration(i) * time.Second)
			var err error
			switch i % 3 {
			case 0:
				_, err = st.AppendAudit(ctx, auditEntry(tn, apitypes.AuditRunArchived, ref, at))
			case 1:
				_, err = st.UpdateRunMeta(ctx, ref, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
					m.Name = fmt.Sprintf("name-%d-%d", replica, i)
					e := auditEntry(tn, apitypes.AuditRunRenamed, ref, at)
					return &e, nil
				})
			case 2:
				e := auditEntry(tn, apitypes.AuditRunMessages, ref, at)
				e.Actor.CredentialID = fmt.Sprintf("cred-%d-%d", replica, i) // a reader of its own: always appended
				var ok bool
				ok, err = st.AppendAuditWindowed(ctx, e, 15*time.Minute)
				if err == nil && !ok {
					err = errors.New("a first windowed read was not appended")
				}
			}
			if err != nil {
				t.Errorf("replica %d writer %d, tenant %s: %v", replica, i, tn, err)
			}
		}
	})
	for _, tn := range tenants {
		for r, st := range s {
			var v auditchain.Verifier
			for _, e := range listAudit(t, st, store.AuditQuery{Tenant: tn, Limit: 7}) {
				if b := v.Add(e); b != nil {
					t.Fatalf("tenant %s read on replica %d: chain broken at seq %d: %s", tn, r, b.Seq, b.Reason)
				}
			}
			if v.Count() != 2*n {
				t.Errorf("tenant %s read on replica %d: %d entries, want %d", tn, r, v.Count(), 2*n)
			}
		}
	}
}

// Pushes of one run with increasing revs, split over two coordinators in any
// order, leave the highest rev, listed once.
func testReplicasRunRevRace(t *testing.T, s [2]store.Store) {
	ctx := t.Context()
	const n = 8
	race(s, n, func(st store.Store, replica, i int) {
		r := newRun("r-1", "t1", 0)
		r.Rev = uint64(2*i + replica + 1)
		r.State = apitypes.States[int(r.Rev)%len(apitypes.States)]
		if _, err := st.PutRun(ctx, r); err != nil {
			t.Errorf("PutRun(rev %d) on replica %d: %v", r.Rev, replica, err)
		}
	})
	for r, st := range s {
		got, err := st.GetRun(ctx, "r-1")
		if err != nil {
			t.Fatalf("GetRun on replica %d: %v", r, err)
		}
		if want := apitypes.States[(2*n)%len(apitypes.States)]; got.Rev != 2*n || got.State != want {
			t.Errorf("run on replica %d: got rev %d %s, want rev %d %s", r, got.Rev, got.State, 2*n, want)
		}
		refs, _ := listRefs(t, st, store.RunQuery{Tenant: "t1"})
		assertEqual(t, fmt.Sprintf("ListRuns on replica %d", r), refs, []string{"r-1"})
	}
}

// One owner pinning from two coordinators at once keeps at most MaxPins
// pins (R-PIN-3), and every pin kept is the one its writer wrote.
func testReplicasPinRace(t *testing.T, s [2]store.Store) {
	ctx := t.Context()
	const n = store.MaxPins
	refs := putRuns(t, s[0], "t1", 2*n)
	race(s, n, func(st store.Store, replica, i int) {
		ref := refs[replica*n+i]
		at := t0.Add(time.Duration(replica*n+i) * time.Second)
		if _, err := st.UpdateMarks(ctx, store.MarkKey{Tenant: "t1", Owner: "prn:a", RunRef: ref}, pin(at)); err != nil {
			t.Errorf("pin %s on replica %d: %v", ref, replica, err)
		}
	})
	for r, st := range s {
		pins, err := st.PinnedMarks(ctx, "t1", "prn:a")
		if err != nil {
			t.Fatalf("PinnedMarks on replica %d: %v", r, err)
		}
		if len(pins) != store.MaxPins {
			t.Errorf("pins on replica %d after %d concurrent pins: got %d, want %d", r, 2*n, len(pins), store.MaxPins)
		}
		for i := 1; i < len(pins); i++ {
			if pins[i].PinnedAt.Before(*pins[i-1].PinnedAt) {
				t.Errorf("pins on replica %d out of order at %d", r, i)
			}
		}
	}
}

// A console sign-in link is redeemed once also when two coordinators take
// it at the same moment; the losers leave no credential behind.
func testReplicasSigninRace(t *testing.T, s [2]store.Store) {
	ctx := t.Context()
	signinFixture(t, s[0])
	const n = 8
	var (
		mu  sync.Mutex
		won []string
	)
	race(s, n, func(st store.Store, replica, i int) {
		tok := fmt.Sprintf("session-%d-%d", replica, i)
		_, _, err := st.RedeemSigninLink(ctx, hash("link-1"), t0, sessionCred(tok))
		switch {
		case err == nil:
			mu.Lock()
			won = append(won, tok)
			mu.Unlock()
		case !errors.Is(err, store.ErrTokenUsed):
			t.Errorf("RedeemSigninLink on replica %d: got %v, want nil or %v", replica, err, store.ErrTokenUsed)
		}
	})
	if len(won) != 1 {
		t.Fatalf("redemptions across two replicas: got %d, want 1", len(won))
	}
	for r := range 2 {
		for i := range n {
			tok := fmt.Sprintf("session-%d-%d", r, i)
			_, _, err := s[1-r].PrincipalByCredential(ctx, hash(tok))
			if tok == won[0] && err != nil {
				t.Errorf("the winner's credential: %v", err)
			}
			if tok != won[0] && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("a loser's credential %s: got %v, want ErrNotFound", tok, err)
			}
		}
	}
}
