package console

import (
	"context"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The Usage screen (R-USE-7): the tenant's usage by account with the
// profile's name, the total with a starred cost when a tool reported
// none, by node once asked, and each account's latest windows and limit.
func TestUsageScreen(t *testing.T) {
	env := integration.NewEnv(t)
	f := &fixture{t: t, env: env, admin: env.Client(env.AdminToken)}
	// A profile for its name; the node need not be connected to list it.
	reset := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	cost := 0.25
	if err := env.Coord.Store.CreateProfile(context.Background(), apitypes.Profile{Ref: "prof_a", Tenant: integration.Tenant, NodeID: "node-x",
		Tool: "claude", Name: "work-account", Approvals: "ask", Active: true, CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Minute)
	if err := env.Coord.Store.PutUsage(context.Background(), []apitypes.UsageTurn{
		{RunRef: "run_1", Seq: 1, Turn: 1, Tenant: integration.Tenant, NodeID: "node-x", Tool: "claude", ProfileRef: "prof_a", Model: "opus",
			At: at, InputTokens: 1200, OutputTokens: 34, CacheReadTokens: 5000, CostUSD: &cost},
		{RunRef: "run_2", Seq: 1, Turn: 1, Tenant: integration.Tenant, NodeID: "node-y", Tool: "codex", ProfileRef: "prof_b", Model: "gpt",
			At: at, InputTokens: 234, OutputTokens: 56, CacheReadTokens: 1000,
			RateLimits: []apitypes.RateWindow{{Name: "primary", UsedPercent: 100, WindowMinutes: 300, ResetsAt: &reset}},
			Limit:      &apitypes.Limit{Kind: "usage", ResetsAt: &reset, AccountRef: "prof_b"}},
	}); err != nil {
		t.Fatal(err)
	}
	tab := f.signInWith(env.AdminToken)
	f.open(tab, "/usage")
	awaitText(tab, "the account's row with its name", "#usage-rows tr", "work-account (prof_a)")
	awaitText(tab, "the total, its cost starred", "#usage-rows tr.total", "$0.2500*")
	if got := text(tab, "#usage-rows tr.total"); got != "Total21,43490"+"6,000"+"0"+"$0.2500*" {
		t.Errorf("total row %q", got)
	}
	awaitText(tab, "the limited account's window", "#usage-accounts tr[data-profile=prof_b]", "100%")
	awaitText(tab, "its limit", "#usage-accounts tr[data-profile=prof_b]", "usage until")
	selectValue(tab, "#usage-by", "node")
	awaitText(tab, "the second node's row", "#usage-rows tr", "node-y")
	if !exists(tab, "nav a[href='/usage'].on") {
		t.Error("the Usage screen is not marked in the navigation")
	}
}

// The run view's limit banner schedules the continue at the reset and
// cancels it (R-CONT-1, R-CONT-7), through the public API.
func TestContinueAtResetFromTheRunView(t *testing.T) {
	env := integration.NewEnv(t)
	f := &fixture{t: t, env: env, admin: env.Client(env.AdminToken)}
	reset := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if _, err := env.Coord.Store.PutRun(context.Background(), apitypes.Run{RunRef: "run_lim", Tenant: integration.Tenant, NodeID: "node-x",
		State: apitypes.StateStopped, Driver: "claude", Generation: 1, Isolation: apitypes.IsolationNative, ProviderProfileRef: "prof_a",
		ConversationID: "conv-1", CreatedAt: time.Now().UTC(), Rev: 1, Limit: &apitypes.Limit{Kind: "usage", ResetsAt: &reset, AccountRef: "prof_a"}}); err != nil {
		t.Fatal(err)
	}
	tab := f.signInWith(env.AdminToken)
	f.open(tab, "/runs/run_lim")
	tab.Await("the limit banner's button", `!!document.querySelector('#limit-banner #continue-at-reset')`, wait)
	tab.Click("#continue-at-reset")
	awaitText(tab, "the scheduled continue", "#continue-scheduled", "continues by itself")
	metas, err := env.Coord.Store.GetRunMeta(context.Background(), []string{"run_lim"})
	if err != nil || metas["run_lim"].Continue == nil || metas["run_lim"].Continue.At.Before(reset) {
		t.Fatalf("stored schedule %+v, %v; want one at or after %v", metas["run_lim"].Continue, err, reset)
	}
	tab.Click("#continue-cancel")
	tab.Await("the button again", `!!document.querySelector('#limit-banner #continue-at-reset')`, wait)
	metas, _ = env.Coord.Store.GetRunMeta(context.Background(), []string{"run_lim"})
	if metas["run_lim"].Continue != nil {
		t.Fatalf("after cancel: schedule %+v", metas["run_lim"].Continue)
	}
}
