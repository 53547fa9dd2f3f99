package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/outbound"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// webhookAPI serves the tenant's webhooks and their deliveries (R-NOTIF).
type webhookAPI struct{ *core }

// The webhook routes (R-NOTIF-1..7): a tenant's administrators configure
// where attention changes are sent.
func (s *webhookAPI) routes() []Route {
	return []Route{
		{http.MethodPost, Base + "/webhooks", auth.PermRunAdmin, s.createWebhook, nil},
		{http.MethodGet, Base + "/webhooks", auth.PermRunAdmin, s.listWebhooks, nil},
		{http.MethodDelete, Base + "/webhooks/:id", auth.PermRunAdmin, s.deleteWebhook, nil},
		{http.MethodGet, Base + "/webhooks/:id/deliveries", auth.PermRunAdmin, s.listDeliveries, nil},
		{http.MethodPost, Base + "/webhooks/:id/test", auth.PermRunAdmin, s.testWebhook, nil},
	}
}

// maxWebhooks bounds a tenant's webhooks.
const maxWebhooks = 20

func webhookView(w store.Webhook) apitypes.Webhook {
	r := w.Reasons
	if r == nil {
		r = []string{}
	}
	return apitypes.Webhook{ID: w.ID, URL: w.URL, Reasons: r, ActAs: w.ActAs, CreatedAt: w.CreatedAt.UTC()}
}

// destinationError is the answer to a webhook URL or a push endpoint the
// guard refused (R-NOTIF-9): a form it does not take is 400 bad_url or
// bad_subscription, an internal address 422 destination_refused.
func destinationError(err error, field, raw, want string) error {
	code := "bad_url"
	if field == "endpoint" {
		code = "bad_subscription"
	}
	switch {
	case errors.Is(err, outbound.ErrInternal):
		return apierr.New(http.StatusUnprocessableEntity, "destination_refused",
			"%s %q: its host is an address of the coordinator's own network (loopback, private, link-local or another internal range); give a public address, or ask the coordinator's operator to allow this destination ([outbound] allow)", field, raw)
	case errors.Is(err, outbound.ErrUnresolved):
		return apierr.BadRequest(code, "%s %q: the host does not resolve; check its name", field, raw)
	}
	return apierr.BadRequest(code, "%s %q: give %s", field, raw, want)
}

// urlHost is what the audit keeps of a hook's URL: its scheme and host,
// never the path or query, which often hold a token.
func urlHost(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// hookAudit is the audit row of a person's act on a webhook or push
// subscription: its URL's host and its reasons.
func (s *core) hookAudit(c echo.Context, event string, w store.Webhook) apitypes.AuditEntry {
	cl := CallerOf(c)
	detail, _ := json.Marshal(map[string]any{"url_host": urlHost(w.URL), "reasons": webhookView(w).Reasons})
	return apitypes.AuditEntry{At: s.o.Now().UTC(), Tenant: cl.Tenant, Actor: cl.Actor(), Event: event,
		Target: apitypes.AuditTarget{WebhookID: w.ID}, Detail: detail}
}

// checkReasons refuses an attention reason that does not exist.
func checkReasons(rs []string) error {
	for _, r := range rs {
		if !slices.Contains(apitypes.AttentionReasons, r) {
			return apierr.BadRequest("bad_reason", "reason %q: use %s", r, strings.Join(apitypes.AttentionReasons, ", "))
		}
	}
	return nil
}

// createWebhook is POST /webhooks (R-NOTIF-1): an http or https URL and
// the reasons it takes (none: every one); the answer holds the signing
// secret, shown this once.
func (s *webhookAPI) createWebhook(c echo.Context) error {
	if err := refuseAgent(c); err != nil {
		return err
	}
	var req apitypes.WebhookCreate
	if err := decodeStrict(c, maxJSONBody, &req); err != nil {
		return err
	}
	if err := checkReasons(req.Reasons); err != nil {
		return err
	}
	if req.ActAs != "" {
		if err := s.checkActAs(c, req.ActAs); err != nil {
			return err
		}
	}
	ctx := c.Request().Context()
	if len(req.URL) > 2048 {
		return apierr.BadRequest("bad_url", "url %q: give an absolute http or https URL (at most 2048 bytes)", req.URL)
	}
	if err := s.notify.out.Check(ctx, req.URL, false); err != nil {
		return destinationError(err, "url", req.URL, "an absolute http or https URL, without user or password")
	}
	cl := CallerOf(c)
	hooks, err := s.o.Store.ListWebhooks(ctx, cl.Tenant)
	if err != nil {
		return err
	}
	if n := countKind(hooks, ""); n >= maxWebhooks {
		return apierr.New(http.StatusConflict, "too_many_webhooks", "this tenant has %d webhooks, the most it may have; delete one first", n)
	}
	secret, err := auth.NewToken("whsec_")
	if err != nil {
		return err
	}
	reasons := slices.Compact(slices.Sorted(slices.Values(req.Reasons)))
	w := store.Webhook{ID: auth.NewID("wh_"), Tenant: cl.Tenant, URL: req.URL, Secret: secret, Reasons: reasons,
		CreatedAt: s.o.Now().UTC().Truncate(time.Microsecond)}
	if req.ActAs != "" {
		w.ActAs, w.ActionBase = req.ActAs, s.o.PublicURL // R-NOTIF-11
		if w.ActionBase == "" {
			w.ActionBase = requestOrigin(c.Request())
		}
	}
	if err := s.o.Store.CreateWebhook(ctx, w, s.hookAudit(c, apitypes.AuditWebhookCreated, w)); err != nil {
		return err
	}
	v := webhookView(w)
	v.Secret = secret
	return c.JSON(http.StatusCreated, v)
}

func (s *webhookAPI) listWebhooks(c echo.Context) error {
	ctx := c.Request().Context()
	hooks, err := s.o.Store.ListWebhooks(ctx, CallerOf(c).Tenant)
	if err != nil {
		return err
	}
	out := apitypes.WebhookList{Items: []apitypes.Webhook{}}
	for _, h := range hooks {
		if h.Kind != "" {
			continue // a person's push subscription
		}
		v := webhookView(h)
		if ds, err := s.o.Store.ListDeliveries(ctx, h.ID); err == nil && len(ds) > 0 {
			v.LastDelivery = &ds[0]
		}
		out.Items = append(out.Items, v)
	}
	return c.JSON(http.StatusOK, out)
}

// hookInTenant is the webhook of a /webhooks/:id route; another tenant's
// is 404 (R-TEN-3).
func (s *webhookAPI) hookInTenant(ctx context.Context, c echo.Context) (store.Webhook, error) {
	w, err := s.o.Store.GetWebhook(ctx, c.Param("id"))
	if errors.Is(err, store.ErrNotFound) || (err == nil && (w.Tenant != CallerOf(c).Tenant || w.Kind != "")) {
		return store.Webhook{}, apierr.New(http.StatusNotFound, "webhook_not_found", "no webhook %q in this tenant", c.Param("id"))
	}
	return w, err
}

// hookAct is the webhook a person acts on, with no body: deleting and
// testing one are a person's acts, as creating one is.
func (s *webhookAPI) hookAct(c echo.Context) (store.Webhook, error) {
	w, err := s.hookInTenant(c.Request().Context(), c)
	if err == nil {
		err = refuseAgent(c)
	}
	if err == nil {
		err = noBody(c)
	}
	return w, err
}

func (s *webhookAPI) deleteWebhook(c echo.Context) error {
	ctx := c.Request().Context()
	w, err := s.hookAct(c)
	if err != nil {
		return err
	}
	if err := s.o.Store.DeleteWebhook(ctx, w.ID, s.hookAudit(c, apitypes.AuditWebhookDeleted, w)); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return apierr.New(http.StatusNotFound, "webhook_not_found", "no webhook %q in this tenant", w.ID)
		}
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *webhookAPI) listDeliveries(c echo.Context) error {
	ctx := c.Request().Context()
	w, err := s.hookInTenant(ctx, c)
	if err != nil {
		return err
	}
	ds, err := s.o.Store.ListDeliveries(ctx, w.ID)
	return items(c, ds, err)
}

// testWebhook is POST /webhooks/{id}/test (R-NOTIF-6): one signed `test`
// delivery, sent now and not retried; the answer is how it went. It is
// audited before it goes (R-NOTIF-7): a test is a request the coordinator
// sends where a person said.
func (s *webhookAPI) testWebhook(c echo.Context) error {
	ctx := c.Request().Context()
	w, err := s.hookAct(c)
	if err != nil {
		return err
	}
	if _, err := s.o.Store.AppendAudit(ctx, s.hookAudit(c, apitypes.AuditWebhookTested, w)); err != nil {
		return err
	}
	d := s.notify.newDelivery(w, apitypes.WebhookEventTest)
	body, _ := json.Marshal(apitypes.WebhookPayload{ID: d.ID, Event: d.Event, At: d.CreatedAt, Tenant: w.Tenant})
	return c.JSON(http.StatusOK, s.notify.deliver(w, d, body, false))
}

// checkActAs is R-NOTIF-11's rule for a webhook's act_as: the
// administrator adding it, or a person of the tenant who may answer
// requests and is no administrator (an administrator answers only as
// themselves).
func (s *webhookAPI) checkActAs(c echo.Context, id string) error {
	cl := CallerOf(c)
	if id == cl.Principal.ID {
		return nil
	}
	p, err := s.o.Store.GetPrincipal(c.Request().Context(), id)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	role := p.Roles[cl.Tenant]
	if err != nil || p.Kind != store.KindHuman || !auth.Grants(role, auth.PermRunWrite) || auth.Grants(role, auth.PermRunAdmin) {
		return apierr.BadRequest("bad_act_as", "act_as %q: name yourself, or a person of this tenant with the operator role", id)
	}
	return nil
}
