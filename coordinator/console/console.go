// Package console serves the web console at / of the coordinator: the
// embedded assets (plain ES modules, no build step, no CDN) and the sign-in
// routes that put a session cookie in the browser. Everything else the
// console does goes through the public API under /v1, as any client would.
//
// console never reads or writes anything but credentials and sign-in
// links: it has no private endpoint and no shortcut into the API.
package console

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/coordinator/accesslog"
	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/sso"
	"github.com/olivares-dev/olivares/coordinator/store"
)

//go:embed assets
var assets embed.FS

// Options configure the console.
type Options struct {
	Store store.Store
	// API serves everything the console does not: /v1/..., /healthz,
	// /readyz, and the ordinary 404 (/metrics has its own listener).
	API http.Handler
	// Now is the clock of sign-in links and sessions; when nil, time.Now.
	Now func() time.Time
	// SessionTTL is how long a console session lasts; when zero, 30 days.
	SessionTTL time.Duration
	// SSO signs people in with the organisation's OpenID Connect
	// provider; nil leaves the /v1/sso routes out (404).
	SSO *sso.Provider
	// Failures throttles failed sign-ins per source, shared with the API
	// (api.Server.Failures, R-SIGNIN-5); when nil, one of its own.
	Failures *auth.Failures
}

// Console is the coordinator's whole HTTP handler: the console, its
// sign-in routes, and the API behind them.
type Console struct {
	o     Options
	files map[string]asset
	index asset
}

type asset struct {
	ctype string
	plain []byte
	gz    []byte
	etag  string
}

// CSP allows nothing but the console's own files: no inline script, no
// eval, no inline style, no framing (the console is never inside another
// page), and connections only back to this origin.
const CSP = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// New loads and compresses the embedded assets once.
func New(o Options) *Console {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = 30 * 24 * time.Hour
	}
	if o.Failures == nil {
		o.Failures = &auth.Failures{}
	}
	c := &Console{o: o, files: map[string]asset{}}
	err := fs.WalkDir(assets, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assets.ReadFile(p)
		if err != nil {
			return err
		}
		c.files[strings.TrimPrefix(p, "assets/")] = newAsset(p, b)
		return nil
	})
	if err != nil {
		panic("console: embedded assets: " + err.Error()) // compiled in: cannot fail at run time
	}
	c.index = c.files["index.html"]
	return c
}

func newAsset(name string, b []byte) asset {
	ct := mime.TypeByExtension(path.Ext(name))
	switch path.Ext(name) {
	case ".js":
		ct = "text/javascript; charset=utf-8"
	case ".css":
		ct = "text/css; charset=utf-8"
	case ".html":
		ct = "text/html; charset=utf-8"
	case ".svg":
		ct = "image/svg+xml"
	case ".json", ".webmanifest":
		ct = "application/json"
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(b)
	zw.Close()
	sum := sha256.Sum256(b)
	return asset{ctype: ct, plain: b, gz: gz.Bytes(), etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
}

// Paths the console's router answers with index.html: its screens, and one
// item of a collection (/runs/{ref}, /workspaces/{ref}, /nodes/{id}).
func pageRoute(p string) bool {
	switch p {
	case "/", "/signin", "/runs", "/workspaces", "/nodes", "/codex", "/claude", "/audit", "/profiles", "/webhooks", "/usage":
		return true
	}
	for _, prefix := range []string{"/runs/", "/workspaces/", "/nodes/"} {
		if rest, ok := strings.CutPrefix(p, prefix); ok {
			return rest != "" && !strings.Contains(rest, "/")
		}
	}
	return false
}

// SecurityHeaders are set on every response of the coordinator's HTTP
// listener, console and API alike.
func SecurityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
}

// ServeHTTP routes between the console and the API.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	SecurityHeaders(w.Header())
	p := r.URL.Path
	// The access line's route (R-OBS-3): a template, never a secret; the
	// API names its own routes.
	route := func(t string) { accesslog.SetRoute(r.Context(), t, "") }
	switch {
	case p == SigninPath:
		route(SigninPath)
		c.signin(w, r)
	case p == SignoutPath:
		route(SignoutPath)
		c.signout(w, r)
	case (c.o.SSO != nil && strings.HasPrefix(p, sso.InfoPath) || p == sso.InfoPath) && c.serveSSO(w, r):
	case strings.HasPrefix(p, "/assets/") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		a, ok := c.files[strings.TrimPrefix(p, "/assets/")]
		if !ok {
			c.o.API.ServeHTTP(w, r)
			return
		}
		route("/assets/*")
		c.serve(w, r, a, "no-cache")
	case pageRoute(p) && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		route("/{console page}")
		c.serve(w, r, c.index, "no-store")
	default:
		c.o.API.ServeHTTP(w, r)
	}
}

func (c *Console) serve(w http.ResponseWriter, r *http.Request, a asset, cache string) {
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("Cache-Control", cache)
	h.Set("ETag", a.etag)
	h.Add("Vary", "Accept-Encoding")
	if inm := r.Header.Get("If-None-Match"); inm != "" && inm == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	body := a.plain
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		h.Set("Content-Encoding", "gzip")
		body = a.gz
	}
	h.Set("Content-Length", itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

func acceptsGzip(ae string) bool {
	for _, part := range strings.Split(ae, ",") {
		name, q, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(name) == "gzip" && strings.ReplaceAll(strings.TrimSpace(q), " ", "") != "q=0" {
			return true
		}
	}
	return false
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// FirstLoad are the files a browser fetches to show the sessions list:
// the page, its style sheet and icon, and the modules the list imports.
var FirstLoad = []string{"index.html", "app.css", "icon.svg", "bell.svg", "app.js", "api.js", "dom.js", "attention.js", "list.js", "sse.js", "launch.js", "ui.js"}

// Sizes reports each asset's size, plain and gzip-compressed, by path
// under /assets/ ("index.html" is the page itself): the first-load budget
// test and the benchmark read it.
func (c *Console) Sizes() map[string][2]int {
	out := map[string][2]int{}
	for k, a := range c.files {
		out[k] = [2]int{len(a.plain), len(a.gz)}
	}
	return out
}
