package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// testWebhooks pins the webhook store (R-NOTIF-1, R-NOTIF-5, R-NOTIF-7): a
// hook is created and deleted with its audit entry, listed per tenant, its
// delivery log keeps each delivery once (an attempt replaces it), newest
// first, at most store.MaxDeliveries, and goes with the hook.
func testWebhooks(t *testing.T, s store.Store) {
	ctx := t.Context()
	audit := func(tenant, event string) apitypes.AuditEntry {
		return apitypes.AuditEntry{At: t0, Tenant: tenant, Actor: apitypes.AuditActor{CredentialID: "c", Kind: apitypes.ActorHuman}, Event: event}
	}
	w1 := store.Webhook{ID: "wh_1", Tenant: "t1", URL: "https://example.test/a", Secret: "s1", Reasons: []string{"needs_input"}, CreatedAt: t0}
	w2 := store.Webhook{ID: "wh_2", Tenant: "t1", URL: "https://example.test/b", Secret: "s2", CreatedAt: t0}
	// R-NOTIF-11: act_as and the action URLs' base are kept with the
	// secret that signs them.
	w3 := store.Webhook{ID: "wh_3", Tenant: "t2", URL: "https://example.test/c", Secret: "s3", CreatedAt: t0,
		ActAs: "prn_olga", ActionBase: "https://olivares.example"}
	for _, w := range []store.Webhook{w2, w1, w3} {
		if err := s.CreateWebhook(ctx, w, audit(w.Tenant, apitypes.AuditWebhookCreated)); err != nil {
			t.Fatalf("CreateWebhook(%s): %v", w.ID, err)
		}
	}
	if err := s.CreateWebhook(ctx, w1, audit("t1", apitypes.AuditWebhookCreated)); !errors.Is(err, store.ErrExists) {
		t.Errorf("CreateWebhook(a taken id): got %v, want ErrExists", err)
	}
	// A person's push subscription keeps its kind, owner and keys.
	push := store.Webhook{ID: "wh_0push", Tenant: "t2", Kind: store.KindWebPush, Owner: "prn:p1", URL: "https://push.example/x",
		P256dh: "BPk", Auth: "au", CreatedAt: t0}
	if err := s.CreateWebhook(ctx, push, audit("t2", apitypes.AuditPushSubscribed)); err != nil {
		t.Fatal(err)
	}
	if g, err := s.GetWebhook(ctx, push.ID); err != nil || g.Kind != push.Kind || g.Owner != push.Owner || g.P256dh != "BPk" || g.Auth != "au" {
		t.Errorf("GetWebhook(push): got %+v, %v", g, err)
	}
	got, err := s.ListWebhooks(ctx, "t1")
	if err != nil || len(got) != 2 || got[0].ID != "wh_1" || got[1].ID != "wh_2" || got[0].Secret != "s1" || len(got[0].Reasons) != 1 {
		t.Errorf("ListWebhooks(t1): got %+v, %v; want wh_1 (with its secret and reasons), wh_2", got, err)
	}
	if g, err := s.GetWebhook(ctx, "wh_3"); err != nil || g.Tenant != "t2" || g.URL != w3.URL || g.Secret != "s3" || g.ActAs != w3.ActAs || g.ActionBase != w3.ActionBase {
		t.Errorf("GetWebhook(wh_3): got %+v, %v", g, err)
	}
	if _, err := s.GetWebhook(ctx, "wh_9"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetWebhook(unknown): got %v, want ErrNotFound", err)
	}

	// The log: attempts replace the delivery; the newest MaxDeliveries stay.
	for i := range store.MaxDeliveries + 5 {
		d := apitypes.WebhookDelivery{ID: fmt.Sprintf("whd_%03d", i), HookID: "wh_1", Event: apitypes.WebhookEventAttention,
			State: apitypes.DeliveryPending, Attempts: 1, CreatedAt: t0.Add(time.Duration(i) * time.Second), UpdatedAt: t0}
		if err := s.PutDelivery(ctx, d); err != nil {
			t.Fatalf("PutDelivery(%s): %v", d.ID, err)
		}
	}
	last := apitypes.WebhookDelivery{ID: fmt.Sprintf("whd_%03d", store.MaxDeliveries+4), HookID: "wh_1", Event: apitypes.WebhookEventAttention,
		State: apitypes.DeliveryDelivered, Attempts: 2, LastStatus: 204, CreatedAt: t0.Add(time.Duration(store.MaxDeliveries+4) * time.Second), UpdatedAt: t0.Add(time.Hour)}
	if err := s.PutDelivery(ctx, last); err != nil {
		t.Fatal(err)
	}
	ds, err := s.ListDeliveries(ctx, "wh_1")
	if err != nil || len(ds) != store.MaxDeliveries {
		t.Fatalf("ListDeliveries: %d, %v; want %d", len(ds), err, store.MaxDeliveries)
	}
	if ds[0].ID != last.ID || ds[0].Attempts != 2 || ds[0].State != apitypes.DeliveryDelivered || ds[len(ds)-1].ID != "whd_005" {
		t.Errorf("ListDeliveries: first %+v, last %s; want the updated %s first and whd_005 last", ds[0], ds[len(ds)-1].ID, last.ID)
	}
	if ds, _ := s.ListDeliveries(ctx, "wh_2"); len(ds) != 0 {
		t.Errorf("ListDeliveries(wh_2): got %d, want none", len(ds))
	}

	if err := s.DeleteWebhook(ctx, "wh_1", audit("t1", apitypes.AuditWebhookDeleted)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWebhook(ctx, "wh_1", audit("t1", apitypes.AuditWebhookDeleted)); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteWebhook twice: got %v, want ErrNotFound", err)
	}
	if ds, _ := s.ListDeliveries(ctx, "wh_1"); len(ds) != 0 {
		t.Errorf("deliveries of a deleted hook: got %d, want none", len(ds))
	}
	if err := s.PutDelivery(ctx, apitypes.WebhookDelivery{ID: "whd_x", HookID: "wh_1", CreatedAt: t0}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PutDelivery for a deleted hook: got %v, want ErrNotFound", err)
	}
	entries, _, err := s.ListAudit(ctx, store.AuditQuery{Tenant: "t1", Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for _, e := range entries {
		events = append(events, e.Event)
	}
	created, deleted := 0, 0
	for _, e := range events {
		switch e {
		case apitypes.AuditWebhookCreated:
			created++
		case apitypes.AuditWebhookDeleted:
			deleted++
		}
	}
	if created != 2 || deleted != 1 {
		t.Errorf("t1's audit: %v; want 2 created (the refused duplicate not), 1 deleted", events)
	}
}
