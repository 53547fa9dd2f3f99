package console

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The profile's policy dialog sets its on_limit plan and shows the API's
// refusal of a bad one (R-ONL-1); the run view's limit banner shows the
// plan with a button per step, which runs it through POST
// /runs/{ref}/on-limit (R-ONL-7), and the run's on_limit history
// (R-ONL-6).
func TestOnLimitInConsole(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	a, b := f.profile("claude", nil), f.profile("claude", nil)
	tab := f.signIn()
	tab.Navigate(f.env.APIURL() + "/profiles")
	card := fmt.Sprintf(`#profiles .card[data-ref=%s]`, js(a.Ref))
	tab.Await("the card", fmt.Sprintf(`!!document.querySelector('%s .act-policy')`, card), wait)
	open := func() {
		tab.Exec(fmt.Sprintf(`document.querySelector('%s .act-policy').click()`, card))
		tab.Await("the policy dialog", `!!document.querySelector('#pol-onlimit')`, wait)
	}
	open()
	tab.Exec(`document.querySelector('#pol-onlimit').value = 'move:nobody'`)
	tab.Click("#pol-save")
	awaitText(tab, "the refusal", "#policy-dialog", `there is no profile "nobody"`)
	tab.Exec(fmt.Sprintf(`document.querySelector('#pol-onlimit').value = 'move:%s, continue_at_reset'`, b.Name))
	tab.Click("#pol-save")
	awaitText(tab, "the plan on the card", card+" .policy", "at a limit: move:"+b.Name+", then continue_at_reset")
	var got apitypes.Profile
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/profiles/"+a.Ref, nil, &got)
	if fmt.Sprint(got.OnLimit) != fmt.Sprintf("[move:%s continue_at_reset]", b.Name) {
		t.Fatalf("stored plan %v", got.OnLimit)
	}

	// A run of a stopped on a limit, its plan having skipped a step.
	ctx := context.Background()
	reset := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if _, err := f.env.Coord.Store.PutRun(ctx, apitypes.Run{RunRef: "run_lim", Tenant: integration.Tenant, NodeID: f.agent.ID,
		State: apitypes.StateStopped, Driver: "claude", Generation: 1, Isolation: apitypes.IsolationNative, ProviderProfileRef: a.Ref,
		ConversationID: "conv-1", CreatedAt: time.Now().UTC(), Rev: 1, Limit: &apitypes.Limit{Kind: "usage", ResetsAt: &reset, AccountRef: a.Ref}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.env.Coord.Store.UpdateRunMeta(ctx, "run_lim", func(m *store.RunMeta) (*apitypes.AuditEntry, error) {
		m.OnLimit = []apitypes.OnLimitEntry{
			{At: time.Now().UTC(), Outcome: apitypes.OnLimitLimited, ProfileRef: a.Ref, ProfileName: a.Name, ResetsAt: &reset, By: "policy"},
			{At: time.Now().UTC(), Outcome: apitypes.OnLimitSkipped, Step: "move:" + b.Name, Code: "profile_inactive", Reason: "profile is inactive", By: "policy"},
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	tab.Navigate(f.env.APIURL() + "/runs/run_lim")
	awaitText(tab, "the plan in the limit banner", "#limit-banner #on-limit-plan", "move:"+b.Name+", then continue_at_reset")
	awaitText(tab, "the history", "#on-limit-history", "limited on "+a.Name)
	awaitText(tab, "the skipped step", "#on-limit-history", "skipped move:"+b.Name+": profile is inactive")
	// The node holds no such run: the move's own refusal comes back.
	tab.Click(fmt.Sprintf(`#on-limit-plan button[data-step="move:%s"]`, b.Name))
	tab.Await("the step's answer", `!!document.querySelector('[data-kind=act]')`, wait)
	var l apitypes.AuditList
	f.admin.Must(http.StatusOK, http.MethodGet, "/v1/audit?event=sessions.run.stopped&run_ref=run_lim", nil, &l)
	if len(l.Items) != 0 {
		t.Fatalf("a stopped run was stopped again: %+v", l.Items)
	}
}
