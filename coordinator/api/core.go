package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// core is what the feature handlers share: the options (store, fleet,
// vault, clock), the log and metrics, the change log and the notifier they
// feed, and the helpers more than one feature calls — the {ref} lookups,
// calls to a run's node, run views, audit rows, the workspace gate and a
// run's grants. A helper one feature uses lives with that feature's type,
// not here.
type core struct {
	o       Options
	log     *slog.Logger
	metrics *metrics
	changes *changeLog
	notify  *notifier
	idem    idemWaiters
	// limitSeen hands an index write's rows to the on_limit plans
	// (onlimit.go's onLimitSeen).
	limitSeen func(rows ...apitypes.Run)
	// replicas carries run changes to the other replicas (FollowReplicas).
	replicas replicaChanges
}

// --- the {ref} of a route and the node of a run ---

// refRun is the run of a /runs/:ref route, as lookupFirst found it.
func (s *core) refRun(c echo.Context) (apitypes.Run, error) {
	if r, ok := c.Get(refKey).(apitypes.Run); ok {
		return r, nil
	}
	return s.runInTenant(c.Request().Context(), CallerOf(c).Tenant, c.Param("ref"))
}

// refWorkspace is the workspace of a /workspaces/:ref route.
func (s *core) refWorkspace(c echo.Context) (apitypes.Workspace, error) {
	if w, ok := c.Get(refKey).(apitypes.Workspace); ok {
		return w, nil
	}
	return s.workspaceInTenant(c.Request().Context(), CallerOf(c).Tenant, c.Param("ref"))
}

// refProfile is the profile of a /profiles/:ref route.
func (s *core) refProfile(c echo.Context) (apitypes.Profile, error) {
	if p, ok := c.Get(refKey).(apitypes.Profile); ok {
		return p, nil
	}
	return s.profileInTenant(c.Request().Context(), CallerOf(c).Tenant, c.Param("ref"))
}

// inTenant reads the kind named ref with get: an unknown one, or another
// tenant's, is a 404 (R-TEN-3).
func inTenant[T any](ctx context.Context, get func(context.Context, string) (T, error), tenantOf func(T) string, tenant, kind, ref string) (T, error) {
	v, err := get(ctx, ref)
	if errors.Is(err, store.ErrNotFound) || (err == nil && tenantOf(v) != tenant) {
		var none T
		return none, apierr.NotFound(kind, ref)
	}
	return v, err
}

func (s *core) runInTenant(ctx context.Context, tenant, ref string) (apitypes.Run, error) {
	return inTenant(ctx, s.o.Store.GetRun, func(r apitypes.Run) string { return r.Tenant }, tenant, "run", ref)
}

func (s *core) workspaceInTenant(ctx context.Context, tenant, ref string) (apitypes.Workspace, error) {
	return inTenant(ctx, s.o.Store.GetWorkspace, func(w apitypes.Workspace) string { return w.Tenant }, tenant, "workspace", ref)
}

func (s *core) profileInTenant(ctx context.Context, tenant, ref string) (apitypes.Profile, error) {
	return inTenant(ctx, s.o.Store.GetProfile, func(p apitypes.Profile) string { return p.Tenant }, tenant, "profile", ref)
}

func (s *core) secretInTenant(ctx context.Context, tenant, ref string) (store.Secret, error) {
	return inTenant(ctx, s.o.Store.GetSecret, func(v store.Secret) string { return v.Tenant }, tenant, "secret", ref)
}

func (s *core) nodeInTenant(ctx context.Context, tenant, id string) (store.Node, error) {
	return inTenant(ctx, s.o.Store.GetNode, func(n store.Node) string { return n.Tenant }, tenant, "node", id)
}

// call is a fleet call with the route's timeout.
func (s *core) call(ctx context.Context, node string, h wire.Header, params, result any) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return s.o.Fleet.Call(ctx, node, h, params, result)
}

// runCall forwards a run op to the route's run's node.
func (s *core) runCall(c echo.Context, op string, params, result any, timeout time.Duration) (apitypes.Run, error) {
	r, err := s.refRun(c)
	if err != nil {
		return apitypes.Run{}, err
	}
	return r, s.runOp(c.Request().Context(), r, op, params, result, timeout)
}

// runOp forwards op on run r to its node, within timeout.
func (s *core) runOp(ctx context.Context, r apitypes.Run, op string, params, result any, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return s.o.Fleet.Call(ctx, r.NodeID, wire.Header{Op: op, RunRef: r.RunRef}, params, result)
}

// index returns the indexed row of r, which an agent answered a call
// with: the agent pushes a row it answers with before the answer (issue
// 24: the push is the index's one writer), so the index holds it, with
// indexed_at. When the push did not get through (the agent logs it and
// pushes again later), the answer's row is returned as it is.
func (s *core) index(ctx context.Context, r apitypes.Run) apitypes.Run {
	got, err := s.o.Store.GetRun(ctx, r.RunRef)
	if err != nil || got.Rev < r.Rev || got.Tenant != r.Tenant {
		return r
	}
	return got
}

// freshRun is the run's row as the index has it now: its agent pushed
// every change (the index's one writer); runViews marks it unreachable
// while its node has no tunnel (R-STATE-7: the state is never invented).
func (s *core) freshRun(ctx context.Context, r apitypes.Run) apitypes.Run {
	got, err := s.o.Store.GetRun(ctx, r.RunRef)
	if err != nil || got.Tenant != r.Tenant {
		return r
	}
	return got
}

// --- what a run looks like to its caller, and what the API publishes ---

// runViews turns index rows into run objects for the caller (R-API-6): the
// node's reachability (R-STATE-7), the session's name and archive mark
// (R-NAME-4, R-ARC-3) and the caller's own marks (R-GET-3, R-PIN-5,
// R-SNZ-5, R-DONE-3).
func (s *core) runViews(c echo.Context, rows ...apitypes.Run) ([]apitypes.Run, error) {
	return s.runViewsFor(c.Request().Context(), CallerOf(c), rows...)
}

// runViewsFor is runViews for a caller outside a request's handler (the
// change stream, R-CHG-2).
func (s *core) runViewsFor(ctx context.Context, cl Caller, rows ...apitypes.Run) ([]apitypes.Run, error) {
	refs := make([]string, len(rows))
	for i, r := range rows {
		refs[i] = r.RunRef
	}
	metas, err := s.o.Store.GetRunMeta(ctx, refs)
	if err != nil {
		return nil, err
	}
	marks, err := s.o.Store.GetMarks(ctx, cl.Tenant, cl.Owner(), refs)
	if err != nil {
		return nil, err
	}
	now := s.o.Now()
	out := make([]apitypes.Run, len(rows))
	for i, r := range rows {
		out[i] = withMarks(s.sharedView(r, metas[r.RunRef]), marks[r.RunRef], now)
	}
	return out, nil
}

// sharedView is r as every caller sees it: its node's reachability and its
// session meta (name, archive, scheduled continue, on_limit).
func (s *core) sharedView(r apitypes.Run, meta store.RunMeta) apitypes.Run {
	if !s.o.Fleet.Link(r.NodeID).Connected {
		f := false
		r.NodeReachable = &f
	} else {
		r.NodeReachable = nil
	}
	r.Name, r.ArchivedAt = meta.Name, utcPtr(meta.ArchivedAt)
	r.ScheduledContinueAt = nil
	if c := meta.Continue; c != nil && c.FiredAt == nil {
		r.ScheduledContinueAt = utcPtr(&c.At) // R-CONT-1
	}
	r.OnLimit = meta.OnLimit // R-ONL-6
	return r
}

// withMarks is a shared view with one caller's marks m on it, and its
// attention at now (R-ATTN-1).
func withMarks(r apitypes.Run, m store.Marks, now time.Time) apitypes.Run {
	r.Pinned, r.PinnedAt, r.Done = m.PinnedAt != nil, utcPtr(m.PinnedAt), m.Done
	r.SnoozedUntil = nil
	if m.SnoozedUntil != nil && now.Before(*m.SnoozedUntil) {
		r.SnoozedUntil = utcPtr(m.SnoozedUntil)
	}
	return apitypes.WithAttention(r, now)
}

// unmarked reports whether marks m change nothing in a view at now: no
// pin, not done, no snooze still running.
func unmarked(m store.Marks, now time.Time) bool {
	return m.PinnedAt == nil && !m.Done && (m.SnoozedUntil == nil || !now.Before(*m.SnoozedUntil))
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// respondRun answers one run object.
func (s *core) respondRun(c echo.Context, status int, r apitypes.Run) error {
	v, err := s.runViews(c, r)
	if err != nil {
		return err
	}
	return c.JSON(status, v[0])
}

// updateMeta changes the run's session meta with its audit entry in one
// transaction (R-AUD-1) and answers the run.
func (s *core) updateMeta(c echo.Context, fn func(*store.RunMeta) *apitypes.AuditEntry) error {
	ctx := c.Request().Context()
	r, err := s.refRun(c)
	if err != nil {
		return err
	}
	changed := false
	if _, err := s.o.Store.UpdateRunMeta(ctx, r.RunRef, func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		e := fn(m)
		changed = e != nil
		return e, nil
	}); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return apierr.NotFound("run", r.RunRef)
		}
		return err
	}
	if changed {
		s.publishRuns(r) // R-CHG-2: its name or archive mark
	}
	return s.respondRun(c, http.StatusOK, r)
}

// checkName applies R-NAME-1, R-NAME-3 and R-NAME-7: trimmed first, at most
// 200 code points, no control (Cc) or invisible (Cf, Zl, Zp) character.
// The empty name clears it (R-NAME-2).
func checkName(name string) (string, error) {
	name = strings.TrimSpace(name)
	if !utf8.ValidString(name) {
		return "", apierr.BadRequest("bad_name", "the name is not valid UTF-8")
	}
	if n := utf8.RuneCountInString(name); n > maxNameRunes {
		return "", apierr.BadRequest("bad_name", "the name has %d characters; at most %d are allowed", n, maxNameRunes)
	}
	for i, r := range name {
		if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp) {
			return "", apierr.BadRequest("bad_name", "the name holds a control or invisible character (U+%04X at byte %d); remove it", r, i)
		}
	}
	return name, nil
}

// publishRuns logs run rows the index took.
func (s *core) publishRuns(rows ...apitypes.Run) {
	for _, r := range rows {
		s.changes.add(change{tenant: r.Tenant, event: apitypes.ChangeRun, run: r, view: &sharedRun{}})
		s.replicas.announce(r.Tenant, r.RunRef)
	}
	s.notify.observe(rows...) // R-NOTIF-2
	s.limitSeen(rows...)      // R-ONL-2
}

// publishMarks logs a caller's marks on a run, for that caller alone.
func (s *core) publishMarks(cl Caller, ref string, m store.Marks) {
	mc := apitypes.MarkChange{RunRef: ref, Pinned: m.PinnedAt != nil, PinnedAt: utcPtr(m.PinnedAt), Done: m.Done}
	if m.SnoozedUntil != nil && s.o.Now().Before(*m.SnoozedUntil) {
		mc.SnoozedUntil = utcPtr(m.SnoozedUntil)
	}
	s.changes.add(change{tenant: cl.Tenant, owner: cl.Owner(), event: apitypes.ChangeMark, data: mc})
}

// --- audit rows ---

// OperatorActor is the audit actor of what the local operator does through
// the coordinator's admin socket or dev mode's set-up (R-AUD-6).
var OperatorActor = apitypes.AuditActor{CredentialID: "admin-socket", Kind: apitypes.ActorOperator}

// Audit appends an audit entry now. The change it records has committed:
// a failure is logged, not returned, so that a client never repeats a
// change that was made (R-AUD-6).
func (s *core) Audit(ctx context.Context, tenant string, actor apitypes.AuditActor, event string, target apitypes.AuditTarget, detail any) {
	e := apitypes.AuditEntry{At: s.o.Now().UTC(), Tenant: tenant, Actor: actor, Event: event, Target: target}
	if detail != nil {
		e.Detail = mustJSON(detail)
	}
	if _, err := s.o.Store.AppendAudit(ctx, e); err != nil {
		s.log.ErrorContext(ctx, "audit append failed", "event", event, logging.KeyTenant, tenant, logging.Err(err))
	}
}

func (s *core) auditCaller(c echo.Context, event string, target apitypes.AuditTarget, detail any) {
	cl := CallerOf(c)
	s.Audit(c.Request().Context(), cl.Tenant, cl.Actor(), event, target, detail)
}

// auditEntry is an audit row by the caller about a run (R-AUD-3).
func (s *core) auditEntry(c echo.Context, event, runRef string) apitypes.AuditEntry {
	cl := CallerOf(c)
	return apitypes.AuditEntry{At: s.o.Now().UTC(), Tenant: cl.Tenant, Actor: cl.Actor(), Event: event,
		Target: apitypes.AuditTarget{RunRef: runRef}}
}

// auditStart records a run's start or resume, and the grants it was handed
// by kind and secret ref, never their values (R-AUD-6).
func (s *core) auditStart(c echo.Context, event string, r apitypes.Run, grants []store.GrantRef, detail map[string]any) {
	target := apitypes.AuditTarget{RunRef: r.RunRef, NodeID: r.NodeID}
	s.auditCaller(c, event, target, detail)
	if len(grants) == 0 {
		return
	}
	gs := make([]map[string]any, 0, len(grants))
	for _, g := range grants {
		gs = append(gs, map[string]any{"kind": g.Kind, "secret_ref": g.SecretRef, "env": g.Env, "as_file": g.AsFile})
	}
	s.auditCaller(c, apitypes.AuditRunGranted, target, map[string]any{"on": event, "grants": gs})
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only called with maps of strings and numbers
	}
	return b
}

// --- request helpers ---

// items answers rows as a list: an object whose items holds them, never
// null (R-API-15).
func items[T any](c echo.Context, rows []T, err error) error {
	if err != nil {
		return err
	}
	if rows == nil {
		rows = []T{}
	}
	return c.JSON(http.StatusOK, struct {
		Items []T `json:"items"`
	}{rows})
}

// decodeStrict reads a JSON body, refusing unknown fields (R-API-7) and
// trailing data. An empty body decodes as {}.
func decodeStrict(c echo.Context, limit int64, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, limit))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return apierr.New(http.StatusRequestEntityTooLarge, "body_too_large", "the request body is over %d bytes", limit)
		}
		return apierr.BadRequest("bad_body", "cannot read the request body: %v", err)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if err := checkUTF8(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return apierr.BadRequest("bad_body", "invalid JSON body: %v", err)
	}
	if dec.More() {
		return apierr.BadRequest("bad_body", "invalid JSON body: data after the object")
	}
	return nil
}

// noBody is R-API-7 for a route that takes no body: an empty body or {} is
// accepted, anything else is 400 bad_body before any effect. Every route
// without a body calls it (TestBodylessRoutes walks the route table);
// cleanup alone accepts any body (R-CLN-2).
func noBody(c echo.Context) error {
	var none struct{}
	return decodeStrict(c, maxJSONBody, &none)
}

// refuseAgent is R-AUTH-6: the approval routes refuse an agent identity,
// whatever it holds.
func refuseAgent(c echo.Context) error {
	if CallerOf(c).Principal.Kind == store.KindAgent {
		return apierr.New(http.StatusForbidden, "agent_identity_refused", "an approval needs a person: agent identities may not approve, even with workspace administration")
	}
	return nil
}

// --- what a run needs to start: its workspace's gate, its grants ---

// gate is what a start of a run in workspace ref needs for its
// project-config check (R-PCS-12): the hash of the last approval.
func (s *core) gate(ctx context.Context, workspaceRef string) (proto.Gate, error) {
	if workspaceRef == "" {
		return proto.Gate{}, nil
	}
	st, err := s.o.Store.GetWorkspaceSettings(ctx, workspaceRef)
	if errors.Is(err, store.ErrNotFound) {
		return proto.Gate{}, nil
	}
	if err != nil {
		return proto.Gate{}, err
	}
	if st.ProjectConfigApproval == nil {
		return proto.Gate{}, nil
	}
	return proto.Gate{ProjectConfigApproved: st.ProjectConfigApproval.SHA256}, nil
}

// openGrants resolves grants to their values for the node. A secret
// deleted since the launch refuses the resume (409): the run would start
// without a credential it had.
func (s *core) openGrants(ctx context.Context, tenant string, gs []store.GrantRef) ([]proto.Grant, error) {
	out := make([]proto.Grant, 0, len(gs))
	for _, g := range gs {
		sec, err := s.o.Store.GetSecret(ctx, g.SecretRef)
		if errors.Is(err, store.ErrNotFound) {
			return nil, apierr.New(http.StatusConflict, "grant_unavailable", "secret %s granted to this run as %s is gone from the vault", g.SecretRef, g.Env)
		}
		if err != nil {
			return nil, err
		}
		if s.o.Vault == nil {
			return nil, apierr.New(http.StatusServiceUnavailable, "vault_unavailable", "this coordinator has no vault key")
		}
		v, err := s.o.Vault.Open(tenant, sec.Ref, sec.Sealed)
		if err != nil {
			return nil, err
		}
		out = append(out, proto.Grant{Kind: g.Kind, Env: g.Env, AsFile: g.AsFile, Value: v})
	}
	return out, nil
}

// withProfileKey is gs and profile p's API key, granted as its tool's key
// variable (R-ACCT-7), unless gs grants that variable. It is added at
// every generation's start from the run's profile of that moment (a moved
// run gets its new profile's key), never recorded with the run's grants.
func (s *core) withProfileKey(ctx context.Context, p apitypes.Profile, gs []store.GrantRef) ([]store.GrantRef, error) {
	env := apitypes.APIKeyEnv[p.Tool]
	if p.APIKeyRef == "" || env == "" || slices.ContainsFunc(gs, func(g store.GrantRef) bool { return g.Env == env }) {
		return gs, nil
	}
	if _, err := s.secretInTenant(ctx, p.Tenant, p.APIKeyRef); err != nil {
		if e := apierr.As(err); e != nil && e.Status == http.StatusNotFound {
			return nil, apierr.New(http.StatusConflict, "api_key_unavailable", "the API key of profile %s (vault secret %s) is gone from the vault; set another as its api_key_ref, or remove it", p.Name, p.APIKeyRef)
		}
		return nil, err
	}
	return append(slices.Clip(gs), store.GrantRef{Kind: apitypes.GrantVaultSecret, SecretRef: p.APIKeyRef, Env: env}), nil
}

// resumeParams are what a new generation of run r needs (resume, approve,
// a continue): the grants recorded for it and its profile's API key,
// opened again, and its workspace's gate (R-GRANT-2, R-ACCT-7, R-PCS-12).
func (s *core) resumeParams(ctx context.Context, r apitypes.Run) (p proto.RunResume, err error) {
	metas, err := s.o.Store.GetRunMeta(ctx, []string{r.RunRef})
	var gs []store.GrantRef
	if err == nil {
		gs = metas[r.RunRef].Grants
		if prof, perr := s.profileInTenant(ctx, r.Tenant, r.ProviderProfileRef); perr == nil {
			gs, err = s.withProfileKey(ctx, prof, gs)
		}
	}
	if err == nil {
		p.Grants, err = s.openGrants(ctx, r.Tenant, gs)
	}
	if err == nil {
		p.Gate, err = s.gate(ctx, r.WorkspaceRef)
	}
	return p, err
}
