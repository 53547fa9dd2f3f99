// Package api serves the coordinator's public HTTP API with echo v4. This
// file is the house: construction, the one route table, the route
// authorizer (the only enforcement point, R-AUTH-3), the {ref} lookup
// before validation (R-API-3), the query check (R-API-10), error bodies
// (R-API-4), health and metrics. Each feature's handlers are one type in
// the feature's file (see Server); core.go is what they share.
//
// api never reads node files and never registers anything under
// /v1/m/session-cockpit/ (R-ED-2): that prefix answers the router's ordinary
// 404.
package api

import (
	"context"
	"crypto/ecdsa"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	olivares "github.com/olivares-dev/olivares"
	"github.com/olivares-dev/olivares/coordinator/accesslog"
	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/fleet"
	"github.com/olivares-dev/olivares/coordinator/outbound"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/vault"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/webpush"
	"github.com/olivares-dev/olivares/shared/wire"
)

// HeaderTenant is R-TEN-1's header.
const HeaderTenant = "X-Olivares-Tenant"

// Base is R-API-1's base path.
const Base = "/v1/m/sessions"

var tenantRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// ValidTenant reports whether s is a well-formed tenant id.
func ValidTenant(s string) bool { return tenantRe.MatchString(s) }

// Options configure the API.
type Options struct {
	Store   store.Store
	Fleet   *fleet.Fleet
	Version string
	// Ready reports readiness for /readyz. When nil, always ready.
	Ready func() error
	// Now is the clock of marks, names and audit rows; when nil,
	// time.Now. Tests inject one to see a snooze run out (R-SNZ-5).
	Now func() time.Time
	// Vault seals and opens the secrets runs are granted; nil refuses
	// them.
	Vault *vault.Vault
	// PublicURL is where people reach the API (scheme and host), when not
	// the address a request came in by (behind a TLS proxy): a webhook's
	// action URLs start with it. When empty, the request's own.
	PublicURL string
	// Attach tunes the attach relay: buffers, deadlines, the cap per
	// principal. Zero values take the defaults.
	Attach AttachOptions
	// Continue tunes the continues at a limit's reset (continue.go).
	Continue ContinueOptions
	// Log gets the API's lines (echo's own included). When nil,
	// discarded. The access lines are accesslog's.
	Log *slog.Logger
	// Metrics registers the API's metrics (R-OBS-7). When nil, they are
	// kept but not exported.
	Metrics prometheus.Registerer
	// ChangeLog is how many changes the change stream keeps for a resume
	// (R-CHG-4). When zero, DefaultChangeLog.
	ChangeLog int
	// ChangeStreams caps the open change streams (R-CHG-6). Zero values
	// take the defaults.
	ChangeStreams ChangeStreamLimits
	// Outbound checks the URLs of webhooks and push subscriptions and
	// sends their deliveries (R-NOTIF-9); when nil, a guard that refuses
	// every internal address. WebhookBackoff is the wait before each
	// retry; when nil, DefaultWebhookBackoff.
	Outbound       *outbound.Guard
	WebhookBackoff []time.Duration
	// VAPIDKey is the coordinator's Web Push key (R-NOTIF-8); when nil,
	// one is made for this process. VAPIDSubject is the contact VAPID
	// names; when "", DefaultVAPIDSubject.
	VAPIDKey     *ecdsa.PrivateKey
	VAPIDSubject string
	// Failures throttles failed authentication per source
	// (R-SIGNIN-5); when nil, one with the defaults. The console's
	// sign-in shares it (Server.Failures).
	Failures *auth.Failures
}

// DefaultVAPIDSubject is the contact a push service is given when the
// configuration names none.
const DefaultVAPIDSubject = "mailto:olivares@localhost"

// Server is the API's handler: construction, the route table, the
// middleware (authorize, lookupFirst, the query check) and error bodies.
// The handlers are one type per feature (runs.go's runAPI, marks.go's
// markAPI, …), each holding the shared core and only what else it uses.
//
// To add a feature: write its handler type in its own file,
//
//	type fooAPI struct{ *core }
//	func (s *fooAPI) routes() []Route { return []Route{{http.MethodGet, Base + "/foo", auth.PermRunRead, s.list, query("limit")}} }
//
// and add it to features in New. Its routes pass the same authorizer and
// lookups as every other; any query parameter a GET does not declare is
// refused before its handler runs.
type Server struct {
	*core
	echo       *echo.Echo
	fails      *auth.Failures
	features   []feature // the handler types; routes() is their table
	continues  *continueAPI
	people     *peopleAPI
	workspaces *workspaceAPI
}

// A feature is a handler type that contributes its routes to the table.
type feature interface{ routes() []Route }

// New builds the router.
func New(o Options) *Server {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	if o.Now == nil {
		o.Now = time.Now
	}
	o.Attach.setDefaults()
	o.ChangeStreams.setDefaults()
	o.Continue.setDefaults()
	if o.VAPIDSubject == "" {
		o.VAPIDSubject = DefaultVAPIDSubject
	}
	c := &core{o: o, log: logging.OrDiscard(o.Log).With(logging.KeyComponent, "api"), changes: newChangeLog(o.ChangeLog)}
	s := &Server{core: c, echo: e}
	if s.fails = o.Failures; s.fails == nil {
		s.fails = &auth.Failures{}
	}
	vapid := o.VAPIDKey
	if vapid == nil {
		vapid, _ = webpush.NewVAPIDKey()
	}
	c.notify = newNotifier(c, vapid)
	if o.Store != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		c.notify.prime(ctx)
		cancel()
	}
	c.metrics = newMetrics(o.Store, o.Metrics)
	s.continues = &continueAPI{core: c, wake: make(chan struct{}, 1)}
	s.people = &peopleAPI{c}
	s.workspaces = &workspaceAPI{c}
	runs, handoffs := &runAPI{core: c}, &handoffAPI{core: c, continues: s.continues}
	s.continues.onLimit = &onLimitAPI{core: c, continues: s.continues, runs: runs, handoffs: handoffs}
	c.limitSeen = s.continues.onLimit.onLimitSeen
	signins := &signinAPI{core: c}
	s.features = []feature{
		s.people, &fleetAPI{c}, &auditAPI{c},
		runs, &requestAPI{c}, &markAPI{c}, s.workspaces, signins, &vaultAPI{c},
		&diffAPI{c}, handoffs, &activityAPI{c},
		&codexAPI{catalog{c, "Codex", "thread", codexHost}}, &claudeAPI{catalog{c, "Claude Code", "session", claudeHost}}, &changeAPI{core: c},
		&webhookAPI{c}, &pushAPI{core: c, vapid: vapid}, &usageAPI{c}, s.continues, s.continues.onLimit,
	}
	if o.Fleet != nil {
		o.Fleet.Observe(fleetObserver{c, signins}) // R-CHG-1, R-ACCT-10
	}
	e.Logger = &echoLogger{l: s.log}
	e.HTTPErrorHandler = s.errorHandler
	// R-OBS-4: the request id accesslog chose (or one made here when the
	// API is served alone), in the response header and the context.
	e.Pre(middleware.RequestIDWithConfig(middleware.RequestIDConfig{
		Generator: accesslog.NewID,
		RequestIDHandler: func(c echo.Context, id string) {
			if logging.RequestID(c.Request().Context()) != id {
				c.SetRequest(c.Request().WithContext(logging.WithRequestID(c.Request().Context(), id)))
			}
		},
	}))
	// A handler's panic is a 500 with the request id, and a line with
	// its stack, never a dropped connection.
	e.Use(middleware.RecoverWithConfig(middleware.RecoverConfig{
		LogErrorFunc: func(c echo.Context, err error, stack []byte) error {
			s.log.ErrorContext(c.Request().Context(), "handler panic", logging.Err(err), "stack", string(stack))
			return err
		},
	}))
	e.Use(func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			ref := ""
			if strings.Contains(c.Path(), "/runs/:ref") {
				ref = c.Param("ref")
			}
			accesslog.SetRoute(c.Request().Context(), c.Path(), ref)
			return next(c)
		}
	})

	e.GET("/healthz", func(c echo.Context) error { return c.JSON(http.StatusOK, map[string]string{"status": "ok"}) })
	e.GET("/readyz", s.readyz)
	// The API document, unauthenticated: the bytes committed in the
	// repository, and their JSON form converted once here.
	docJSON, err := olivares.OpenAPIJSON()
	if err != nil {
		// The embedded document is fixed at build time and a test converts
		// it: this is a broken build, not a runtime condition.
		panic("api: openapi.yaml does not convert to JSON: " + err.Error())
	}
	e.GET("/v1/openapi.yaml", func(c echo.Context) error { return c.Blob(http.StatusOK, "application/yaml", olivares.OpenAPIYAML) })
	e.GET("/v1/openapi.json", func(c echo.Context) error { return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, docJSON) })

	(&actionAPI{c}).register(e) // R-NOTIF-11: the token is the credential
	for _, r := range s.routes() {
		e.Add(r.Method, r.Path, r.handler, s.authorize(r.Perm, noTenant[r.Path]), s.lookupFirst(r.Path), onlyQuery(r))
	}
	return s
}

// lookupFirst resolves a route's {ref} in the caller's tenant before the
// handler reads the request: an unknown or other tenant's run, workspace
// or profile is 404 whatever the body or query holds (R-API-3: lookup
// before validation; R-TEN-3). The handler takes what it found from
// refRun, refWorkspace or refProfile instead of reading the store again.
func (s *Server) lookupFirst(path string) echo.MiddlewareFunc {
	var lookup func(c echo.Context) (any, error)
	switch {
	case strings.Contains(path, "/runs/:ref"):
		lookup = func(c echo.Context) (any, error) {
			return s.runInTenant(c.Request().Context(), CallerOf(c).Tenant, c.Param("ref"))
		}
	case strings.Contains(path, "/workspaces/:ref"):
		lookup = func(c echo.Context) (any, error) {
			return s.workspaceInTenant(c.Request().Context(), CallerOf(c).Tenant, c.Param("ref"))
		}
	case strings.Contains(path, "/profiles/:ref"):
		lookup = func(c echo.Context) (any, error) {
			return s.profileInTenant(c.Request().Context(), CallerOf(c).Tenant, c.Param("ref"))
		}
	}
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if lookup == nil {
			return next
		}
		return func(c echo.Context) error {
			v, err := lookup(c)
			if err != nil {
				return err
			}
			c.Set(refKey, v)
			return next(c)
		}
	}
}

// refKey holds the {ref} lookupFirst resolved.
const refKey = "olivares.ref"

// Route is one authorized route: the authorizer checks Perm before the
// handler runs (R-AUTH-3). Perm "" needs only authentication and tenant;
// a path in noTenant needs only authentication. Query is the query
// parameters a GET takes: any other is 400 bad_query before the handler
// runs (R-API-10).
type Route struct {
	Method, Path, Perm string
	handler            echo.HandlerFunc
	Query              []string
}

// query names a GET route's query parameters.
func query(names ...string) []string { return names }

// noTenant are the routes a caller reaches before it has picked a tenant.
var noTenant = map[string]bool{"/v1/tenants": true}

// routes is the route table: every authorized route is here, nowhere else.
func (s *Server) routes() []Route {
	var out []Route
	for _, f := range s.features {
		out = append(out, f.routes()...)
	}
	return out
}

// onlyQuery refuses a GET's query parameter its route does not declare
// (R-API-10), after lookupFirst (R-API-3).
func onlyQuery(r Route) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		if r.Method != http.MethodGet {
			return next
		}
		return func(c echo.Context) error {
			for k := range c.QueryParams() {
				if slices.Contains(r.Query, k) {
					continue
				}
				if len(r.Query) == 0 {
					return apierr.BadRequest("bad_query", "unknown query parameter %q; this route takes none", k)
				}
				return apierr.BadRequest("bad_query", "unknown query parameter %q; this route takes %s", k, strings.Join(r.Query, ", "))
			}
			return next(c)
		}
	}
}

// Close stops what the API runs in the background: the webhooks'
// deliveries and their retries (R-NOTIF-4).
func (s *Server) Close() { s.notify.close() }

// Routes lists the authorized routes (for the R-AUTH-8 walk).
func (s *Server) Routes() []Route { return s.routes() }

// The ways in past the HTTP routes, for the operator's admin socket and
// dev mode: the same code the routes run.

// NewPrincipal is peopleAPI.NewPrincipal.
func (s *Server) NewPrincipal(ctx context.Context, tenant, name, role, kind string, actor apitypes.AuditActor) (string, store.Principal, store.Credential, error) {
	return s.people.NewPrincipal(ctx, tenant, name, role, kind, actor)
}

// NewCredential is peopleAPI.NewCredential.
func (s *Server) NewCredential(ctx context.Context, p store.Principal, spec store.Credential, actor apitypes.AuditActor) (string, store.Credential, error) {
	return s.people.NewCredential(ctx, p, spec, actor)
}

// CreateProfile registers a profile as the local operator (dev mode).
func (s *Server) CreateProfile(ctx context.Context, tenant string, req apitypes.ProfileCreate) (apitypes.Profile, error) {
	return s.workspaces.createProfile(ctx, tenant, req, OperatorActor)
}

// CreateWorkspace registers a directory of a node as the local operator.
func (s *Server) CreateWorkspace(ctx context.Context, tenant string, req apitypes.WorkspaceCreate) (apitypes.Workspace, error) {
	return s.workspaces.createWorkspace(ctx, tenant, req, OperatorActor)
}

// RunContinuer fires the continues when they are due, until ctx ends
// (continueAPI.RunContinuer).
func (s *Server) RunContinuer(ctx context.Context) { s.continues.RunContinuer(ctx) }

// Handler returns the http.Handler.
func (s *Server) Handler() http.Handler { return s.echo }

// errorHandler writes every error, the router's own 404 and 405 included,
// as an R-API-4 body with the request's id (R-OBS-4).
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var ae *apierr.Error
	var we *wire.Error
	var he *echo.HTTPError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &we):
		ae = nodeError(we)
	case errors.As(err, &he):
		ae = &apierr.Error{Status: he.Code, Code: strings.ReplaceAll(strings.ToLower(http.StatusText(he.Code)), " ", "_"), Message: strings.ToLower(http.StatusText(he.Code))}
		if he.Code == http.StatusNotFound {
			ae.Message = "no such route or resource"
		}
	default:
		s.log.ErrorContext(c.Request().Context(), "internal error", "method", c.Request().Method, "route", c.Path(), logging.Err(err))
		ae = apierr.As(err)
	}
	if ae.Status == 0 {
		ae.Status = http.StatusInternalServerError
	}
	if c.Request().Method == http.MethodHead {
		c.NoContent(ae.Status)
		return
	}
	c.JSON(ae.Status, apierr.BodyOf(ae, c.Response().Header().Get(echo.HeaderXRequestID)))
}

// nodeError is an agent's error as the API answers it: passed through
// unchanged (status, code, message), except the "unknown op" of an agent
// older than this coordinator, which is not a missing resource (404) but a
// node to upgrade.
func nodeError(we *wire.Error) *apierr.Error {
	if we.Code == "unknown_op" {
		return apierr.New(http.StatusBadGateway, "agent_outdated", "the node's olivares-agent is older than this coordinator and does not know this call; upgrade it")
	}
	return (*apierr.Error)(we)
}

// Caller is the authenticated principal of a request, in a tenant, with
// the credential it presented.
type Caller struct {
	Principal  store.Principal
	Credential store.Credential
	Tenant     string
	Role       string
}

// Owner is whose per-caller marks the request reads and writes (R-PIN-6).
func (c Caller) Owner() string { return store.MarkOwner(c.Principal, c.Credential) }

// Actor is the caller as an audit row names it (R-AUD-3).
func (c Caller) Actor() apitypes.AuditActor { return store.AuditActor(c.Principal, c.Credential) }

const callerKey = "olivares.caller"

// CallerOf returns the request's caller (set by the authorizer).
func CallerOf(c echo.Context) Caller { v, _ := c.Get(callerKey).(Caller); return v }

// authorize is the route authorizer (R-API-3 order): authentication 401 →
// tenant header 400 / membership 403 → permission 403. perm "" checks only
// the first two; noTenant only the first.
//
// The credential is the Authorization bearer token or, for the console, the
// session cookie. A state-changing request carrying only the cookie must
// come from the console's own origin (403 cross_site_refused): SameSite
// counts every port of a host as one site, so the cookie alone proves
// nothing about the page that sent it. The tenant header a route needs
// already forces a CORS preflight, which this API never answers.
func (s *Server) authorize(perm string, noTenant bool) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			req := c.Request()
			tok, viaCookie := BearerOrCookie(req)
			if tok == "" {
				return apierr.Unauthenticated()
			}
			now, src := s.o.Now(), auth.Source(req.RemoteAddr)
			s.auditFailures(req.Context(), now)
			if after, ok := s.fails.Blocked(src, now); ok {
				return TooManyFailures(c.Response().Header(), after)
			}
			p, cred, err := ResolveToken(req.Context(), s.o.Store, now, tok)
			if err != nil {
				// An unknown token is a guess or a mistake; an expired
				// or outdated one is a real token, not counted.
				var ae *apierr.Error
				if errors.As(err, &ae) && ae.Code == "unauthenticated" {
					s.fails.Fail(src, req.Header.Get(HeaderTenant), now)
				}
				return err
			}
			if t := req.Header.Get(HeaderTenant); ValidTenant(t) {
				accesslog.SetCaller(req.Context(), p.ID, t)
			} else {
				accesslog.SetCaller(req.Context(), p.ID, "")
			}
			if viaCookie && auth.Unsafe(req.Method) && auth.CrossSite(req) {
				return CrossSiteRefused()
			}
			if noTenant {
				c.Set(callerKey, Caller{Principal: p, Credential: cred})
				return next(c)
			}
			tenant := req.Header.Get(HeaderTenant)
			if !ValidTenant(tenant) {
				return apierr.TenantRequired()
			}
			role, ok := p.Roles[tenant]
			if !ok {
				return apierr.TenantForbidden(tenant)
			}
			if !cred.Serves(p, tenant) {
				return CredentialOtherTenant(cred, tenant)
			}
			if perm != "" && !auth.Grants(role, perm) {
				return apierr.PermissionDenied(perm)
			}
			c.Set(callerKey, Caller{Principal: p, Credential: cred, Tenant: tenant, Role: role})
			return next(c)
		}
	}
}

// ResolveToken is every path that takes a bearer token or the session
// cookie (R-LIFE-10): an unknown token is 401 unauthenticated, an expired
// one 401 session_expired, and one stored before credentials had a tenant
// whose principal now holds roles in several tenants 401
// credential_outdated (store.Credential.Serves). Which tenant the
// credential serves is the caller's to check.
func ResolveToken(ctx context.Context, st store.Store, now time.Time, tok string) (store.Principal, store.Credential, error) {
	p, cred, err := st.PrincipalByCredential(ctx, auth.Hash(tok))
	if errors.Is(err, store.ErrNotFound) {
		return store.Principal{}, store.Credential{}, apierr.Unauthenticated()
	}
	if err != nil {
		return store.Principal{}, store.Credential{}, err
	}
	if cred.Expired(now) {
		return store.Principal{}, store.Credential{}, apierr.New(http.StatusUnauthorized, "session_expired", "this session or token has expired; sign in again")
	}
	if cred.Tenant == "" {
		if len(p.Roles) != 1 {
			return store.Principal{}, store.Credential{}, apierr.New(http.StatusUnauthorized, "credential_outdated",
				"this token was issued before tokens belonged to one tenant, and its holder now has roles in several; sign in again (olivares login), or ask an admin for a new token")
		}
		// Its one tenant is the only one it could have been minted in:
		// what is derived from it carries that tenant.
		for t := range p.Roles {
			cred.Tenant = t
		}
	}
	return p, cred, nil
}

// Failures is the throttle of failed authentication the API counts in;
// the console's sign-in counts in it too (R-SIGNIN-5).
func (s *Server) Failures() *auth.Failures { return s.fails }

// TooManyFailures is the 429 of a source throttled after failed
// authentication, with Retry-After (R-SIGNIN-5).
func TooManyFailures(h http.Header, after time.Duration) *apierr.Error {
	secs := int((after + time.Second - 1) / time.Second)
	h.Set("Retry-After", strconv.Itoa(secs))
	return apierr.New(http.StatusTooManyRequests, "too_many_failures",
		"too many failed sign-ins or unknown tokens from this address; try again in %d s with a valid token", secs)
}

// auditFailures writes the summaries of the failure windows that have
// ended (R-SIGNIN-5): one log line per source and tenant named, and one
// audit row in that tenant when it exists; never one row per attempt,
// never a token. A window is summed up at the first request after it
// ends.
func (s *Server) auditFailures(ctx context.Context, now time.Time) {
	for _, sum := range s.fails.Sweep(now) {
		s.log.WarnContext(ctx, "failed authentication", "source", sum.Source, logging.KeyTenant, sum.Tenant,
			"failures", sum.Failures, "window_start", sum.Start.UTC(), "throttled", sum.Throttled)
		if !ValidTenant(sum.Tenant) {
			continue
		}
		if _, err := s.o.Store.GetTenant(ctx, sum.Tenant); err != nil {
			continue
		}
		s.Audit(ctx, sum.Tenant, apitypes.AuditActor{CredentialID: "unauthenticated", Kind: apitypes.ActorAnonymous}, apitypes.AuditAuthFailures,
			apitypes.AuditTarget{Tenant: sum.Tenant}, map[string]any{"source": sum.Source, "failures": sum.Failures,
				"window_seconds": int(sum.Window / time.Second), "throttled": sum.Throttled})
	}
}

// CredentialOtherTenant is the 403 for a credential presented in a tenant
// its principal belongs to but it was not issued for (R-LIFE-9).
func CredentialOtherTenant(c store.Credential, tenant string) *apierr.Error {
	return apierr.New(http.StatusForbidden, "credential_other_tenant",
		"this token was issued for tenant %q and works there only, not in %q; use a token issued in %q", c.Tenant, tenant, tenant)
}

// BearerOrCookie returns the request's token: the Authorization bearer
// token, else the console's session cookie (viaCookie).
func BearerOrCookie(r *http.Request) (tok string, viaCookie bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		t, _ := strings.CutPrefix(h, "Bearer ")
		if t == h {
			return "", false
		}
		return t, false
	}
	if ck, err := r.Cookie(auth.SessionCookie); err == nil && ck.Value != "" {
		return ck.Value, true
	}
	return "", false
}

// CrossSiteRefused is the 403 for a cookie-authenticated write sent by a
// page of another origin.
func CrossSiteRefused() *apierr.Error {
	return apierr.New(http.StatusForbidden, "cross_site_refused", "this request came from a page of another site; the console's session only acts for the console's own pages (scripts use an Authorization: Bearer token)")
}

func (s *Server) readyz(c echo.Context) error {
	if s.o.Ready != nil {
		if err := s.o.Ready(); err != nil {
			return apierr.New(http.StatusServiceUnavailable, "not_ready", "%v", err)
		}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

// MetricsHandler serves g's metrics at /metrics in the Prometheus text
// format, and nothing else. It is served on its own listener, never on the
// public API (issue 16: the API answers no unauthenticated route but
// health). When token is not empty, a scrape must send it as a bearer
// token.
func MetricsHandler(g prometheus.Gatherer, token string) http.Handler {
	want := []byte("Bearer " + token)
	prom := promhttp.HandlerFor(g, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			writeError(w, apierr.NotFound("route", r.URL.Path))
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			writeError(w, apierr.New(http.StatusMethodNotAllowed, "method_not_allowed", "/metrics answers GET"))
			return
		}
		if token != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			writeError(w, apierr.Unauthenticated())
			return
		}
		prom.ServeHTTP(w, r)
	})
}

func writeError(w http.ResponseWriter, e *apierr.Error) { apierr.Write(w, e) }
