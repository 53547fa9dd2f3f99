// Package browser drives Debian's headless Chromium from Go tests
// (chromedp): one browser process per test binary, one tab per test. On a
// failed test it saves a screenshot and the page's console log under
// $TMPDIR/olivares-browser/<test>/ and prints where.
//
// Under the test command (OLIVARES_REAL_CLI=1 or OLIVARES_BROWSER=1) a
// missing browser fails the test; otherwise the test is skipped with the
// reason (scripts/install-browser installs it).
package browser

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

var (
	once     sync.Once
	allocCtx context.Context
	browser  context.Context
	stopAll  func()
	startErr error
	userDir  string
	execPath string
)

// Path is the Chromium binary: $OLIVARES_CHROMIUM, else chromium on PATH.
func Path() (string, error) {
	if p := os.Getenv("OLIVARES_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("chromium is not installed (run bash scripts/install-browser)")
}

// required reports whether a missing browser is a failure.
func required() bool {
	return os.Getenv("OLIVARES_REAL_CLI") == "1" || os.Getenv("OLIVARES_BROWSER") == "1"
}

func start() {
	execPath, startErr = Path()
	if startErr != nil {
		return
	}
	userDir, startErr = os.MkdirTemp("", "olv-chromium-")
	if startErr != nil {
		return
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(execPath),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.UserDataDir(userDir),
		chromedp.WindowSize(1280, 900),
	}
	var cancelAlloc, cancelBrowser context.CancelFunc
	allocCtx, cancelAlloc = chromedp.NewExecAllocator(context.Background(), opts...)
	browser, cancelBrowser = chromedp.NewContext(allocCtx)
	// Start the process now.
	if err := chromedp.Do(browser); err != nil {
		startErr = fmt.Errorf("start %s: %w", execPath, err)
	}
	stopAll = func() {
		cancelBrowser()
		cancelAlloc()
		os.RemoveAll(userDir)
	}
}

// Stop ends the shared browser process (call it from TestMain).
func Stop() {
	if stopAll != nil {
		stopAll()
	}
}

// Tab is one browser tab of a test.
type Tab struct {
	t   testing.TB
	Ctx context.Context
	mu  sync.Mutex
	log []string
}

// New opens a tab in the shared browser; it closes when the test ends.
// Tabs of New share one cookie jar: one signed-in person.
func New(t testing.TB) *Tab {
	t.Helper()
	return open(t)
}

// NewProfile opens a tab in a browser context of its own, with its own
// cookies, as a second device would be: another person can sign in there.
func NewProfile(t testing.TB) *Tab {
	t.Helper()
	return open(t, chromedp.WithNewBrowserContext())
}

func open(t testing.TB, opts ...chromedp.ContextOption) *Tab {
	t.Helper()
	once.Do(start)
	if startErr != nil {
		if required() {
			t.Fatalf("browser: %v", startErr)
		}
		t.Skipf("browser: %v", startErr)
	}
	tab := &Tab{t: t}
	ctx, cancel := chromedp.NewContext(browser, append(opts, chromedp.WithListener(func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventConsoleAPICalled:
			var parts []string
			for _, a := range e.Args {
				if len(a.Value) > 0 {
					parts = append(parts, string(a.Value))
				} else {
					parts = append(parts, a.Description)
				}
			}
			tab.add(fmt.Sprintf("console.%s: %s", e.Type, strings.Join(parts, " ")))
		case *runtime.EventExceptionThrown:
			d := e.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			tab.add(fmt.Sprintf("exception: %s (%s:%d)", msg, d.URL, d.LineNumber))
		case *cdplog.EventEntryAdded:
			// The browser's own lines: a failed request, a CSP refusal.
			tab.add(fmt.Sprintf("log.%s: %s %s", e.Entry.Level, e.Entry.Text, e.Entry.URL))
		}
	}))...)
	tab.Ctx = ctx
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("browser: new tab: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			tab.saveFailure()
		}
		cancel()
	})
	return tab
}

func (b *Tab) add(s string) {
	b.mu.Lock()
	b.log = append(b.log, time.Now().Format("15:04:05.000")+" "+s)
	b.mu.Unlock()
}

// Log is the page's console output, the browser's log lines ("log.error:
// ..." for a failed request) and exceptions so far.
func (b *Tab) Log() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.log...)
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// Dir is where a test's screenshots and logs go.
func Dir(t testing.TB) string {
	return filepath.Join(os.TempDir(), "olivares-browser", unsafeName.ReplaceAllString(t.Name(), "_"))
}

func (b *Tab) saveFailure() {
	dir := Dir(b.t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Logf("browser: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(b.Ctx, 10*time.Second)
	defer cancel()
	url, _ := chromedp.Run(ctx, chromedp.Location())
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		os.WriteFile(filepath.Join(dir, "screenshot.png"), png, 0o644)
	}
	os.WriteFile(filepath.Join(dir, "console.log"), []byte(strings.Join(b.Log(), "\n")+"\n"), 0o644)
	b.t.Logf("browser: the page was at %s; screenshot and console log in %s", url, dir)
}

// Do runs actions with a deadline, failing the test with what it was doing.
func (b *Tab) Do(what string, d time.Duration, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// Await waits until the JavaScript expression cond is truthy in the page,
// polled in the page itself (no sleep in the test).
func (b *Tab) Await(what, cond string, d time.Duration) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, d+5*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[chromedp.Void](cond, chromedp.WithPollingTimeout(d), chromedp.WithPollingInterval(20*time.Millisecond))); err != nil {
		var text string
		tctx, tcancel := context.WithTimeout(b.Ctx, 5*time.Second)
		text, _ = chromedp.Run(tctx, chromedp.Evaluate[string](`document.body ? document.body.innerText.slice(0, 2000) : ''`))
		tcancel()
		b.t.Fatalf("browser: waiting for %s (%s): %v\npage text:\n%s", what, cond, err, text)
	}
}

// Eval evaluates expr, awaiting a promise, and decodes the result.
func Eval[T any](b *Tab, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 60*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("browser: evaluate %s: %v", trim(expr), err)
	}
	return v
}

// Exec evaluates expr for its effect.
func (b *Tab) Exec(expr string) { b.t.Helper(); Eval[chromedp.Void](b, expr) }

// Click clicks the element matching the CSS selector once it is visible.
//
// A page that renders a part of itself again (the run header on a change
// event) may replace the element between finding it and clicking it; a
// person would click the new one, so the click looks it up again.
func (b *Tab) Click(sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	for {
		err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel)))
		if err == nil {
			return
		}
		if ctx.Err() != nil || !strings.Contains(err.Error(), "node with given id") {
			b.t.Fatalf("browser: click %s: %v", sel, err)
		}
	}
}

// Type types text into the element matching sel.
//
// An Enter ("\r" or "\n") is pressed as a keyboard does: one key-down
// carrying its text, so a page that handles the key (prevents its
// default) gets no newline. chromedp's own encoding adds a separate char
// event, which inserts one whatever the key-down's handler did.
func (b *Tab) Type(sel, text string) {
	b.t.Helper()
	b.Do("type into "+sel, 30*time.Second, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Focus(chromedp.CSS(sel)))
	parts := strings.Split(strings.ReplaceAll(text, "\n", "\r"), "\r")
	for i, part := range parts {
		if part != "" {
			b.Do("type into "+sel, 30*time.Second, chromedp.SendKeys(chromedp.CSS(sel), part))
		}
		if i == len(parts)-1 {
			break
		}
		ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
		for _, ev := range []input.DispatchKeyEventParams{
			{Type: input.DispatchKeyEventTypeKeyDown, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13, Text: "\r", UnmodifiedText: "\r"},
			{Type: input.DispatchKeyEventTypeKeyUp, Key: "Enter", Code: "Enter", WindowsVirtualKeyCode: 13, NativeVirtualKeyCode: 13},
		} {
			if _, err := chromedp.Call(ctx, input.DispatchKeyEvent, ev); err != nil {
				cancel()
				b.t.Fatalf("browser: press Enter in %s: %v", sel, err)
			}
		}
		cancel()
	}
}

// Navigate opens url in the tab.
func (b *Tab) Navigate(url string) {
	b.t.Helper()
	b.Do("navigate to "+url, 30*time.Second, chromedp.Navigate(url))
}

// Screenshot returns a PNG of the whole page.
func (b *Tab) Screenshot() []byte {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("browser: screenshot: %v", err)
	}
	return png
}

// Viewport sets the tab's viewport (a phone: 390 × 844).
func (b *Tab) Viewport(w, h int64) {
	b.t.Helper()
	b.Do("set the viewport", 10*time.Second, chromedp.EmulateViewport(w, h))
}

func trim(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}
