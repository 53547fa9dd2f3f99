package console

import (
	"fmt"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The sessions list follows the change stream (R-CHG-1, R-CHG-2): once
// the stream is open, the person's pin and then a turn that runs and ends
// arrive as events, in that order, and change the rows in place; the row
// says the run waits for input from the API's attention (R-ATTN-1).
func TestListFollowsTheChangeStream(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	p := f.profile("claude", nil)
	r := f.launch(f.admin, p, "streamed")
	f.admin.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })

	tab := f.signIn()
	row := fmt.Sprintf(`[data-ref=%s]`, js(r.RunRef))
	tab.Await("the stream open and the row shown", fmt.Sprintf(`document.querySelector('#runs')?.dataset.stream === 'open' && !!document.querySelector(%s)`, js(row)), wait)
	tab.Await("the row waits for input", fmt.Sprintf(`document.querySelector(%s)?.querySelector('.attn.at-needs_input') !== null`, js(row)), wait)
	tab.Exec(`window.olivaresChanges.length = 0`)

	tab.Click(row + " .act-pin")
	tab.Await("the pin back from the stream", fmt.Sprintf(`window.olivaresChanges.some((c) => c.name === 'mark' && c.run_ref === %s)`, js(r.RunRef)), wait)
	s := f.admin.Attach(r.RunRef, "from=0")
	defer s.Close()
	f.input(r, "work")
	s.UntilOutput(`"result":"worked"`, wait)
	f.admin.AwaitRun(r.RunRef, wait, "the turn's end", func(x apitypes.Run) bool { return x.State == apitypes.StateIdle })
	tab.Await("the turn's rows after the pin, in order", fmt.Sprintf(`(() => {
  const c = window.olivaresChanges, ref = %s;
  const m = c.findIndex((x) => x.name === 'mark' && x.run_ref === ref);
  return m >= 0 && c.findIndex((x, i) => i > m && x.name === 'run' && x.run_ref === ref) > m;
})()`, js(r.RunRef)), wait)
	tab.Await("the pinned row, waiting for input", fmt.Sprintf(`!!document.querySelector('#g-pinned %s .attn.at-needs_input')`, row), wait)
}

// R-NOTIF-8: the console's service worker installs and activates from
// /assets/sw.js (its push handler parses), the page reads the
// coordinator's VAPID key, and the subscribe button ends in a sentence:
// subscribed, or why this browser cannot be (a headless Chromium here has
// no push service to reach).
func TestConsolePushWorker(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	tab := f.signIn()
	tab.Exec(`window.__sw = ''; void import('/assets/push.js').then(async (m) => { const r = await m.registration(); window.__sw = r.active && r.active.state === 'activated' ? 'active' : 'waiting ' + (r.active && r.active.state); }).catch((e) => { window.__sw = 'error: ' + e.message; })`)
	tab.Await("the service worker active", `window.__sw === 'active'`, wait)
	var key apitypes.PushKey
	f.admin.Must(200, "GET", "/v1/m/sessions/push/key", nil, &key)
	tab.Exec(fmt.Sprintf(`window.__key = ''; void import('/assets/api.js').then(async (m) => { window.__key = (await m.get(m.BASE + '/push/key')).public_key === %s ? 'same' : 'other'; })`, js(key.PublicKey)))
	tab.Await("the page reads the coordinator's key", `window.__key === 'same'`, wait)
	tab.Exec(`document.querySelector('#notify').open = true`)
	tab.Click("#push-subscribe")
	tab.Await("the subscription's outcome in a sentence", `(() => { const t = document.querySelector('#push-note')?.textContent || ''; return t !== '' && t !== 'Subscribing…'; })()`, wait)
}
