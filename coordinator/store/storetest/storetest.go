// Package storetest is the conformance suite that every store.Store
// implementation (bbolt now, PostgreSQL later) must pass.
//
// It uses only the store.Store interface and never reaches into an
// implementation, so a test that needs backend internals belongs beside that
// backend, not here.
package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Backend is a store implementation under test.
type Backend struct {
	// Open returns a new, empty store each time it is called. The suite
	// closes every store it opens (through t.Cleanup), so Close must be safe
	// to call more than once. Open may register its own cleanups, for
	// example to drop a database.
	Open func(t *testing.T) store.Store
	// Share returns another store on the data of s, as a second coordinator
	// sharing s's database opens it; the suite closes it. Nil when a
	// backend allows one opener only (bbolt's file lock): the cases of
	// several coordinators then run their writers on s alone.
	Share func(t *testing.T, s store.Store) store.Store
}

// Run runs the conformance suite against b.
//
// Behaviour the suite pins beyond the comments in store.go:
//   - Timestamps survive to the second; the suite never uses sub-second times,
//     and compares them with time.Time.Equal semantics (any location).
//   - A nil and an empty map or slice are the same value.
//   - Capabilities are compared as JSON values, not bytes.
//   - A token is expired when now is after ExpiresAt; now == ExpiresAt is still
//     valid.
//   - The error of Enroll's issue func and of UpdateNode's fn reach the caller
//     (errors.Is holds).
//   - After Close every method returns an error wrapping store.ErrClosed.
//   - Records are values: changing a map or slice passed in or returned never
//     changes what is stored.
//   - PutRun with a Rev equal to the stored one does not write. ErrConflict is
//     checked before Rev, so a foreign push is refused even when stale.
//   - RunRef ties in ListRuns order are broken in byte order; profile and
//     workspace names are ordered in byte order and compared exactly.
//   - A cursor page starts strictly after the last row of the page before:
//     rows written meanwhile never repeat a row, rows older than the cursor
//     are reached, and a page with a next cursor is never empty.
//   - An empty list may be nil or empty.
//   - Writers on several coordinators sharing one database (Share) behave
//     as writers on one: a join token is consumed once, a tenant's audit
//     entries form one chain, a run keeps its highest rev, an owner keeps
//     at most MaxPins pins.
func Run(t *testing.T, b Backend) {
	newStore := func(t *testing.T) store.Store {
		t.Helper()
		s := b.Open(t)
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, s store.Store)
	}{
		{"Tenant/PutGet", testTenantPutGet},
		{"Tenant/PutIdempotent", testTenantPutIdempotent},
		{"Tenant/GetUnknown", testTenantGetUnknown},
		{"Principal/Create", testPrincipalCreate},
		{"Principal/RolesRoundTrip", testPrincipalRolesRoundTrip},
		{"Principal/DuplicateID", testPrincipalDuplicateID},
		{"Principal/DuplicateHash", testPrincipalDuplicateHash},
		{"Principal/GetUnknown", testPrincipalGetUnknown},
		{"Credential/Add", testCredentialAdd},
		{"Credential/AddUnknownPrincipal", testCredentialAddUnknownPrincipal},
		{"Credential/AddDuplicateHash", testCredentialAddDuplicateHash},
		{"Credential/ByUnknownHash", testCredentialByUnknownHash},
		{"JoinToken/DuplicateHash", testJoinTokenDuplicateHash},
		{"Enroll/Success", testEnrollSuccess},
		{"Enroll/TokenUsed", testEnrollTokenUsed},
		{"Enroll/TokenExpired", testEnrollTokenExpired},
		{"Enroll/UnknownToken", testEnrollUnknownToken},
		{"Enroll/IssueError", testEnrollIssueError},
		{"Enroll/NodeExists", testEnrollNodeExists},
		{"Enroll/Concurrent", testEnrollConcurrent},
		{"Node/GetUnknown", testNodeGetUnknown},
		{"Node/List", testNodeList},
		{"Node/ListEmpty", testNodeListEmpty},
		{"Node/Update", testNodeUpdate},
		{"Node/UpdateFnError", testNodeUpdateFnError},
		{"Node/UpdateUnknown", testNodeUpdateUnknown},
		{"Node/UpdateConcurrent", testNodeUpdateConcurrent},
		{"Run/PutGet", testRunPutGet},
		{"Run/GetUnknown", testRunGetUnknown},
		{"Run/GetRuns", testRunGetRuns},
		{"Run/RevOrder", testRunRevOrder},
		{"Run/Conflict", testRunConflict},
		{"Run/CreatedAtMoves", testRunCreatedAtMoves},
		{"Run/PutConcurrent", testRunPutConcurrent},
		{"Run/PutBatch", testRunPutBatch},
		{"Run/ListFilters", testRunListFilters},
		{"Run/ListAttention", testRunListAttention},
		{"Webhooks", testWebhooks},
		{"Run/ListOrder", testRunListOrder},
		{"Run/ListDefaultLimit", testRunListDefaultLimit},
		{"Run/ListOffset", testRunListOffset},
		{"Run/ListCursor", testRunListCursor},
		{"Run/ListCursorWrites", testRunListCursorWrites},
		{"Run/ListCursorEnd", testRunListCursorEnd},
		{"Run/ListCursorFilters", testRunListCursorFilters},
		{"Run/ListBadCursor", testRunListBadCursor},
		{"Run/ListTenant", testRunListTenant},
		{"Usage/PutList", testUsagePutList},
		{"Usage/Latest", testUsageLatest},
		{"Usage/Refused", testUsageRefused},
		{"Usage/WithRuns", testUsageWithRuns},
		{"Continue/List", testContinueList},
		{"Profile/CreateGet", testProfileCreateGet},
		{"Profile/GetUnknown", func(t *testing.T, s store.Store) { testNamedGetUnknown(t, s, profileKind) }},
		{"Profile/DuplicateRef", func(t *testing.T, s store.Store) { testNamedDuplicateRef(t, s, profileKind) }},
		{"Profile/DuplicateName", func(t *testing.T, s store.Store) { testNamedDuplicateName(t, s, profileKind) }},
		{"Profile/List", func(t *testing.T, s store.Store) { testNamedList(t, s, profileKind) }},
		{"Workspace/CreateGet", testWorkspaceCreateGet},
		{"Workspace/GetUnknown", func(t *testing.T, s store.Store) { testNamedGetUnknown(t, s, workspaceKind) }},
		{"Workspace/DuplicateRef", func(t *testing.T, s store.Store) { testNamedDuplicateRef(t, s, workspaceKind) }},
		{"Workspace/DuplicateName", func(t *testing.T, s store.Store) { testNamedDuplicateName(t, s, workspaceKind) }},
		{"Workspace/List", func(t *testing.T, s store.Store) { testNamedList(t, s, workspaceKind) }},
		{"Copies/Principal", testCopiesPrincipal},
		{"Copies/Node", testCopiesNode},
		{"Copies/Run", testCopiesRun},
		{"Copies/Profile", testCopiesProfile},
		{"Close", testClose},
	}
	tests = append(tests, markCases...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newStore(t))
		})
	}
	for _, tt := range replicaCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := newStore(t)
			other := s
			if b.Share != nil {
				other = b.Share(t, s)
				t.Cleanup(func() { _ = other.Close() })
			}
			tt.fn(t, [2]store.Store{s, other})
		})
	}
}

// t0 is the suite's clock. Whole seconds, so that a backend that keeps only
// microseconds (PostgreSQL) round-trips it exactly.
var t0 = time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)

var errBoom = errors.New("storetest: boom")

// hash returns the lowercase hex SHA-256 of token, the form store keys take.
func hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func testTenantPutGet(t *testing.T, s store.Store) {
	ctx := t.Context()
	want := store.Tenant{ID: "t1", CreatedAt: t0}
	if err := s.PutTenant(ctx, want); err != nil {
		t.Fatalf("PutTenant: %v", err)
	}
	got, err := s.GetTenant(ctx, "t1")
	if err != nil {
		t.Fatalf("GetTenant: %v", err)
	}
	assertEqual(t, "tenant", normTenant(got), normTenant(want))
}

func testTenantPutIdempotent(t *testing.T, s store.Store) {
	ctx := t.Context()
	first := store.Tenant{ID: "t1", CreatedAt: t0}
	mustPutTenant(t, s, first)
	// A second put neither fails nor overwrites: "creates the tenant if it
	// does not exist".
	if err := s.PutTenant(ctx, store.Tenant{ID: "t1", CreatedAt: t0.Add(time.Hour)}); err != nil {
		t.Fatalf("second PutTenant: got %v, want nil", err)
	}
	got, err := s.GetTenant(ctx, "t1")
	if err != nil {
		t.Fatalf("GetTenant: %v", err)
	}
	assertEqual(t, "tenant after second put", normTenant(got), normTenant(first))
}

func testTenantGetUnknown(t *testing.T, s store.Store) {
	mustPutTenant(t, s, store.Tenant{ID: "t1", CreatedAt: t0})
	_, err := s.GetTenant(t.Context(), "t2")
	assertErrorIs(t, "GetTenant(unknown)", err, store.ErrNotFound)
}

func testPrincipalCreate(t *testing.T, s store.Store) {
	ctx := t.Context()
	p, c := newPrincipal("p1", "tok-1")
	if err := s.CreatePrincipal(ctx, p, c); err != nil {
		t.Fatalf("CreatePrincipal: %v", err)
	}
	got, err := s.GetPrincipal(ctx, "p1")
	if err != nil {
		t.Fatalf("GetPrincipal: %v", err)
	}
	assertEqual(t, "principal", normPrincipal(got), normPrincipal(p))

	gotP, gotC, err := s.PrincipalByCredential(ctx, c.Hash)
	if err != nil {
		t.Fatalf("PrincipalByCredential: %v", err)
	}
	assertEqual(t, "principal by credential", normPrincipal(gotP), normPrincipal(p))
	assertEqual(t, "credential", normCredential(gotC), normCredential(c))
}

func testPrincipalRolesRoundTrip(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, roles := range []map[string]string{
		nil,
		{"t1": store.RoleViewer},
		{"t1": store.RoleAdmin, "t2": store.RoleOperator, "t3": store.RoleViewer},
	} {
		id := fmt.Sprintf("p-%d", len(roles))
		p, c := newPrincipal(id, "tok-"+id)
		p.Roles = roles
		if err := s.CreatePrincipal(ctx, p, c); err != nil {
			t.Fatalf("CreatePrincipal(%s): %v", id, err)
		}
		got, err := s.GetPrincipal(ctx, id)
		if err != nil {
			t.Fatalf("GetPrincipal(%s): %v", id, err)
		}
		assertEqual(t, "roles of "+id, normMap(got.Roles), normMap(roles))
	}
}

func testPrincipalDuplicateID(t *testing.T, s store.Store) {
	ctx := t.Context()
	p, c := newPrincipal("p1", "tok-1")
	mustCreatePrincipal(t, s, p, c)

	p2, c2 := newPrincipal("p1", "tok-2")
	p2.Name = "impostor"
	err := s.CreatePrincipal(ctx, p2, c2)
	assertErrorIs(t, "CreatePrincipal(duplicate id)", err, store.ErrExists)

	// Nothing of the second call was written: its credential does not
	// resolve, and the principal is the first one.
	_, _, err = s.PrincipalByCredential(ctx, c2.Hash)
	assertErrorIs(t, "PrincipalByCredential(credential of failed create)", err, store.ErrNotFound)
	got, err := s.GetPrincipal(ctx, "p1")
	if err != nil {
		t.Fatalf("GetPrincipal: %v", err)
	}
	assertEqual(t, "principal after failed create", normPrincipal(got), normPrincipal(p))
}

func testPrincipalDuplicateHash(t *testing.T, s store.Store) {
	ctx := t.Context()
	p, c := newPrincipal("p1", "tok-1")
	mustCreatePrincipal(t, s, p, c)

	p2, c2 := newPrincipal("p2", "tok-1") // same token, new principal
	err := s.CreatePrincipal(ctx, p2, c2)
	assertErrorIs(t, "CreatePrincipal(duplicate hash)", err, store.ErrExists)

	// The new principal must not be left behind without a credential.
	_, err = s.GetPrincipal(ctx, "p2")
	assertErrorIs(t, "GetPrincipal(principal of failed create)", err, store.ErrNotFound)
	gotP, gotC, err := s.PrincipalByCredential(ctx, c.Hash)
	if err != nil {
		t.Fatalf("PrincipalByCredential: %v", err)
	}
	assertEqual(t, "principal by credential", normPrincipal(gotP), normPrincipal(p))
	assertEqual(t, "credential", normCredential(gotC), normCredential(c))
}

func testPrincipalGetUnknown(t *testing.T, s store.Store) {
	_, err := s.GetPrincipal(t.Context(), "nobody")
	assertErrorIs(t, "GetPrincipal(unknown)", err, store.ErrNotFound)
}

func testCredentialAdd(t *testing.T, s store.Store) {
	ctx := t.Context()
	p, c1 := newPrincipal("p1", "tok-1")
	mustCreatePrincipal(t, s, p, c1)
	c2 := store.Credential{Hash: hash("tok-2"), PrincipalID: "p1", Label: "laptop", CreatedAt: t0.Add(time.Minute)}
	if err := s.AddCredential(ctx, c2); err != nil {
		t.Fatalf("AddCredential: %v", err)
	}
	for _, c := range []store.Credential{c1, c2} {
		gotP, gotC, err := s.PrincipalByCredential(ctx, c.Hash)
		if err != nil {
			t.Fatalf("PrincipalByCredential(%s): %v", c.Label, err)
		}
		assertEqual(t, "principal by "+c.Label, normPrincipal(gotP), normPrincipal(p))
		assertEqual(t, "credential "+c.Label, normCredential(gotC), normCredential(c))
	}
}

func testCredentialAddUnknownPrincipal(t *testing.T, s store.Store) {
	ctx := t.Context()
	c := store.Credential{Hash: hash("tok-1"), PrincipalID: "nobody", CreatedAt: t0}
	err := s.AddCredential(ctx, c)
	assertErrorIs(t, "AddCredential(unknown principal)", err, store.ErrNotFound)
	_, _, err = s.PrincipalByCredential(ctx, c.Hash)
	assertErrorIs(t, "PrincipalByCredential(credential of failed add)", err, store.ErrNotFound)
}

func testCredentialAddDuplicateHash(t *testing.T, s store.Store) {
	ctx := t.Context()
	p1, c1 := newPrincipal("p1", "tok-1")
	mustCreatePrincipal(t, s, p1, c1)
	p2, c2 := newPrincipal("p2", "tok-2")
	mustCreatePrincipal(t, s, p2, c2)

	// p2 tries to take p1's token.
	err := s.AddCredential(ctx, store.Credential{Hash: c1.Hash, PrincipalID: "p2", Label: "stolen", CreatedAt: t0})
	assertErrorIs(t, "AddCredential(duplicate hash)", err, store.ErrExists)
	gotP, gotC, err := s.PrincipalByCredential(ctx, c1.Hash)
	if err != nil {
		t.Fatalf("PrincipalByCredential: %v", err)
	}
	assertEqual(t, "principal by credential", normPrincipal(gotP), normPrincipal(p1))
	assertEqual(t, "credential", normCredential(gotC), normCredential(c1))
}

func testCredentialByUnknownHash(t *testing.T, s store.Store) {
	p, c := newPrincipal("p1", "tok-1")
	mustCreatePrincipal(t, s, p, c)
	_, _, err := s.PrincipalByCredential(t.Context(), hash("tok-2"))
	assertErrorIs(t, "PrincipalByCredential(unknown)", err, store.ErrNotFound)
}

func testJoinTokenDuplicateHash(t *testing.T, s store.Store) {
	ctx := t.Context()
	jt := newJoinToken("join-1", "n1", "t1")
	mustCreateJoinToken(t, s, jt)
	dup := newJoinToken("join-1", "n-other", "t-other")
	err := s.CreateJoinToken(ctx, dup)
	assertErrorIs(t, "CreateJoinToken(duplicate hash)", err, store.ErrExists)

	// The stored token is still the first one.
	var seen store.JoinToken
	_, err = s.Enroll(ctx, jt.Hash, t0, func(got store.JoinToken) (store.Node, error) {
		seen = got
		return nodeFor(got), nil
	})
	if err != nil {
		t.Fatalf("Enroll: %v", err)
	}
	assertEqual(t, "token seen by issue", normJoinToken(seen), normJoinToken(jt))
}

func testEnrollSuccess(t *testing.T, s store.Store) {
	ctx := t.Context()
	jt := newJoinToken("join-1", "n1", "t1")
	mustCreateJoinToken(t, s, jt)

	calls := 0
	var want store.Node
	got, err := s.Enroll(ctx, jt.Hash, t0.Add(time.Minute), func(seen store.JoinToken) (store.Node, error) {
		calls++
		assertEqual(t, "token seen by issue", normJoinToken(seen), normJoinToken(jt))
		want = nodeFor(seen)
		return want, nil
	})
	if err != nil {
		t.Fatalf("Enroll: %v", err)
	}
	if calls != 1 {
		t.Errorf("issue called %d times, want 1", calls)
	}
	assertEqual(t, "enrolled node", normNode(got), normNode(want))
	stored, err := s.GetNode(ctx, "n1")
	if err != nil {
		t.Fatalf("GetNode: %v", err)
	}
	assertEqual(t, "stored node", normNode(stored), normNode(want))

	// The token is now used.
	_, err = s.Enroll(ctx, jt.Hash, t0.Add(2*time.Minute), mustNotIssue(t))
	assertErrorIs(t, "Enroll(used token)", err, store.ErrTokenUsed)
}

func testEnrollTokenUsed(t *testing.T, s store.Store) {
	ctx := t.Context()
	jt := newJoinToken("join-1", "n1", "t1")
	mustCreateJoinToken(t, s, jt)
	first := mustEnroll(t, s, jt.Hash, t0)

	_, err := s.Enroll(ctx, jt.Hash, t0.Add(time.Second), func(seen store.JoinToken) (store.Node, error) {
		t.Error("issue called for a used token")
		n := nodeFor(seen)
		n.Hostname = "second"
		return n, nil
	})
	assertErrorIs(t, "second Enroll", err, store.ErrTokenUsed)
	got, err := s.GetNode(ctx, "n1")
	if err != nil {
		t.Fatalf("GetNode: %v", err)
	}
	assertEqual(t, "node after second Enroll", normNode(got), normNode(first))
}

func testEnrollTokenExpired(t *testing.T, s store.Store) {
	ctx := t.Context()
	jt := newJoinToken("join-1", "n1", "t1") // expires at t0+1h
	mustCreateJoinToken(t, s, jt)

	_, err := s.Enroll(ctx, jt.Hash, jt.ExpiresAt.Add(time.Second), mustNotIssue(t))
	assertErrorIs(t, "Enroll(expired)", err, store.ErrTokenExpired)
	_, err = s.GetNode(ctx, "n1")
	assertErrorIs(t, "GetNode after expired Enroll", err, store.ErrNotFound)
	nodes, err := s.ListNodes(ctx, "")
	if err != nil {
		t.Fatalf("ListNodes: %v", err)
	}
	if len(nodes) != 0 {
		t.Errorf("ListNodes after expired Enroll: got %d nodes, want 0", len(nodes))
	}

	// The failed call did not consume the token: at exactly ExpiresAt (not
	// after it) the same token still enrolls.
	if _, err := s.Enroll(ctx, jt.Hash, jt.ExpiresAt, issueFromToken); err != nil {
		t.Fatalf("Enroll at ExpiresAt after a failed expired Enroll: got %v, want nil", err)
	}
}

func testEnrollUnknownToken(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreateJoinToken(t, s, newJoinToken("join-1", "n1", "t1"))
	_, err := s.Enroll(ctx, hash("join-2"), t0, mustNotIssue(t))
	assertErrorIs(t, "Enroll(unknown)", err, store.ErrNotFound)
	nodes, err := s.ListNodes(ctx, "")
	if err != nil {
		t.Fatalf("ListNodes: %v", err)
	}
	if len(nodes) != 0 {
		t.Errorf("ListNodes after unknown Enroll: got %d nodes, want 0", len(nodes))
	}
}

func testEnrollIssueError(t *testing.T, s store.Store) {
	ctx := t.Context()
	jt := newJoinToken("join-1", "n1", "t1")
	mustCreateJoinToken(t, s, jt)

	_, err := s.Enroll(ctx, jt.Hash, t0, func(store.JoinToken) (store.Node, error) {
		return store.Node{}, errBoom
	})
	assertErrorIs(t, "Enroll(issue fails)", err, errBoom)
	_, err = s.GetNode(ctx, "n1")
	assertErrorIs(t, "GetNode after failed issue", err, store.ErrNotFound)

	// The token is still usable.
	got := mustEnroll(t, s, jt.Hash, t0.Add(time.Second))
	if got.ID != "n1" {
		t.Errorf("node id: got %q, want %q", got.ID, "n1")
	}
}

func testEnrollNodeExists(t *testing.T, s store.Store) {
	ctx := t.Context()
	jt1 := newJoinToken("join-1", "n1", "t1")
	mustCreateJoinToken(t, s, jt1)
	first := mustEnroll(t, s, jt1.Hash, t0)

	jt2 := newJoinToken("join-2", "n2", "t1")
	mustCreateJoinToken(t, s, jt2)
	_, err := s.Enroll(ctx, jt2.Hash, t0, func(seen store.JoinToken) (store.Node, error) {
		n := nodeFor(seen)
		n.ID = "n1" // collides with the enrolled node
		n.Hostname = "collider"
		return n, nil
	})
	assertErrorIs(t, "Enroll(node id taken)", err, store.ErrExists)
	got, err := s.GetNode(ctx, "n1")
	if err != nil {
		t.Fatalf("GetNode: %v", err)
	}
	assertEqual(t, "existing node", normNode(got), normNode(first))

	// jt2 was not consumed.
	if got := mustEnroll(t, s, jt2.Hash, t0); got.ID != "n2" {
		t.Errorf("node id: got %q, want %q", got.ID, "n2")
	}
}

func testEnrollConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	jt := newJoinToken("join-1", "n1", "t1")
	mustCreateJoinToken(t, s, jt)

	const n = 16
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		errs  = make([]error, n)
	)
	for i := range n {
		wg.Go(func() {
			<-start
			_, errs[i] = s.Enroll(ctx, jt.Hash, t0, issueFromToken)
		})
	}
	close(start)
	wg.Wait()

	ok := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, store.ErrTokenUsed):
		default:
			t.Errorf("Enroll #%d: got %v, want nil or %v", i, err, store.ErrTokenUsed)
		}
	}
	if ok != 1 {
		t.Errorf("successful concurrent Enrolls: got %d, want 1", ok)
	}
	nodes, err := s.ListNodes(ctx, "")
	if err != nil {
		t.Fatalf("ListNodes: %v", err)
	}
	if len(nodes) != 1 {
		t.Errorf("nodes after concurrent Enroll: got %d, want 1", len(nodes))
	}
}

func testNodeGetUnknown(t *testing.T, s store.Store) {
	_, err := s.GetNode(t.Context(), "nope")
	assertErrorIs(t, "GetNode(unknown)", err, store.ErrNotFound)
}

func testNodeList(t *testing.T, s store.Store) {
	ctx := t.Context()
	// Enrolled out of order; ids are plain lowercase ASCII so that "ordered by
	// id" means the same under any collation.
	for _, n := range []struct{ id, tenant string }{
		{"n-c", "t-a"}, {"n-b", "t-b"}, {"n-a", "t-a"}, {"n-d", "t-b"}, {"n-e", "t-a"},
	} {
		jt := newJoinToken("join-"+n.id, n.id, n.tenant)
		mustCreateJoinToken(t, s, jt)
		mustEnroll(t, s, jt.Hash, t0)
	}
	for _, tt := range []struct {
		tenant string
		want   []string
	}{
		{"t-a", []string{"n-a", "n-c", "n-e"}},
		{"t-b", []string{"n-b", "n-d"}},
		{"", []string{"n-a", "n-b", "n-c", "n-d", "n-e"}},
		{"t-none", nil},
	} {
		nodes, err := s.ListNodes(ctx, tt.tenant)
		if err != nil {
			t.Fatalf("ListNodes(%q): %v", tt.tenant, err)
		}
		var got []string
		for _, n := range nodes {
			got = append(got, n.ID)
			if tt.tenant != "" && n.Tenant != tt.tenant {
				t.Errorf("ListNodes(%q): node %s has tenant %q", tt.tenant, n.ID, n.Tenant)
			}
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ListNodes(%q): got %v, want %v", tt.tenant, got, tt.want)
		}
	}
	// Listed records are complete, not just ids.
	nodes, err := s.ListNodes(ctx, "t-b")
	if err != nil {
		t.Fatalf("ListNodes: %v", err)
	}
	one, err := s.GetNode(ctx, "n-b")
	if err != nil {
		t.Fatalf("GetNode: %v", err)
	}
	if len(nodes) > 0 {
		assertEqual(t, "listed node", normNode(nodes[0]), normNode(one))
	}
}

func testNodeListEmpty(t *testing.T, s store.Store) {
	nodes, err := s.ListNodes(t.Context(), "")
	if err != nil {
		t.Fatalf("ListNodes: %v", err)
	}
	if len(nodes) != 0 {
		t.Errorf("ListNodes on an empty store: got %d nodes, want 0", len(nodes))
	}
}

func testNodeUpdate(t *testing.T, s store.Store) {
	ctx := t.Context()
	jt := newJoinToken("join-1", "n1", "t1")
	mustCreateJoinToken(t, s, jt)
	before := mustEnroll(t, s, jt.Hash, t0)

	want := before
	want.Hostname = "renamed"
	want.CertSerial = "0bad"
	want.CertNotAfter = t0.Add(48 * time.Hour)
	want.RevokedAt = t0.Add(time.Hour)
	want.Labels = map[string]string{"zone": "b", "gpu": "yes"}
	want.Capabilities = []byte(`{"exec":true,"pty":false}`)
	got, err := s.UpdateNode(ctx, "n1", func(n *store.Node) error {
		assertEqual(t, "node seen by fn", normNode(*n), normNode(before))
		n.Hostname = want.Hostname
		n.CertSerial = want.CertSerial
		n.CertNotAfter = want.CertNotAfter
		n.RevokedAt = want.RevokedAt
		n.Labels = map[string]string{"zone": "b", "gpu": "yes"}
		n.Capabilities = []byte(`{"exec":true,"pty":false}`)
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateNode: %v", err)
	}
	assertEqual(t, "returned node", normNode(got), normNode(want))
	stored, err := s.GetNode(ctx, "n1")
	if err != nil {
		t.Fatalf("GetNode: %v", err)
	}
	assertEqual(t, "stored node", normNode(stored), normNode(want))
}

func testNodeUpdateFnError(t *testing.T, s store.Store) {
	ctx := t.Context()
	jt := newJoinToken("join-1", "n1", "t1")
	mustCreateJoinToken(t, s, jt)
	before := mustEnroll(t, s, jt.Hash, t0)

	_, err := s.UpdateNode(ctx, "n1", func(n *store.Node) error {
		n.Hostname = "half-written"
		n.Labels["zone"] = "half-written"
		return errBoom
	})
	assertErrorIs(t, "UpdateNode(fn fails)", err, errBoom)
	got, err := s.GetNode(ctx, "n1")
	if err != nil {
		t.Fatalf("GetNode: %v", err)
	}
	assertEqual(t, "node after aborted update", normNode(got), normNode(before))
}

func testNodeUpdateUnknown(t *testing.T, s store.Store) {
	_, err := s.UpdateNode(t.Context(), "nope", func(*store.Node) error {
		t.Error("fn called for an unknown node")
		return nil
	})
	assertErrorIs(t, "UpdateNode(unknown)", err, store.ErrNotFound)
}

func testNodeUpdateConcurrent(t *testing.T, s store.Store) {
	ctx := t.Context()
	jt := newJoinToken("join-1", "n1", "t1")
	mustCreateJoinToken(t, s, jt)
	mustEnroll(t, s, jt.Hash, t0)

	// Read-modify-write must be atomic: 16 concurrent appends all land.
	const n = 16
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := s.UpdateNode(ctx, "n1", func(nd *store.Node) error {
				if nd.Labels == nil {
					nd.Labels = map[string]string{}
				}
				nd.Labels[fmt.Sprintf("w%02d", i)] = "x"
				return nil
			})
			if err != nil {
				t.Errorf("UpdateNode #%d: %v", i, err)
			}
		})
	}
	wg.Wait()
	got, err := s.GetNode(ctx, "n1")
	if err != nil {
		t.Fatalf("GetNode: %v", err)
	}
	for i := range n {
		if _, ok := got.Labels[fmt.Sprintf("w%02d", i)]; !ok {
			t.Errorf("label w%02d lost by a concurrent UpdateNode", i)
		}
	}
}

func testCopiesPrincipal(t *testing.T, s store.Store) {
	ctx := t.Context()
	p, c := newPrincipal("p1", "tok-1")
	want := normPrincipal(p)
	mustCreatePrincipal(t, s, p, c)
	p.Roles["t1"] = "mutated-input" // the caller's map after the call

	got, err := s.GetPrincipal(ctx, "p1")
	if err != nil {
		t.Fatalf("GetPrincipal: %v", err)
	}
	assertEqual(t, "principal after mutating the input", normPrincipal(got), want)
	got.Roles["t1"] = "mutated-output"
	got.Roles["t9"] = store.RoleAdmin

	got, _, err = s.PrincipalByCredential(ctx, c.Hash)
	if err != nil {
		t.Fatalf("PrincipalByCredential: %v", err)
	}
	assertEqual(t, "principal after mutating a result", normPrincipal(got), want)
	got.Roles["t1"] = "mutated-output"
	got, err = s.GetPrincipal(ctx, "p1")
	if err != nil {
		t.Fatalf("GetPrincipal: %v", err)
	}
	assertEqual(t, "principal after mutating a result", normPrincipal(got), want)
}

func testCopiesNode(t *testing.T, s store.Store) {
	ctx := t.Context()
	jt := newJoinToken("join-1", "n1", "t1")
	jt.Labels = map[string]string{"zone": "a"}
	mustCreateJoinToken(t, s, jt)
	jt.Labels["zone"] = "mutated-token-input"

	var issued store.Node
	enrolled, err := s.Enroll(ctx, jt.Hash, t0, func(seen store.JoinToken) (store.Node, error) {
		if seen.Labels["zone"] != "a" {
			t.Errorf("token label seen by issue: got %q, want %q", seen.Labels["zone"], "a")
		}
		issued = nodeFor(seen)
		return issued, nil
	})
	if err != nil {
		t.Fatalf("Enroll: %v", err)
	}
	want := normNode(issued) // a deep copy: what the store must keep

	// Mutate everything the caller could still hold.
	issued.Labels["zone"] = "mutated-issue"
	issued.Capabilities[2] = 'X'
	enrolled.Labels["zone"] = "mutated-enroll"
	enrolled.Capabilities[2] = 'X'
	check := func(what string) {
		t.Helper()
		got, err := s.GetNode(ctx, "n1")
		if err != nil {
			t.Fatalf("GetNode: %v", err)
		}
		assertEqual(t, what, normNode(got), want)
	}
	check("node after mutating Enroll's input and result")

	got, err := s.GetNode(ctx, "n1")
	if err != nil {
		t.Fatalf("GetNode: %v", err)
	}
	got.Labels["zone"] = "mutated-get"
	got.Capabilities[2] = 'X'
	check("node after mutating GetNode's result")

	nodes, err := s.ListNodes(ctx, "t1")
	if err != nil || len(nodes) != 1 {
		t.Fatalf("ListNodes: got %d nodes, %v; want 1, nil", len(nodes), err)
	}
	nodes[0].Labels["zone"] = "mutated-list"
	nodes[0].Capabilities[2] = 'X'
	check("node after mutating ListNodes' result")

	var kept *store.Node
	updated, err := s.UpdateNode(ctx, "n1", func(n *store.Node) error {
		kept = n
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateNode: %v", err)
	}
	kept.Labels["zone"] = "mutated-fn-arg"
	updated.Labels["zone"] = "mutated-update"
	updated.Capabilities[2] = 'X'
	check("node after mutating UpdateNode's argument and result")
}

func testClose(t *testing.T, s store.Store) {
	ctx := t.Context()
	p, c := newPrincipal("p1", "tok-1")
	mustCreatePrincipal(t, s, p, c)
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	noIssue := mustNotIssue(t)
	calls := map[string]func() error{
		"PutTenant": func() error { return s.PutTenant(ctx, store.Tenant{ID: "t1", CreatedAt: t0}) },
		"GetTenant": func() error { _, err := s.GetTenant(ctx, "t1"); return err },
		"CreatePrincipal": func() error {
			p, c := newPrincipal("p2", "tok-2")
			return s.CreatePrincipal(ctx, p, c)
		},
		"AddCredential": func() error {
			return s.AddCredential(ctx, store.Credential{Hash: hash("tok-3"), PrincipalID: "p1", CreatedAt: t0})
		},
		"GetPrincipal":          func() error { _, err := s.GetPrincipal(ctx, "p1"); return err },
		"PrincipalByCredential": func() error { _, _, err := s.PrincipalByCredential(ctx, c.Hash); return err },
		"CreateJoinToken":       func() error { return s.CreateJoinToken(ctx, newJoinToken("join-1", "n1", "t1")) },
		"Enroll":                func() error { _, err := s.Enroll(ctx, hash("join-1"), t0, noIssue); return err },
		"GetNode":               func() error { _, err := s.GetNode(ctx, "n1"); return err },
		"ListNodes":             func() error { _, err := s.ListNodes(ctx, ""); return err },
		"UpdateNode": func() error {
			_, err := s.UpdateNode(ctx, "n1", func(*store.Node) error { return nil })
			return err
		},
		"PutRun":   func() error { _, err := s.PutRun(ctx, newRun("r-1", "t1", 0)); return err },
		"GetRun":   func() error { _, err := s.GetRun(ctx, "r-1"); return err },
		"GetRuns":  func() error { _, err := s.GetRuns(ctx, []string{"r-1"}); return err },
		"ListRuns": func() error { _, _, err := s.ListRuns(ctx, store.RunQuery{Tenant: "t1"}); return err },
		"CreateProfile": func() error {
			return s.CreateProfile(ctx, apitypes.Profile{Ref: "pp-1", Tenant: "t1", NodeID: "n1", Tool: "claude", Name: "a", CreatedAt: t0})
		},
		"GetProfile":   func() error { _, err := s.GetProfile(ctx, "pp-1"); return err },
		"ListProfiles": func() error { _, err := s.ListProfiles(ctx, "t1"); return err },
		"CreateWorkspace": func() error {
			return s.CreateWorkspace(ctx, apitypes.Workspace{Ref: "ws-1", Tenant: "t1", NodeID: "n1", Name: "a", Path: "/a", CreatedAt: t0})
		},
		"GetWorkspace":   func() error { _, err := s.GetWorkspace(ctx, "ws-1"); return err },
		"ListWorkspaces": func() error { _, err := s.ListWorkspaces(ctx, "t1"); return err },
	}
	for name, call := range calls {
		assertErrorIs(t, name+" after Close", call(), store.ErrClosed)
	}
	// A second Close is harmless: nil, or ErrClosed.
	if err := s.Close(); err != nil && !errors.Is(err, store.ErrClosed) {
		t.Errorf("second Close: got %v, want nil or %v", err, store.ErrClosed)
	}
}

// Fixtures.

func newPrincipal(id, token string) (store.Principal, store.Credential) {
	p := store.Principal{
		ID:        id,
		Name:      "Name of " + id,
		Kind:      store.KindHuman,
		Roles:     map[string]string{"t1": store.RoleOperator},
		CreatedAt: t0,
	}
	c := store.Credential{Hash: hash(token), PrincipalID: id, Label: "console", CreatedAt: t0}
	return p, c
}

// newJoinToken returns a token that is valid from t0 for one hour.
func newJoinToken(token, nodeID, tenant string) store.JoinToken {
	return store.JoinToken{
		Hash:      hash(token),
		NodeID:    nodeID,
		Tenant:    tenant,
		Labels:    map[string]string{"zone": "a"},
		CreatedAt: t0,
		ExpiresAt: t0.Add(time.Hour),
	}
}

// nodeFor is what a well-behaved issue func builds from a token.
func nodeFor(jt store.JoinToken) store.Node {
	labels := make(map[string]string, len(jt.Labels))
	for k, v := range jt.Labels {
		labels[k] = v
	}
	return store.Node{
		ID:           jt.NodeID,
		Tenant:       jt.Tenant,
		Labels:       labels,
		Hostname:     "host-" + jt.NodeID,
		EnrolledAt:   t0,
		CertSerial:   "01",
		CertNotAfter: t0.Add(24 * time.Hour),
		AgentVersion: "0.1.0",
		Capabilities: []byte(`{"exec":true}`),
	}
}

func issueFromToken(jt store.JoinToken) (store.Node, error) { return nodeFor(jt), nil }

func mustNotIssue(t *testing.T) func(store.JoinToken) (store.Node, error) {
	return func(jt store.JoinToken) (store.Node, error) {
		t.Errorf("issue called for token %s", jt.NodeID)
		return nodeFor(jt), nil
	}
}

func mustPutTenant(t *testing.T, s store.Store, tn store.Tenant) {
	t.Helper()
	if err := s.PutTenant(t.Context(), tn); err != nil {
		t.Fatalf("PutTenant(%s): %v", tn.ID, err)
	}
}

func mustCreatePrincipal(t *testing.T, s store.Store, p store.Principal, c store.Credential) {
	t.Helper()
	if err := s.CreatePrincipal(t.Context(), p, c); err != nil {
		t.Fatalf("CreatePrincipal(%s): %v", p.ID, err)
	}
}

func mustCreateJoinToken(t *testing.T, s store.Store, jt store.JoinToken) {
	t.Helper()
	if err := s.CreateJoinToken(t.Context(), jt); err != nil {
		t.Fatalf("CreateJoinToken(%s): %v", jt.NodeID, err)
	}
}

func mustEnroll(t *testing.T, s store.Store, tokenHash string, now time.Time) store.Node {
	t.Helper()
	n, err := s.Enroll(t.Context(), tokenHash, now, issueFromToken)
	if err != nil {
		t.Fatalf("Enroll: %v", err)
	}
	return n
}

// Comparison. Records are normalised so that backends may differ in time
// location, nil-versus-empty and JSON formatting without failing the suite.

func normTenant(tn store.Tenant) store.Tenant {
	tn.CreatedAt = normTime(tn.CreatedAt)
	return tn
}

func normPrincipal(p store.Principal) store.Principal {
	p.Roles = normMap(p.Roles)
	p.CreatedAt = normTime(p.CreatedAt)
	return p
}

func normCredential(c store.Credential) store.Credential {
	c.CreatedAt = normTime(c.CreatedAt)
	return c
}

func normJoinToken(jt store.JoinToken) store.JoinToken {
	jt.Labels = normMap(jt.Labels)
	jt.CreatedAt = normTime(jt.CreatedAt)
	jt.ExpiresAt = normTime(jt.ExpiresAt)
	jt.UsedAt = normTime(jt.UsedAt)
	return jt
}

func normNode(n store.Node) store.Node {
	n.Labels = normMap(n.Labels)
	n.EnrolledAt = normTime(n.EnrolledAt)
	n.CertNotAfter = normTime(n.CertNotAfter)
	n.RevokedAt = normTime(n.RevokedAt)
	n.Capabilities = normJSON(n.Capabilities)
	return n
}

func normTime(ts time.Time) time.Time {
	if ts.IsZero() {
		return time.Time{}
	}
	return ts.UTC()
}

// normMap returns a copy of m, nil when empty.
func normMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// normJSON re-encodes b canonically (sorted keys, no spaces), nil when empty;
// bytes that are not JSON are copied as they are.
func normJSON(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return append([]byte(nil), b...)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return append([]byte(nil), b...)
	}
	return out
}

func assertEqual[T any](t *testing.T, what string, got, want T) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\ngot  %+v\nwant %+v", what, got, want)
	}
}

func assertErrorIs(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s: got error %v, want %v", what, err, want)
	}
}
