package auth

import (
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"
)

// Failures throttles failed authentication per source (R-SIGNIN-5, issue
// 35): once a source has failed Limit times in a window, every attempt of
// it that carries a credential is refused until the window ends, before
// the credential is looked up, so that a hit cannot be told from a miss.
// Windows are fixed (they start at a source's first failure); each
// closes with one Summary per source and tenant, which the caller audits,
// never one row per attempt. Failures never sees a token.
//
// A source is the connection's address: an IPv4 address, or an IPv6 /64
// (one host's usual share). Behind a reverse proxy every client is the
// proxy's address; the coordinator serves its API itself.
type Failures struct {
	// Limit is how many failures a source may have in a window. When
	// zero, DefaultFailureLimit.
	Limit int
	// Window is how long a window lasts. When zero, DefaultFailureWindow.
	Window time.Duration

	mu    sync.Mutex
	m     map[string]*failWindow
	ended []Summary // of windows closed by Fail, for the next Sweep
	swept time.Time
}

// Defaults of Failures: generous enough that a person mistyping, or a
// script with a stale token retrying, is never stopped.
const (
	DefaultFailureLimit  = 30
	DefaultFailureWindow = time.Minute
	// maxSources bounds the memory: past it, a new source is not tracked
	// until a window ends.
	maxSources = 10000
)

type failWindow struct {
	start   time.Time
	n       int
	tenants map[string]int // failures per tenant named ("" for none)
}

// Summary is one source's failures in one window, for one tenant ("" when
// the attempts named no tenant).
type Summary struct {
	Source    string
	Tenant    string
	Failures  int
	Start     time.Time
	Window    time.Duration
	Throttled bool
}

func (f *Failures) limit() int {
	if f.Limit > 0 {
		return f.Limit
	}
	return DefaultFailureLimit
}

func (f *Failures) window() time.Duration {
	if f.Window > 0 {
		return f.Window
	}
	return DefaultFailureWindow
}

// Source is the throttling key of a request's remote address
// (host:port, or a bare host).
func Source(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap()
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64)
	return p.String()
}

// Blocked reports whether src is throttled at now, and when it may try
// again.
func (f *Failures) Blocked(src string, now time.Time) (retryAfter time.Duration, blocked bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.m[src]
	if w == nil || w.n < f.limit() {
		return 0, false
	}
	end := w.start.Add(f.window())
	if !now.Before(end) {
		return 0, false
	}
	return end.Sub(now), true
}

// Fail counts one failed attempt of src naming tenant ("" for none).
func (f *Failures) Fail(src, tenant string, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.m == nil {
		f.m = map[string]*failWindow{}
	}
	w := f.m[src]
	if w != nil && !now.Before(w.start.Add(f.window())) {
		f.ended = f.summariesLocked(src, w, f.ended)
		delete(f.m, src)
		w = nil
	}
	if w == nil {
		if len(f.m) >= maxSources {
			return
		}
		w = &failWindow{start: now, tenants: map[string]int{}}
		f.m[src] = w
	}
	w.n++
	w.tenants[tenant]++
}

func (f *Failures) summariesLocked(src string, w *failWindow, out []Summary) []Summary {
	for t, n := range w.tenants {
		out = append(out, Summary{Source: src, Tenant: t, Failures: n, Start: w.start, Window: f.window(), Throttled: w.n >= f.limit()})
	}
	return out
}

// Sweep returns the summaries of the windows that ended by now, oldest
// first, and forgets them. It does the work at most once a second.
func (f *Failures) Sweep(now time.Time) []Summary {
	f.mu.Lock()
	defer f.mu.Unlock()
	if now.Sub(f.swept) < time.Second && now.After(f.swept) {
		return nil
	}
	f.swept = now
	out := f.ended
	f.ended = nil
	for src, w := range f.m {
		if !now.Before(w.start.Add(f.window())) {
			out = f.summariesLocked(src, w, out)
			delete(f.m, src)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.Start.Equal(b.Start) {
			return a.Start.Before(b.Start)
		}
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		return a.Tenant < b.Tenant
	})
	return out
}
