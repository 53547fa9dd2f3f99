package console

import (
	"fmt"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// R-LIST-8: each card of the list previews the session's last message,
// one line that never widens the page on a phone, and the next turn's
// message replaces it without a reload (the change stream carries the row).
func TestListPreviewsTheLastMessage(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	claude := f.profile("claude", nil)
	quiet := f.launch(f.admin, claude, "quiet")
	r := f.launch(f.admin, claude, "preview")
	long := "hello " + strings.Repeat("a/long/unbroken/path/", 20)
	f.input(r, long)
	got := f.admin.AwaitRun(r.RunRef, wait, "the preview", func(r apitypes.Run) bool { return r.LastMessage != "" })
	if want := "pong: " + long; got.LastMessage != want[:199]+"\u2026" && got.LastMessage != want {
		t.Fatalf("last_message %q, want the reply cut at 200 characters", got.LastMessage)
	}
	tab := f.signIn()
	card := fmt.Sprintf(`[data-ref=%s] .preview`, js(r.RunRef))
	for _, size := range []struct {
		name string
		w, h int64
	}{{"desktop", 1280, 800}, {"phone", 390, 844}} {
		tab.Viewport(size.w, size.h)
		f.open(tab, "/")
		awaitText(tab, "the card's preview", card, "pong: hello a/long/unbroken/path/")
		// A run with nothing said yet has no preview line, and no "null".
		quietCard := fmt.Sprintf(`[data-ref=%s]`, js(quiet.RunRef))
		if exists(tab, quietCard+" .preview") || strings.Contains(text(tab, quietCard), "null") {
			t.Fatalf("%s: the quiet run's card: %q", size.name, text(tab, quietCard))
		}
		if w := browser.Eval[int](tab, `document.documentElement.scrollWidth`); w > int(size.w) {
			t.Errorf("%s: the list is %d px wide, wider than the %d px viewport", size.name, w, size.w)
		}
	}
	f.input(r, "again")
	tab.Await("the next turn's preview, without a reload", fmt.Sprintf(`document.querySelector(%s)?.textContent === 'pong: again'`, js(card)), wait)
}
