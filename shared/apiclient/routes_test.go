package apiclient_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/api"
	"github.com/olivares-dev/olivares/shared/apiclient"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Every route of the coordinator's route table (and health and metrics)
// has a typed method, and each method calls the route it says: a server
// with the real table's patterns records which pattern each call hit.
func TestEveryRoute(t *testing.T) {
	var mu sync.Mutex
	hit := map[string]bool{}
	e := echo.New()
	record := func(c echo.Context) error {
		mu.Lock()
		hit[c.Request().Method+" "+c.Path()] = true
		mu.Unlock()
		if c.Path() == api.Base+"/runs/:ref/attach" {
			c.Response().Header().Set("Content-Type", "text/event-stream")
			c.Response().WriteHeader(http.StatusOK)
			_, err := c.Response().Write([]byte("event: notice\ndata: {\"kind\":\"not_live\",\"state\":\"stopped\"}\n\n"))
			return err
		}
		return c.JSONBlob(http.StatusOK, []byte("{}"))
	}
	var want []string
	for _, r := range api.New(api.Options{}).Routes() {
		e.Add(r.Method, r.Path, record)
		want = append(want, r.Method+" "+r.Path)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		e.GET(p, record)
		want = append(want, "GET "+p)
	}
	srv := httptest.NewServer(e)
	defer srv.Close()
	c := apiclient.New(apiclient.Config{URL: srv.URL, Token: "t", Tenant: "default"})
	ctx := context.Background()
	const ref, host, thread = "run_1", "node-1", "01a23643-0000-7000-8000-000000000000"
	calls := []func() error{
		func() error { _, err := c.Whoami(ctx); return err },
		func() error { _, err := c.Tenants(ctx); return err },
		func() error { _, err := c.Nodes(ctx); return err },
		func() error { _, err := c.Node(ctx, "node-1"); return err },
		func() error { _, err := c.RevokeNode(ctx, "node-1"); return err },
		func() error { _, err := c.Audit(ctx, apiclient.AuditQuery{Limit: 5}); return err },
		func() error { _, err := c.Usage(ctx, apiclient.UsageQuery{GroupBy: "day"}); return err },
		func() error { _, err := c.ContinueAtReset(ctx, "run_1", "go on"); return err },
		func() error { _, err := c.CancelContinueAtReset(ctx, "run_1"); return err },
		func() error { _, err := c.OnLimitStep(ctx, "run_1", "move:claude-b"); return err },
		func() error { _, err := c.Principals(ctx); return err },
		func() error { _, err := c.Principal(ctx, "prn_1"); return err },
		func() error {
			_, err := c.CreatePrincipal(ctx, apitypes.PrincipalCreate{Name: "ana", Role: "viewer"})
			return err
		},
		func() error { _, err := c.RevokePrincipal(ctx, "prn_1"); return err },
		func() error { _, err := c.CreateCredential(ctx, "prn_1", apitypes.CredentialCreate{}); return err },
		func() error { _, err := c.Credentials(ctx, ""); return err },
		func() error { _, err := c.RevokeCredential(ctx, "cred_1"); return err },
		func() error { _, err := c.Login(ctx, "test"); return err },
		func() error { return c.Logout(ctx) },
		func() error { _, err := c.ForgetNode(ctx, "node-1"); return err },
		func() error { return c.DeleteProfile(ctx, "prof_1") },
		func() error { return c.DeleteWorkspace(ctx, "ws_1") },
		func() error { return c.Healthz(ctx) },
		func() error { _, err := c.Requests(ctx, ref); return err },
		func() error {
			_, err := c.AnswerRequest(ctx, ref, "req_0123456789abcdef", apitypes.RequestAnswer{Decision: "allow"})
			return err
		},
		func() error { return c.Readyz(ctx) },
		func() error { _, err := c.Metrics(ctx); return err },
		func() error { _, err := c.CreateProfile(ctx, apitypes.ProfileCreate{}); return err },
		func() error { _, err := c.Profiles(ctx); return err },
		func() error { _, err := c.Profile(ctx, "prof_1"); return err },
		func() error { _, err := c.UpdateProfile(ctx, "prof_1", apitypes.ProfileUpdate{}); return err },
		func() error { _, err := c.StartSignin(ctx, "prof_1"); return err },
		func() error { _, err := c.Signin(ctx, "prof_1", "signin_1"); return err },
		func() error { _, err := c.SigninCode(ctx, "prof_1", "signin_1", "code"); return err },
		func() error { _, err := c.CancelSignin(ctx, "prof_1", "signin_1"); return err },
		func() error { _, err := c.ProfileAccount(ctx, "prof_1"); return err },
		func() error { _, err := c.CreateWorkspace(ctx, apitypes.WorkspaceCreate{}); return err },
		func() error { _, err := c.Workspaces(ctx); return err },
		func() error { _, err := c.Workspace(ctx, "ws_1"); return err },
		func() error { _, err := c.SetSetupCommand(ctx, "ws_1", "make"); return err },
		func() error { _, err := c.ApproveSetup(ctx, "ws_1", "abc"); return err },
		func() error { _, err := c.ProjectConfig(ctx, "ws_1"); return err },
		func() error { _, err := c.ApproveProjectConfig(ctx, "ws_1", "abc"); return err },
		func() error { _, err := c.CreateSecret(ctx, "n", "v"); return err },
		func() error { _, err := c.Secrets(ctx); return err },
		func() error { return c.DeleteSecret(ctx, "sec_1") },
		func() error { _, err := c.Runs(ctx, apiclient.RunQuery{}); return err },
		func() error { _, err := c.Launch(ctx, apitypes.LaunchRequest{}); return err },
		func() error { _, err := c.Run(ctx, ref); return err },
		func() error { _, err := c.Events(ctx, ref, apiclient.EventsQuery{}); return err },
		func() error {
			s, err := c.Attach(ctx, ref, apiclient.AttachOptions{})
			if err == nil {
				s.Close()
			}
			return err
		},
		func() error { _, err := c.Input(ctx, ref, apitypes.InputRequest{}); return err },
		func() error { _, err := c.Interrupt(ctx, ref); return err },
		func() error { _, err := c.Stop(ctx, ref); return err },
		func() error { _, err := c.Resume(ctx, ref); return err },
		func() error { _, err := c.Approve(ctx, ref); return err },
		func() error { _, err := c.Move(ctx, ref, "prof_2"); return err },
		func() error { _, err := c.Diff(ctx, ref); return err },
		func() error { _, err := c.DiffFile(ctx, ref, "a.go"); return err },
		func() error { _, err := c.Uncommitted(ctx, ref); return err },
		func() error { _, err := c.HandoffPreview(ctx, ref); return err },
		func() error { _, err := c.Handoff(ctx, ref, apitypes.HandoffRequest{}); return err },
		func() error { _, err := c.Activity(ctx, ref); return err },
		func() error { _, err := c.SubAgent(ctx, ref, "a1"); return err },
		func() error { _, err := c.Messages(ctx, ref, apiclient.MessagesQuery{}); return err },
		func() error { _, err := c.Message(ctx, ref, 3); return err },
		func() error { _, err := c.Pin(ctx, ref); return err },
		func() error { _, err := c.Unpin(ctx, ref); return err },
		func() error { _, err := c.Snooze(ctx, ref, "2030-01-01T00:00:00Z"); return err },
		func() error { _, err := c.Unsnooze(ctx, ref); return err },
		func() error { _, err := c.Done(ctx, ref); return err },
		func() error { _, err := c.Undone(ctx, ref); return err },
		func() error { _, err := c.Rename(ctx, ref, "n"); return err },
		func() error { _, err := c.Archive(ctx, ref); return err },
		func() error { _, err := c.Unarchive(ctx, ref); return err },
		func() error { _, err := c.Cleanup(ctx, ref, apiclient.CleanupRequest{}); return err },
		func() error { return c.DeleteRun(ctx, ref) },
		func() error { _, err := c.CodexThreads(ctx, apiclient.CodexThreadsQuery{}); return err },
		func() error { _, err := c.CodexTurns(ctx, host, thread, ""); return err },
		func() error { _, _, err := c.CodexContinue(ctx, host, thread); return err },
		func() error { _, err := c.ClaudeSessions(ctx, apiclient.CodexThreadsQuery{}); return err },
		func() error { _, err := c.ClaudeMessages(ctx, host, thread, apiclient.MessagesQuery{}); return err },
		func() error { _, err := c.ClaudeContinue(ctx, host, thread); return err },
		func() error { _, err := c.CodexArchive(ctx, host, thread, true); return err },
		func() error { _, err := c.CodexBranch(ctx, ref); return err },
		func() error {
			s, err := c.Changes(ctx, "")
			if err == nil {
				s.Close()
			}
			return err
		},
		func() error {
			_, err := c.CreateWebhook(ctx, apitypes.WebhookCreate{URL: "https://example.test"})
			return err
		},
		func() error { _, err := c.Webhooks(ctx); return err },
		func() error { return c.DeleteWebhook(ctx, "wh_1") },
		func() error { _, err := c.WebhookDeliveries(ctx, "wh_1"); return err },
		func() error { _, err := c.TestWebhook(ctx, "wh_1"); return err },
		func() error { _, err := c.PushKey(ctx); return err },
		func() error { _, err := c.SubscribePush(ctx, apitypes.PushSubscriptionCreate{}); return err },
		func() error { _, err := c.PushSubscriptions(ctx); return err },
		func() error { return c.UnsubscribePush(ctx, "push_1") },
		func() error { _, err := c.TestPush(ctx, "push_1"); return err },
	}
	for i, call := range calls {
		if err := call(); err != nil {
			t.Errorf("call %d: %v", i, err)
		}
	}
	var got []string
	for k := range hit {
		got = append(got, k)
	}
	sort.Strings(got)
	sort.Strings(want)
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("no method calls %s", w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("the calls hit %d routes, the table has %d: %v", len(got), len(want), fmt.Sprint(got))
	}
}
