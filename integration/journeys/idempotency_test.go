package journeys

import (
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Issue 16, R-CRT-7: POST /runs with an Idempotency-Key. A retry with the same
// key from the same credential gets the first answer (status and run)
// without a second launch, even after a coordinator restart; another body
// with the same key is 422; concurrent duplicates launch once; another
// credential's key is its own.
func TestLaunchIdempotencyKey(t *testing.T) {
	f := setup(t, "yamux", integration.ProcOptions{})
	p := f.profile("codex")
	runs := func() int {
		var l apitypes.RunList
		f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs?limit=200", nil, &l)
		return len(l.Items)
	}
	launch := func(c *integration.Client, key string, req apitypes.LaunchRequest) integration.Response {
		t.Helper()
		r, err := c.Send(http.MethodPost, "/v1/m/sessions/runs", req, map[string]string{"Idempotency-Key": key})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	req := apitypes.LaunchRequest{ProviderProfileRef: p.Ref, WorkspaceRef: f.ws.Ref, Name: "once"}
	first := launch(f.operator, "key-1", req)
	if first.Status != http.StatusCreated {
		t.Fatalf("first launch: %d %s", first.Status, first.Body)
	}
	var a apitypes.Run
	first.JSON(t, &a)
	check := func(what string, r integration.Response) {
		t.Helper()
		var b apitypes.Run
		r.JSON(t, &b)
		if r.Status != first.Status || b.RunRef != a.RunRef || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s: got %d %s (replayed %q), want %d run %s replayed", what, r.Status, b.RunRef, r.Header.Get("Idempotent-Replayed"), first.Status, a.RunRef)
		}
	}
	check("a retry", launch(f.operator, "key-1", req))
	if n := runs(); n != 1 {
		t.Fatalf("runs after a retry: got %d, want 1", n)
	}
	other := req
	other.Name = "twice"
	if r := launch(f.operator, "key-1", other); r.Status != http.StatusUnprocessableEntity || r.ErrorCode() != "idempotency_key_reused" {
		t.Fatalf("another body: got %d %s, want 422 idempotency_key_reused", r.Status, r.Body)
	}
	if r := launch(f.operator, "bad key", req); r.Status != http.StatusBadRequest || r.ErrorCode() != "bad_idempotency_key" {
		t.Fatalf("a key with a space: got %d %s, want 400 bad_idempotency_key", r.Status, r.Body)
	}
	// The key survives a restart of the coordinator.
	f.env.RestartCoordinator()
	f.agent.AwaitConnected(wait)
	check("a retry after a restart", launch(f.operator, "key-1", req))

	// Another credential's key is its own.
	op2 := f.env.Client(f.env.Principal(integration.Tenant, store.RoleOperator, store.KindHuman))
	if r := launch(op2, "key-1", req); r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("another credential, same key: got %d %s, want a new launch", r.Status, r.Body)
	}
	// Concurrent duplicates launch once.
	before := runs()
	var wg sync.WaitGroup
	refs := make([]string, 6)
	for i := range refs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r, err := f.operator.Send(http.MethodPost, "/v1/m/sessions/runs", req, map[string]string{"Idempotency-Key": "key-2"})
			if err != nil || r.Status != http.StatusCreated {
				t.Errorf("concurrent launch %d: %v %d %s", i, err, r.Status, r.Body)
				return
			}
			var x apitypes.Run
			if err := jsonUnmarshal(r.Body, &x); err != nil {
				t.Error(err)
			}
			refs[i] = x.RunRef
		}()
	}
	wg.Wait()
	for i := range refs {
		if refs[i] != refs[0] {
			t.Fatalf("concurrent duplicates got runs %v, want one", refs)
		}
	}
	if n := runs(); n != before+1 {
		t.Fatalf("runs after 6 concurrent duplicates: got %d, want %d", n, before+1)
	}
}

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }
