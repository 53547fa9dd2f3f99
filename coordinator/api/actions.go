package api

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Answering from the notification (R-NOTIF-10, R-NOTIF-11): a push or a
// webhook for needs_decision says what the tool asks and offers its
// answers. The console's service worker answers through the ordinary
// request route with the person's own session; a webhook's receiver (a
// chat bot) answers through a one-time signed action URL, as the person
// the webhook names.

// ActionPath is where a webhook's action URLs point; the token after it
// is the URL's only credential, so the access log never writes it.
const ActionPath = Base + "/actions/"

// maxPushPlain bounds a push's JSON before encryption: a push service
// takes at most 4096 bytes, of which the aes128gcm header (86), the tag
// (16) and the padding delimiter take 103 (RFC 8291).
const maxPushPlain = 3072

// askedOf is what a notification says of a pending request, cut so that
// a push fits: the command and its directory, the files and a summary
// of the diff, or the question.
func askedOf(r apitypes.RunRequest, pending int, cut int) *apitypes.AskedRequest {
	d := r.Detail
	a := &apitypes.AskedRequest{ID: r.ID, Kind: r.Kind, Tool: r.Tool, Title: clip(r.Title, 200),
		Command: clip(d.Command, cut), Cwd: clip(d.Cwd, 200), Question: clip(d.Question, cut),
		ExpiresAt: r.ExpiresAt, Pending: pending}
	for i, f := range d.Files {
		if i == cut/100 {
			a.Files = append(a.Files, fmt.Sprintf("… %d more", len(d.Files)-i))
			break
		}
		a.Files = append(a.Files, clip(f, 160))
	}
	if d.Diff != "" {
		a.DiffSummary = diffSummary(d.Diff)
	}
	return a
}

// clip cuts s to at most n bytes on a rune boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// diffSummary is "+3 −1 in 2 files" of a unified diff.
func diffSummary(diff string) string {
	add, del, files := 0, 0, 0
	for _, l := range strings.Split(diff, "\n") {
		switch {
		case strings.HasPrefix(l, "+++ "):
			files++
		case strings.HasPrefix(l, "--- "):
		case strings.HasPrefix(l, "+"):
			add++
		case strings.HasPrefix(l, "-"):
			del++
		}
	}
	s := fmt.Sprintf("+%d −%d", add, del)
	if files > 1 {
		s += fmt.Sprintf(" in %d files", files)
	}
	return s
}

// pushActions reduces the tool's options to the buttons a notification
// has room for (R-NOTIF-10): allow once and deny; a question or an
// elicitation is answered in the console (answer opens the run).
func pushActions(r apitypes.RunRequest) []apitypes.ActionOption {
	if r.Kind == "question" || r.Kind == "elicitation" {
		return []apitypes.ActionOption{{Action: apitypes.DecisionAnswer, Title: "Answer", Decision: apitypes.DecisionAnswer}}
	}
	var out []apitypes.ActionOption
	for _, want := range []string{apitypes.DecisionAllow, apitypes.DecisionDeny} {
		for _, o := range r.Options {
			if o.Decision == want && !o.Session {
				title := "Deny"
				if want == apitypes.DecisionAllow {
					title = "Allow once"
				}
				out = append(out, apitypes.ActionOption{Action: want, Title: title, OptionID: o.ID, Decision: want})
				break
			}
		}
	}
	return out
}

// pendingRequest asks the run's node for its oldest pending request and
// how many wait; ok is false when there is none or the node does not
// answer (the notification then says less, and still goes out).
func (n *notifier) pendingRequest(r apitypes.Run) (apitypes.RunRequest, int, bool) {
	if n.s.o.Fleet == nil {
		return apitypes.RunRequest{}, 0, false
	}
	ctx, cancel := context.WithTimeout(n.ctx, callTimeout)
	defer cancel()
	var l apitypes.RequestList
	if err := n.s.o.Fleet.Call(ctx, r.NodeID, wire.Header{Op: proto.OpRunRequests, RunRef: r.RunRef}, nil, &l); err != nil {
		return apitypes.RunRequest{}, 0, false
	}
	var first apitypes.RunRequest
	pending := 0
	for _, q := range l.Items {
		if q.State == apitypes.RequestPending {
			if pending == 0 {
				first = q
			}
			pending++
		}
	}
	return first, pending, pending > 0
}

// withRequest adds a pending request and its buttons to a push, cut
// until the JSON fits maxPushPlain.
func withRequest(m apitypes.PushMessage, tenant string, q apitypes.RunRequest, pending int) []byte {
	m.Tenant, m.Actions = tenant, pushActions(q)
	m.Body = q.Title
	for _, cut := range []int{1024, 400, 120, 0} {
		m.Request = askedOf(q, pending, cut)
		if cut == 0 {
			m.Request.Files, m.Request.Title = nil, clip(q.Title, 120)
		}
		b, _ := json.Marshal(m)
		if len(b) <= maxPushPlain {
			return b
		}
	}
	m.Request, m.Body = nil, clip(q.Title, 200)
	b, _ := json.Marshal(m)
	return b
}

// --- the webhook's action URLs (R-NOTIF-11) ---

// actionClaims is what an action URL carries: the webhook that signed
// it, the run, the request, the option and its decision, and when it
// stops (the request's own expiry).
type actionClaims struct {
	Hook     string `json:"h"`
	Run      string `json:"r"`
	Request  string `json:"q"`
	Option   string `json:"o"`
	Decision string `json:"d"`
	Exp      int64  `json:"x"`
}

// maxActionLife bounds an action URL of a request without an expiry.
const maxActionLife = 24 * time.Hour

var actionB64 = base64.RawURLEncoding.Strict()

// actionKey is the key a webhook's action URLs are signed with: derived
// from the webhook's secret, so deleting the webhook revokes them and
// every replica that reads the store checks them.
func actionKey(secret string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("olivares action url v1"))
	return m.Sum(nil)
}

func signAction(secret, payload string) string {
	m := hmac.New(sha256.New, actionKey(secret))
	m.Write([]byte(payload))
	return actionB64.EncodeToString(m.Sum(nil))
}

// actionToken is an action URL's last segment: the claims and their MAC.
func actionToken(secret string, c actionClaims) string {
	j, _ := json.Marshal(c)
	p := actionB64.EncodeToString(j)
	return p + "." + signAction(secret, p)
}

// webhookActions is a webhook's buttons for a pending request: one URL
// per allow or deny option of the tool's (a question is answered in the
// console). A webhook without act_as gets none.
func webhookActions(h store.Webhook, q apitypes.RunRequest, runRef string, now time.Time) []apitypes.ActionOption {
	if h.ActAs == "" || h.ActionBase == "" || q.Kind == "question" || q.Kind == "elicitation" {
		return nil
	}
	exp := q.AskedAt.Add(maxActionLife)
	if q.ExpiresAt != nil && q.ExpiresAt.Before(exp) {
		exp = *q.ExpiresAt
	}
	var out []apitypes.ActionOption
	for _, o := range q.Options {
		if o.Decision != apitypes.DecisionAllow && o.Decision != apitypes.DecisionDeny {
			continue
		}
		tok := actionToken(h.Secret, actionClaims{Hook: h.ID, Run: runRef, Request: q.ID, Option: o.ID, Decision: o.Decision, Exp: exp.Unix()})
		out = append(out, apitypes.ActionOption{Action: o.Decision, Title: o.Label, OptionID: o.ID, Decision: o.Decision,
			URL: strings.TrimRight(h.ActionBase, "/") + ActionPath + tok})
	}
	return out
}

// refusedAction is the answer to a token that is not one this
// coordinator signed, or whose webhook is gone: nothing says which.
func refusedAction() error {
	return apierr.New(http.StatusForbidden, "action_refused", "this action link is not valid: it was changed, or its webhook was removed; answer the request in the console")
}

// openAction checks an action URL's token: its MAC under its webhook's
// key, then its expiry.
func (s *actionAPI) openAction(ctx context.Context, tok string) (actionClaims, store.Webhook, error) {
	var c actionClaims
	p, mac, ok := strings.Cut(tok, ".")
	raw, err := actionB64.DecodeString(p)
	if !ok || err != nil || json.Unmarshal(raw, &c) != nil || c.Hook == "" {
		return c, store.Webhook{}, refusedAction()
	}
	h, err := s.o.Store.GetWebhook(ctx, c.Hook)
	if errors.Is(err, store.ErrNotFound) || (err == nil && (h.Kind != "" || h.ActAs == "")) {
		return c, h, refusedAction()
	}
	if err != nil {
		return c, h, err
	}
	if !hmac.Equal([]byte(mac), []byte(signAction(h.Secret, p))) {
		return c, h, refusedAction()
	}
	if !s.o.Now().Before(time.Unix(c.Exp, 0)) {
		return c, h, apierr.New(http.StatusConflict, "request_expired", "request %s expired at %s; this link no longer answers it", c.Request, time.Unix(c.Exp, 0).UTC().Format(time.RFC3339))
	}
	return c, h, nil
}

// actionAPI serves the action URLs of a webhook's push (R-NOTIF-11),
// outside the route table: the token is their credential, no session or
// API token is asked for.
type actionAPI struct{ *core }

func (s *actionAPI) register(e *echo.Echo) {
	e.GET(ActionPath+":token", s.actionPage)
	e.POST(ActionPath+":token", s.act)
}

// actionHeaders keep an action page from leaking its URL: no referrer,
// no cache, no frame, nothing loaded from anywhere.
func actionHeaders(c echo.Context) {
	h := c.Response().Header()
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'")
}

func actionHTML(c echo.Context, status int, title, body string) error {
	actionHeaders(c)
	return c.HTML(status, `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>`+
		html.EscapeString(title)+`</title><style>body{font:16px system-ui,sans-serif;max-width:32rem;margin:2rem auto;padding:0 1rem}button{font:inherit;padding:.8rem 1.6rem;min-width:12rem}</style></head><body>`+body+`</body></html>`)
}

// actionPage is GET on an action URL: a link a person opens never
// settles anything by itself (a preview bot or a prefetch would); it
// shows one button that POSTs.
func (s *actionAPI) actionPage(c echo.Context) error {
	cl, _, err := s.openAction(c.Request().Context(), c.Param("token"))
	if err != nil {
		return actionHTMLError(c, err)
	}
	verb := "Deny"
	if cl.Decision == apitypes.DecisionAllow {
		verb = "Allow"
	}
	return actionHTML(c, http.StatusOK, verb+" request "+cl.Request,
		`<h1>`+verb+` this request?</h1><p>Run `+html.EscapeString(cl.Run)+`, request `+html.EscapeString(cl.Request)+
			` (option `+html.EscapeString(cl.Option)+`).</p><form method="post"><button type="submit">`+verb+`</button></form>`)
}

func actionHTMLError(c echo.Context, err error) error {
	var ae *apierr.Error
	var we *wire.Error
	switch {
	case errors.As(err, &we):
		ae = nodeError(we)
	case !errors.As(err, &ae):
		return err
	}
	return actionHTML(c, ae.Status, "Olivares", `<p>`+html.EscapeString(ae.Message)+`</p>`)
}

// act is POST on an action URL: the request is settled once, as the
// webhook's act_as, and audited as them; a second use is the node's
// 409 request_settled, naming who answered. A chat bot posts an empty
// body or {}; the action page posts its form, and gets a page back.
func (s *actionAPI) act(c echo.Context) error {
	form := strings.HasPrefix(c.Request().Header.Get(echo.HeaderContentType), echo.MIMEApplicationForm)
	err := s.settleAction(c)
	if form && err != nil {
		return actionHTMLError(c, err)
	}
	return err
}

func (s *actionAPI) settleAction(c echo.Context) error {
	ctx := c.Request().Context()
	cl, h, err := s.openAction(ctx, c.Param("token"))
	if err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(c.Request().Body, 1024))
	if b := bytes.TrimSpace(body); len(b) > 0 && string(b) != "{}" {
		return apierr.BadRequest("bad_body", "an action link takes no body; post nothing, or {}")
	}
	p, err := s.o.Store.GetPrincipal(ctx, h.ActAs)
	if err != nil || p.Kind != store.KindHuman || !auth.Grants(p.Roles[h.Tenant], auth.PermRunWrite) {
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return apierr.New(http.StatusForbidden, "action_refused", "the person this webhook answers as may no longer answer requests in this tenant; answer in the console, or have an administrator add the webhook again")
	}
	run, err := s.runInTenant(ctx, h.Tenant, cl.Run)
	if err != nil {
		return err
	}
	var out apitypes.RunRequest
	ans := proto.RunAnswer{ID: cl.Request, By: p.ID, Name: p.Name, RequestAnswer: apitypes.RequestAnswer{Decision: cl.Decision, OptionID: cl.Option}}
	if err := s.runOp(ctx, run, proto.OpRunAnswer, ans, &out, callTimeout); err != nil {
		return err
	}
	// R-REQ-13, R-NOTIF-11: audited as the person, by way of the webhook.
	e := apitypes.AuditEntry{At: s.o.Now().UTC(), Tenant: h.Tenant, Event: apitypes.AuditRunRequestAnswered,
		Actor:  apitypes.AuditActor{CredentialID: h.ID, PrincipalID: p.ID, Kind: apitypes.ActorHuman},
		Target: apitypes.AuditTarget{RunRef: run.RunRef, WebhookID: h.ID}}
	e.Detail, _ = json.Marshal(map[string]string{"request_id": out.ID, "kind": out.Kind, "decision": out.Decision, "via": "webhook action"})
	if _, err := s.o.Store.AppendAudit(ctx, e); err != nil {
		return err
	}
	if strings.HasPrefix(c.Request().Header.Get(echo.HeaderContentType), echo.MIMEApplicationForm) {
		return actionHTML(c, http.StatusOK, "Answered", `<p>`+html.EscapeString(settledSentence(out))+`</p>`)
	}
	actionHeaders(c)
	return c.JSON(http.StatusOK, out)
}

// settledSentence says how a request was settled.
func settledSentence(r apitypes.RunRequest) string {
	how := map[string]string{apitypes.DecisionAllow: "Allowed", apitypes.DecisionDeny: "Denied"}[r.Decision]
	if how == "" {
		how = "Answered"
	}
	who := r.ByName
	if who == "" {
		who = r.By
	}
	return how + " by " + who + "."
}

// requestOrigin is the coordinator's address as the caller reached it,
// which a webhook's action URLs start with.
func requestOrigin(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
