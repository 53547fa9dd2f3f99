package browser

import (
	"context"
	"strings"
	"time"

	cdpbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/chromedp"
)

// Worker is the service worker whose script URL ends with suffix, as a
// Tab whose Eval and Exec run in its global scope (Await and the DOM
// actions need a page, which a worker has not). It waits up to d for
// the worker to run.
func (b *Tab) Worker(suffix string, d time.Duration) *Tab {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, d)
	defer cancel()
	// The tab's own origin's worker: the browser also runs the workers
	// of the package's earlier tests, each on its own origin.
	origin, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.origin`))
	if err != nil {
		b.t.Fatalf("browser: the tab's origin: %v", err)
	}
	for {
		infos, err := chromedp.Targets(ctx)
		if err != nil {
			b.t.Fatalf("browser: the service worker %s: %v", suffix, err)
		}
		for _, ti := range infos {
			if ti.Type == "service_worker" && strings.HasPrefix(ti.URL, origin+"/") && strings.HasSuffix(ti.URL, suffix) {
				wctx, wcancel := chromedp.NewContext(b.Ctx, chromedp.WithTargetID(ti.TargetID))
				b.t.Cleanup(wcancel)
				// The first call attaches, for as long as the context it
				// is given lives: wctx itself, not a call's timeout.
				if _, err := chromedp.Run(wctx, chromedp.Evaluate[bool](`true`)); err != nil {
					b.t.Fatalf("browser: attach to the service worker %s: %v", suffix, err)
				}
				return &Tab{t: b.t, Ctx: wctx}
			}
		}
		select {
		case <-ctx.Done():
			b.t.Fatalf("browser: no service worker %s running within %s", suffix, d)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// GrantNotifications lets origin show notifications in the shared
// browser's tabs (New's), as a person who allowed them in a prompt would
// have.
func (b *Tab) GrantNotifications(origin string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 10*time.Second)
	defer cancel()
	if _, err := chromedp.CallBrowser(ctx, cdpbrowser.SetPermission, cdpbrowser.SetPermissionParams{
		Permission: &cdpbrowser.PermissionDescriptor{Name: "notifications"}, Setting: cdpbrowser.PermissionSettingGranted,
		Origin: origin}); err != nil {
		b.t.Fatalf("browser: grant notifications to %s: %v", origin, err)
	}
}
