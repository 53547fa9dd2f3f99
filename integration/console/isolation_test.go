package console

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// A profile's card says plainly what its sessions reach on the node, and
// its policy dialog sets isolation and network (R-TR-7, docs/isolation.md).
func TestProfileIsolation(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	p := f.profile("codex", nil)
	tab := f.signIn()
	tab.Navigate(f.env.APIURL() + "/profiles")
	card := fmt.Sprintf(`document.querySelector('#profiles .card[data-ref=%s] .isolation')?.textContent`, js(p.Ref))
	tab.Await("the native boundary", card+` === "Native: its sessions run as the agent\u2019s user and can read the node\u2019s files."`, wait)
	tab.Exec(fmt.Sprintf(`document.querySelector('#profiles .card[data-ref=%s] .act-policy').click()`, js(p.Ref)))
	tab.Await("the policy dialog", `!!document.querySelector('#pol-isolation')`, wait)
	tab.Exec(`document.querySelector('#pol-isolation').value = 'sandbox'; document.querySelector('#pol-network').value = 'none'`)
	tab.Click("#pol-save")
	tab.Await("the sandbox boundary", card+` === "Sandbox: its sessions see only their working directory and this home, with no network."`, wait)
	var got apitypes.Profile
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/profiles/"+p.Ref, nil, &got)
	if got.Isolation != apitypes.IsolationSandbox || got.Network != "none" {
		t.Fatalf("after the dialog: isolation %q network %q, want sandbox and none", got.Isolation, got.Network)
	}
	// Container is offered beside it (R-TR-6), the same boundary.
	tab.Exec(fmt.Sprintf(`document.querySelector('#profiles .card[data-ref=%s] .act-policy').click()`, js(p.Ref)))
	tab.Await("the policy dialog again", `!!document.querySelector('#pol-isolation')`, wait)
	tab.Exec(`document.querySelector('#pol-isolation').value = 'container'; document.querySelector('#pol-network').value = 'host'`)
	tab.Click("#pol-save")
	tab.Await("the container boundary", card+` === "Container: its sessions see only their working directory and this home."`, wait)
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/profiles/"+p.Ref, nil, &got)
	if got.Isolation != apitypes.IsolationContainer || got.Network != "host" {
		t.Fatalf("after the dialog: isolation %q network %q, want container and host", got.Isolation, got.Network)
	}
	// The node's page says which isolating runners work there.
	tab.Navigate(f.env.APIURL() + "/nodes/" + p.NodeID)
	tab.Await("the node's container capability", `[...document.querySelectorAll('dt')].some((e) => e.textContent === 'Container isolation' && /^(available \(podman\)|not available: .+)$/.test(e.nextElementSibling?.textContent || ''))`, wait)
}
