// Package apiclient is the one Go client of the coordinator's public API:
// a typed method per route (runs and their sub-routes, marks, profiles,
// workspaces, project config, vault, the Codex catalog, nodes, audit,
// whoami, tenants, health), Do for a caller that needs the raw answer, and Attach,
// a run's output stream read with shared/sse that can reconnect by itself.
// The olivares CLI, the integration harness and the benchmarks all call
// the API through it.
//
// It never retries a call on its own (only an attach stream asked to
// reconnect does), never reads past a response limit into memory, and
// turns every error answer into one *Error carrying its status, code and
// message.
package apiclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/sse"
)

// Base is the base path of the session routes (R-API-1); the profile,
// workspace, vault and catalog routes live under it too.
const Base = "/v1/m/sessions"

// HeaderTenant is the tenant header (R-TEN-1).
const HeaderTenant = "X-Olivares-Tenant"

// MaxResponse bounds the body of an answer read into memory. The largest
// the API sends is a Codex turn page of at most 20 MiB.
const MaxResponse = 64 << 20

// Config is what a Client needs.
type Config struct {
	// URL is the API's base URL, such as https://coord.example:7443.
	URL string
	// Token is the bearer token; "" sends no Authorization header.
	Token string
	// Tenant is sent as X-Olivares-Tenant; "" sends no header.
	Tenant string
	// HTTPClient sends every request; when nil, http.DefaultClient. The
	// CLI passes one with its TLS roots; tests one whose transport checks
	// each request and answer against the API document. Its Timeout, if
	// any, also bounds attach streams: leave it zero and use Timeout.
	HTTPClient *http.Client
	// Timeout bounds each call, and the wait for an attach stream's
	// response headers (never the stream itself). When zero, only the
	// context bounds them.
	Timeout time.Duration
	// CheckEvent, when not nil, sees every event an attach stream reads,
	// with the request that opened the connection, before the caller
	// does; an error ends the stream with it. The test harness validates
	// events against the API document with it.
	CheckEvent func(req *http.Request, ev sse.Event) error
}

// Client calls the API as one credential in one tenant. It is safe for
// concurrent use.
type Client struct {
	cfg  Config
	base string
	hc   *http.Client
}

// New returns a client for cfg.
func New(cfg Config) *Client {
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	return &Client{cfg: cfg, base: strings.TrimRight(cfg.URL, "/"), hc: hc}
}

// Config returns the client's configuration.
func (c *Client) Config() Config { return c.cfg }

// With returns a client like c but for token and tenant.
func (c *Client) With(token, tenant string) *Client {
	cfg := c.cfg
	cfg.Token, cfg.Tenant = token, tenant
	return New(cfg)
}

// Error is an error answer of the API (R-API-4): its HTTP status, the
// stable code and the sentence of its body.
type Error struct {
	Method, Path string // the request that got it
	Status       int
	// Code is the body's error code; "" when the body was not an API
	// error (a proxy's page, say).
	Code    string
	Message string
	// Body is the whole body, for errors that carry more than the code
	// and message (a refused Codex turn page's cursors).
	Body []byte
}

func (e *Error) Error() string {
	if e.Code == "" {
		return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status)
	}
	return fmt.Sprintf("%s (%s)", e.Message, e.Code)
}

// StatusOf returns the HTTP status of an *Error in err's chain, or 0.
func StatusOf(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// CodeOf returns the code of an *Error in err's chain, or "".
func CodeOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// ErrUnreachable wraps every failure to get an answer at all: no
// connection, a TLS failure, a timeout.
var ErrUnreachable = errors.New("cannot reach the coordinator")

// unreachable wraps err, naming the API's URL.
func (c *Client) unreachable(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err // its text repeats the method and URL
	}
	return fmt.Errorf("%w at %s: %w", ErrUnreachable, c.base, err)
}

// Response is an answer, whatever its status.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	// Method and Path are those of the request.
	Method, Path string
}

// Err is nil for a 2xx answer and an *Error for any other.
func (r *Response) Err() error {
	if r.Status >= 200 && r.Status < 300 {
		return nil
	}
	return errorOf(r.Method, r.Path, r.Status, r.Body)
}

// errorOf reads an error body, the API's envelope (apierr.Body).
func errorOf(method, path string, status int, body []byte) *Error {
	var b apierr.Body
	e := &Error{Method: method, Path: path, Status: status, Body: body}
	if json.Unmarshal(body, &b) == nil && b.Error != nil {
		e.Code, e.Message = b.Error.Code, b.Error.Message
	}
	if e.Message == "" {
		e.Message = strings.ToLower(http.StatusText(status))
		if e.Message == "" {
			e.Message = "status " + strconv.Itoa(status)
		}
	}
	return e
}

// Do sends one request and returns the answer whatever its status; the
// error is for no answer at all. path is the path and query under the
// API's URL. body is nil for none, a []byte sent as is, an io.Reader read
// to its end, or any other value sent as JSON; a body is sent with
// Content-Type: application/json. hdr adds request headers (nil for none).
func (c *Client) Do(ctx context.Context, method, path string, body any, hdr http.Header) (*Response, error) {
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	case io.Reader:
		rd = b
	default:
		j, err := json.Marshal(b)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encoding the body: %w", method, path, err)
		}
		rd = bytes.NewReader(j)
	}
	if c.cfg.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.Timeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, method, path, rd)
	if err != nil {
		return nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, vs := range hdr {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.unreachable(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponse+1))
	if err != nil {
		return nil, c.unreachable(fmt.Errorf("reading the answer to %s %s: %w", method, path, err))
	}
	if len(raw) > MaxResponse {
		return nil, fmt.Errorf("%s %s: the answer is over %d bytes", method, path, MaxResponse)
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: raw, Method: method, Path: path}, nil
}

func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	if c.cfg.Tenant != "" {
		req.Header.Set(HeaderTenant, c.cfg.Tenant)
	}
	return req, nil
}

// call sends body (nil for none) and decodes a 2xx answer into out (nil to
// drop it); any other answer is an *Error.
func (c *Client) call(ctx context.Context, method, path string, body, out any) error {
	resp, err := c.Do(ctx, method, path, body, nil)
	if err != nil {
		return err
	}
	if err := resp.Err(); err != nil {
		return err
	}
	if out == nil || len(resp.Body) == 0 {
		return nil
	}
	if err := json.Unmarshal(resp.Body, out); err != nil {
		return fmt.Errorf("%s %s: the coordinator's answer does not decode: %w", method, path, err)
	}
	return nil
}

// get is call for GET with a query (nil or empty for none).
func (c *Client) get(ctx context.Context, path string, q url.Values, out any) error {
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	return c.call(ctx, http.MethodGet, path, nil, out)
}

// esc escapes one path segment.
func esc(s string) string { return url.PathEscape(s) }

// RunPath is the path of run ref, or of one of its sub-routes: RunPath(r,
// "diff", "file") is /v1/m/sessions/runs/r/diff/file.
func RunPath(ref string, sub ...string) string {
	p := Base + "/runs/" + esc(ref)
	for _, s := range sub {
		p += "/" + s
	}
	return p
}

func setInt(q url.Values, k string, v int) {
	if v != 0 {
		q.Set(k, strconv.Itoa(v))
	}
}

func setStr(q url.Values, k, v string) {
	if v != "" {
		q.Set(k, v)
	}
}
