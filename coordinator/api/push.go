package api

import (
	"crypto/ecdsa"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/webpush"
)

// pushAPI serves a person's Web Push subscriptions (R-NOTIF-8).
type pushAPI struct {
	*core
	vapid *ecdsa.PrivateKey
}

// Web Push (R-NOTIF-8): each person subscribes their browsers, for the
// reasons they choose; a push reaches a phone with the console closed.
func (s *pushAPI) routes() []Route {
	return []Route{
		{http.MethodGet, Base + "/push/key", auth.PermRunRead, s.pushKey, nil},
		{http.MethodPost, Base + "/push/subscriptions", auth.PermRunRead, s.subscribePush, nil},
		{http.MethodGet, Base + "/push/subscriptions", auth.PermRunRead, s.listPush, nil},
		{http.MethodDelete, Base + "/push/subscriptions/:id", auth.PermRunRead, s.unsubscribePush, nil},
		{http.MethodPost, Base + "/push/subscriptions/:id/test", auth.PermRunRead, s.testPush, nil},
	}
}

// maxPushPerPerson bounds one person's subscriptions in a tenant.
const maxPushPerPerson = 10

func countKind(hooks []store.Webhook, kind string) int {
	n := 0
	for _, h := range hooks {
		if h.Kind == kind {
			n++
		}
	}
	return n
}

func pushView(w store.Webhook) apitypes.PushSubscription {
	r := w.Reasons
	if r == nil {
		r = []string{}
	}
	return apitypes.PushSubscription{ID: w.ID, Endpoint: w.URL, Reasons: r, CreatedAt: w.CreatedAt.UTC()}
}

func (s *pushAPI) pushKey(c echo.Context) error {
	return c.JSON(http.StatusOK, apitypes.PushKey{PublicKey: webpush.PublicKey(s.vapid)})
}

// subscribePush is POST /push/subscriptions: the caller's browser, for the
// reasons given (none: every one). The same endpoint again replaces the
// caller's earlier subscription of it (a browser subscribes anew).
func (s *pushAPI) subscribePush(c echo.Context) error {
	if err := refuseAgent(c); err != nil {
		return err
	}
	var req apitypes.PushSubscriptionCreate
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	sub := webpush.Subscription{Endpoint: req.Endpoint, P256dh: req.Keys.P256dh, Auth: req.Keys.Auth}
	if err := sub.Check(); err != nil || len(req.Endpoint) > 2048 {
		msg := "the endpoint is over 2048 bytes"
		if err != nil {
			msg = err.Error()
		}
		return apierr.BadRequest("bad_subscription", "this is not a push subscription a browser gave: %s", msg)
	}
	if err := checkReasons(req.Reasons); err != nil {
		return err
	}
	ctx := c.Request().Context()
	// R-NOTIF-9: a push service is a public https address, as every
	// browser's is; anything else would have the coordinator call where a
	// viewer said.
	if err := s.notify.out.Check(ctx, req.Endpoint, true); err != nil {
		return destinationError(err, "endpoint", req.Endpoint, "the https endpoint of a push service, as the browser gave it")
	}
	cl := CallerOf(c)
	hooks, err := s.o.Store.ListWebhooks(ctx, cl.Tenant)
	if err != nil {
		return err
	}
	mine := 0
	for _, h := range hooks {
		if h.Kind != store.KindWebPush || h.Owner != cl.Owner() {
			continue
		}
		if h.URL == req.Endpoint {
			if err := s.o.Store.DeleteWebhook(ctx, h.ID, s.hookAudit(c, apitypes.AuditPushUnsubscribed, h)); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			continue
		}
		mine++
	}
	if mine >= maxPushPerPerson {
		return apierr.New(http.StatusConflict, "too_many_subscriptions", "you have %d browsers subscribed in this tenant, the most you may; remove one first", mine)
	}
	w := store.Webhook{ID: auth.NewID("push_"), Tenant: cl.Tenant, Kind: store.KindWebPush, Owner: cl.Owner(), URL: req.Endpoint,
		P256dh: req.Keys.P256dh, Auth: req.Keys.Auth, Reasons: slices.Compact(slices.Sorted(slices.Values(req.Reasons))),
		CreatedAt: s.o.Now().UTC().Truncate(time.Microsecond)}
	if err := s.o.Store.CreateWebhook(ctx, w, s.hookAudit(c, apitypes.AuditPushSubscribed, w)); err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, pushView(w))
}

func (s *pushAPI) listPush(c echo.Context) error {
	ctx := c.Request().Context()
	cl := CallerOf(c)
	hooks, err := s.o.Store.ListWebhooks(ctx, cl.Tenant)
	if err != nil {
		return err
	}
	out := apitypes.PushSubscriptionList{Items: []apitypes.PushSubscription{}}
	for _, h := range hooks {
		if h.Kind != store.KindWebPush || h.Owner != cl.Owner() {
			continue
		}
		v := pushView(h)
		if ds, err := s.o.Store.ListDeliveries(ctx, h.ID); err == nil && len(ds) > 0 {
			v.LastDelivery = &ds[0]
		}
		out.Items = append(out.Items, v)
	}
	return c.JSON(http.StatusOK, out)
}

// mySubscription is the caller's own subscription of a route; anyone
// else's is 404.
func (s *pushAPI) mySubscription(c echo.Context) (store.Webhook, error) {
	cl := CallerOf(c)
	w, err := s.o.Store.GetWebhook(c.Request().Context(), c.Param("id"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && (w.Tenant != cl.Tenant || w.Kind != store.KindWebPush || w.Owner != cl.Owner())) {
		return store.Webhook{}, apierr.New(http.StatusNotFound, "subscription_not_found", "you have no push subscription %q in this tenant", c.Param("id"))
	}
	return w, err
}

func (s *pushAPI) unsubscribePush(c echo.Context) error {
	w, err := s.mySubscription(c)
	if err != nil {
		return err
	}
	if err := noBody(c); err != nil {
		return err
	}
	if err := s.o.Store.DeleteWebhook(c.Request().Context(), w.ID, s.hookAudit(c, apitypes.AuditPushUnsubscribed, w)); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return apierr.New(http.StatusNotFound, "subscription_not_found", "you have no push subscription %q in this tenant", w.ID)
		}
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// testPush sends one push now, without retries, and answers how it went.
func (s *pushAPI) testPush(c echo.Context) error {
	w, err := s.mySubscription(c)
	if err != nil {
		return err
	}
	if err := noBody(c); err != nil {
		return err
	}
	d := s.notify.newDelivery(w, apitypes.WebhookEventTest)
	body, _ := json.Marshal(apitypes.PushMessage{Title: "Olivares", Body: "Notifications reach this browser.", URL: "/", Tag: "test"})
	return c.JSON(http.StatusOK, s.notify.deliver(w, d, body, false))
}
