package console

import (
	"fmt"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// A viewer's view of every screen (R-AUTH-2, R-AUTH-5): everything it may
// read is there, and no control it may not use: no launch; on a run no
// input, stop, hand off, move, release or delete, but the read tabs; on a
// workspace no edit or approve; on the fleet no revoke; on profiles no add
// or policy, and the vault's names are not theirs to see; the Codex catalog
// and the audit ledger say in words which permission they need.
func TestViewerSeesEveryScreen(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	claude := f.profile("claude", nil)
	r := f.launch(f.admin, claude, "watched")
	s := f.admin.Attach(r.RunRef, "from=0")
	defer s.Close()
	f.input(r, "work")
	s.UntilOutput(`"result":"worked"`, wait)
	_, viewerTok := f.principal("vera", store.RoleViewer)
	tab := f.signInWith(viewerTok)

	none := func(where string, sels ...string) {
		t.Helper()
		for _, sel := range sels {
			if exists(tab, sel) {
				t.Errorf("%s: a viewer sees %s", where, sel)
			}
		}
	}
	if exists(tab, `.nav a[href="/audit"]`) {
		t.Error("a viewer's navigation offers the audit ledger")
	}
	none("the list", "#launch", ".act-rename", ".act-archive")

	f.open(tab, "/runs/"+r.RunRef)
	tab.Await("the run view", `!!document.querySelector('#run-state') && !!document.querySelector('#timeline .item')`, wait)
	none("the run", "#input", "#stop", "#interrupt", "#resume", "#handoff", "#move", "#cleanup", "#delete", "#approve")
	tab.Click("#tab-activity")
	awaitText(tab, "the activity, readable", "#context-meter", "% of the context window")
	tab.Click("#tab-messages")
	awaitText(tab, "the messages, readable", "#msg-list", "work")
	tab.Click("#tab-events")
	awaitText(tab, "the events, readable", "#events", "Started generation 1")

	f.open(tab, "/workspaces/"+f.ws.Ref)
	tab.Await("the workspace", `!!document.querySelector('#setup-none') && !!document.querySelector('#pcfg-none')`, wait)
	none("the workspace", "#setup-edit", "#setup-approve", "#pcfg-approve")
	f.open(tab, "/workspaces")
	tab.Await("the workspaces", fmt.Sprintf(`!!document.querySelector('#workspaces [data-ref=%s]')`, js(f.ws.Ref)), wait)
	none("the workspaces", "#ws-add")

	f.open(tab, "/nodes")
	tab.Await("the fleet", fmt.Sprintf(`!!document.querySelector('#nodes [data-node=%s] [data-state=connected]')`, js(f.agent.ID)), wait)
	none("the fleet", ".act-revoke")
	f.open(tab, "/nodes/"+f.agent.ID)
	tab.Await("the node's runs", fmt.Sprintf(`!!document.querySelector('#node-run-list [data-ref=%s]')`, js(r.RunRef)), wait)
	none("the node", "#revoke")

	f.open(tab, "/profiles")
	tab.Await("the profiles", fmt.Sprintf(`!!document.querySelector('#profiles [data-ref=%s]')`, js(claude.Ref)), wait)
	none("the profiles", "#profile-add", ".act-policy", "#secrets", "#sec-add")

	f.open(tab, "/codex")
	awaitText(tab, "the Codex catalog's permission, in words", "#codex-status", "sessions:run:write")
	f.open(tab, "/audit")
	awaitText(tab, "the audit ledger's permission, in words", "#audit-status", "sessions:run:admin")

	// A viewer may still pin for themselves (R-AUTH-2).
	f.open(tab, "/runs/"+r.RunRef)
	tab.Click("#pin")
	tab.Await("pinned", `document.querySelector('#pin')?.getAttribute('aria-pressed') === 'true'`, wait)
	if got := browser.Eval[string](tab, `document.querySelector('#run-state').textContent`); got != apitypes.StateIdle {
		t.Fatalf("state %q", got)
	}
}
