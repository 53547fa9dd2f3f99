package api

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// TestStalledAttention (R-ATTN-6, R-ATTN-4, R-NOTIF-2): a running row that
// carries stalled_since is attention stalled in the list and its filter,
// and a webhook that takes stalled gets one delivery; the next row without
// it (the turn wrote again) is no longer stalled.
func TestStalledAttention(t *testing.T) {
	s, st := newTestServer(t, allowLoopback(t))
	t.Cleanup(s.Close)
	admin := principal(t, st, "admin", map[string]string{"t1": store.RoleAdmin})
	rc := newReceiver(t)
	rec := doJSON(t, s, http.MethodPost, Base+"/webhooks", admin, `{"url":"`+rc.srv.URL+`","reasons":["stalled"]}`)
	var hook apitypes.Webhook
	if json.Unmarshal(rec.Body.Bytes(), &hook); rec.Code != http.StatusCreated {
		t.Fatalf("POST /webhooks with reason stalled: %d %s", rec.Code, rec.Body)
	}
	rc.secret = hook.Secret

	t0 := time.Date(2026, 12, 6, 3, 0, 0, 0, time.UTC)
	row := func(rev uint64, stalled *time.Time) apitypes.Run {
		return apitypes.Run{RunRef: "run_s", Tenant: "t1", NodeID: "n1", State: apitypes.StateRunning, Driver: "codex", Generation: 1,
			Isolation: apitypes.IsolationNative, ProviderProfileRef: "pp", CreatedAt: t0, Rev: rev, RingFirst: 1, RingLast: rev, StalledSince: stalled}
	}
	list := func() []apitypes.Run {
		t.Helper()
		rec := doJSON(t, s, http.MethodGet, Base+"/runs?attention=stalled", admin, "")
		var l apitypes.RunList
		if json.Unmarshal(rec.Body.Bytes(), &l); rec.Code != http.StatusOK {
			t.Fatalf("GET /runs?attention=stalled: %d %s", rec.Code, rec.Body)
		}
		return l.Items
	}
	pushRow(t, s, row(1, nil))
	if l := list(); len(l) != 0 {
		t.Fatalf("a running run that writes is listed stalled: %+v", l)
	}
	at := t0.Add(10 * time.Minute)
	pushRow(t, s, row(2, &at))
	if l := list(); len(l) != 1 || l[0].Attention == nil || *l[0].Attention != apitypes.AttentionStalled || l[0].StalledSince == nil {
		t.Fatalf("GET /runs?attention=stalled: %+v, want run_s stalled", l)
	}
	s.notify.wg.Wait()
	if got := rc.payloads(); len(got) != 1 || got[0].Attention != apitypes.AttentionStalled {
		t.Fatalf("deliveries %+v, want one stalled", got)
	}
	pushRow(t, s, row(3, nil))
	if l := list(); len(l) != 0 {
		t.Fatalf("after new output the run is still listed stalled: %+v", l)
	}
}
