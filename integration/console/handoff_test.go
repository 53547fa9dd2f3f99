package console

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// A Codex session handed off to Claude Code from the browser, with the
// summary edited in the dialog (R-HOF-7..13): the source is stopped first,
// the new session's first turn holds the edited summary, and the two runs
// link to each other (handoff_of one way, handed_off the other). Then a
// stopped Claude Code session moves to a second Claude Code profile
// (R-MOVE-1..7), while the Codex run's Move explains why it cannot and
// offers the handoff.
func TestHandoffAndMove(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	codex := f.profile("codex", nil)
	claude := f.profile("claude", nil)
	claude2 := f.profile("claude", nil)
	src := f.launch(f.admin, codex, "the parser")
	f.admin.AwaitRun(src.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	f.input(src, "write the parser for the config")
	f.admin.AwaitRun(src.RunRef, wait, "a conversation", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.ConversationID != "" })

	tab := f.signIn()
	f.open(tab, "/runs/"+src.RunRef)
	tab.Await("the run view", `!!document.querySelector('#handoff')`, wait)

	// Move of a Codex run: why not, and the handoff offered instead.
	tab.Click("#move")
	awaitText(tab, "why a Codex run cannot move", "#move-why", "Only a Claude Code conversation can move")
	tab.Click("#move-handoff")

	tab.Await("the preview in the dialog", `!!document.querySelector('#handoff-summary') && document.querySelector('#handoff-summary').value.includes('write the parser for the config')`, wait)
	selectValue(tab, "#handoff-profile", claude.Ref)
	tab.Exec(`document.querySelector('#handoff-summary').value += '\nReviewed in the browser: keep the parser streaming.\n'`)
	tab.Type("#handoff-name", "continued in claude")
	tab.Click("#handoff-submit")
	tab.Await("the summary state", `document.querySelector('#handoff-state')?.dataset.state === 'delivered'`, wait)
	newRef := strings.TrimPrefix(browser.Eval[string](tab, `new URL(document.querySelector('#handoff-new').href).pathname`), "/runs/")
	nr := f.admin.Run(newRef)
	if nr.HandoffOf != src.RunRef || nr.ProviderProfileRef != claude.Ref || nr.Name != "continued in claude" {
		t.Fatalf("the new run %+v", nr)
	}
	if got := f.admin.Run(src.RunRef); got.State != apitypes.StateStopped {
		t.Fatalf("the source after the handoff: %s, want stopped", got.State)
	}
	transcript := filepath.Join(claude.Home, ".claude", "olivares-handoffs", newRef+".md")
	if _, err := os.Stat(transcript); err != nil {
		t.Fatal(err)
	}
	// The source's row links to the new run.
	tab.Exec(`document.querySelector('#handoff-dialog').close()`)
	awaitText(tab, "the link to the new run", "#handed-to", newRef)
	tab.Click("#handed-to a")
	tab.Await("the new run, linking back", fmt.Sprintf(`location.pathname === '/runs/%s' && document.querySelector('#handoff-of a')?.textContent === %s`, newRef, js(src.RunRef)), wait)
	// The first turn the new Claude Code session got is the edited summary
	// (the fake echoes it).
	tab.Await("the edited summary delivered", hasItem("assistant", "keep the parser streaming"), wait)

	// The turn ends on the account's usage limit: a banner with the kind,
	// the reset time in the viewer's time zone and the account (R-LIM-*).
	f.input(nr, "limit")
	lim := f.admin.AwaitRun(newRef, wait, "the limit", func(r apitypes.Run) bool { return r.Limit != nil })
	awaitText(tab, "the limit banner", "#limit-banner", "usage limit was reached on profile "+claude.Name)
	resets := browser.Eval[string](tab, fmt.Sprintf(`new Date(%s).toLocaleString(undefined, { dateStyle: 'medium', timeStyle: 'short' })`, js(lim.Limit.ResetsAt.Format(time.RFC3339))))
	awaitText(tab, "the reset time in the viewer's zone", "#limit-banner", "resets "+resets)

	// Move: a stopped Claude Code run to the second profile of this node;
	// the limit of the first account goes with the move (R-MOVE-14).
	stopRun(tab)
	tab.Await("stopped", `document.querySelector('#run-state')?.textContent === 'stopped'`, wait)
	tab.Click("#move")
	tab.Await("the target profiles", `!!document.querySelector('#move-profile option')`, wait)
	if n := browser.Eval[int](tab, `document.querySelectorAll('#move-profile option').length`); n != 1 {
		t.Fatalf("%d move targets, want the other Claude Code profile only", n)
	}
	selectValue(tab, "#move-profile", claude2.Ref)
	tab.Click("#move-submit")
	awaitText(tab, "moved", "#move-done", "Moved to "+claude2.Name)
	moved := f.admin.Run(newRef)
	if moved.ProviderProfileRef != claude2.Ref || moved.RunRef != newRef || moved.ConversationID != nr.ConversationID {
		t.Fatalf("after the move: %+v", moved)
	}
	tab.Exec(`document.querySelector('#move-dialog').close()`)
	tab.Await("the limit banner gone with the move", `!document.querySelector('#limit-banner')`, wait)
	tab.Click("#tab-events")
	awaitText(tab, "the moved event in words", "#events .k-moved", "Moved from profile "+claude.Name)
	awaitText(tab, "the handoff's start in the source's ledger", "#events .k-started", "Started generation 1")
	f.admin.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+newRef+"/resume", nil, nil)
	f.admin.AwaitRun(newRef, wait, "live under the second profile", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle && r.ProviderProfileRef == claude2.Ref })
}
