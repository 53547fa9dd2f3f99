package journeys

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/fakemodel"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/sse"
)

// hookReceiver is a webhook endpoint on 127.0.0.1 that checks each
// delivery's signature with its own HMAC (R-NOTIF-3) and hands the
// payloads on in the order they came.
type hookReceiver struct {
	srv      *httptest.Server
	mu       sync.Mutex
	secret   string
	payloads chan apitypes.WebhookPayload
	bad      []string
}

func newHookReceiver(t *testing.T) *hookReceiver {
	h := &hookReceiver{payloads: make(chan apitypes.WebhookPayload, 64)}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		mac := hmac.New(sha256.New, []byte(h.secret))
		ts := r.Header.Get("X-Olivares-Timestamp")
		mac.Write([]byte(ts + "."))
		mac.Write(body)
		want := "v1=" + hex.EncodeToString(mac.Sum(nil))
		if got := r.Header.Get("X-Olivares-Signature"); got != want || ts == "" {
			h.bad = append(h.bad, got)
		}
		h.mu.Unlock()
		var p apitypes.WebhookPayload
		json.Unmarshal(body, &p)
		h.payloads <- p
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hookReceiver) next(t *testing.T) apitypes.WebhookPayload {
	t.Helper()
	select {
	case p := <-h.payloads:
		return p
	case <-time.After(wait):
		t.Fatal("no webhook delivery in time")
	}
	return apitypes.WebhookPayload{}
}

// changeStream reads GET /v1/m/sessions/events through the checking proxy.
type changeStream struct {
	events chan sse.Event
	resp   *http.Response
}

func openChangeStream(t *testing.T, f *fixture, c *integration.Client, lastID string) *changeStream {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, f.env.CheckedURL()+"/v1/m/sessions/events", nil)
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("X-Olivares-Tenant", c.Tenant)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /events: %v %v", resp, err)
	}
	s := &changeStream{events: make(chan sse.Event, 1024), resp: resp}
	go func() {
		defer close(s.events)
		r := sse.NewReader(resp.Body)
		for {
			ev, err := r.Next()
			if err != nil {
				return
			}
			s.events <- ev
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return s
}

// until reads events until match holds for one, and returns them all.
func (s *changeStream) until(t *testing.T, what string, match func(sse.Event) bool) []sse.Event {
	t.Helper()
	var seen []sse.Event
	deadline := time.After(wait)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("the change stream ended before %s", what)
			}
			seen = append(seen, ev)
			if match(ev) {
				return seen
			}
		case <-deadline:
			t.Fatalf("no %s on the change stream; saw %d events", what, len(seen))
		}
	}
}

func runOf(ev sse.Event) apitypes.Run {
	var r apitypes.Run
	if ev.Type == apitypes.ChangeRun {
		json.Unmarshal(ev.Data, &r)
	}
	return r
}

// Issue 25 with the real Claude Code against the fake model: a turn ends →
// attention needs_input on the list (R-ATTN-1, R-ATTN-4, R-ATTN-5) and one
// webhook delivery with a valid signature per ended turn (R-NOTIF-2,
// R-NOTIF-3); the change stream delivers the viewer's pin and then the
// state change, in order, and a reconnect with Last-Event-ID resumes
// right after the pin (R-CHG-2..4).
func TestRealAttentionStreamAndWebhook(t *testing.T) {
	bin := realBin(t, "claude")
	f := setup(t, "yamux", integration.ProcOptions{Path: bin + ":" + cliruntime.DefaultPath})
	fake := fakemodel.NewAnthropic()
	defer fake.Close()
	p := f.realClaudeProfile(fake)

	rc := newHookReceiver(t)
	out, code := f.cli("webhook", "add", rc.srv.URL+"/olivares?token=x", "--reason", "needs_input", "--json")
	var hook apitypes.Webhook
	if code != 0 || json.Unmarshal([]byte(out), &hook) != nil || hook.Secret == "" {
		t.Fatalf("webhook add: exit %d\n%s", code, out)
	}
	rc.mu.Lock()
	rc.secret = hook.Secret
	rc.mu.Unlock()

	cs := openChangeStream(t, f, f.viewer, "")
	if first := cs.until(t, "the opening reset", func(sse.Event) bool { return true }); first[0].Type != apitypes.ChangeReset {
		t.Fatalf("first event %s, want reset", first[0].Type)
	}
	r := f.launch(p)
	idle := f.operator.AwaitRun(r.RunRef, wait, "idle", func(r apitypes.Run) bool { return r.State == apitypes.StateIdle })
	// A run idle after its start waits for its first message: no news,
	// no delivery (R-NOTIF-2, issue 32 finding 11; checked below: the
	// first delivery holds the turn's output).

	// The viewer pins it, then the turn runs and ends.
	f.viewer.Must(http.StatusOK, http.MethodPost, "/v1/m/sessions/runs/"+r.RunRef+"/pin", nil, nil)
	f.post(f.operator, http.StatusAccepted, r.RunRef, "input", integration.Message("hello"), nil)
	done := f.operator.AwaitRun(r.RunRef, wait, "idle after the turn", func(x apitypes.Run) bool {
		return x.State == apitypes.StateIdle && x.RingLast > idle.RingLast && x.Attention != nil
	})
	if *done.Attention != apitypes.AttentionNeedsInput {
		t.Fatalf("after the turn: attention %v, want needs_input", *done.Attention)
	}
	// The first delivery is the turn's end: its row holds the turn's
	// output, however often the tool went idle while it started.
	d := rc.next(t)
	var row apitypes.Run
	json.Unmarshal(d.Run, &row)
	if d.Event != "attention" || d.Attention != "needs_input" || row.RunRef != r.RunRef || row.RingLast <= idle.RingLast {
		t.Fatalf("first delivery %+v (ring %d, idle at start %d), want needs_input of %s after its turn", d, row.RingLast, idle.RingLast, r.RunRef)
	}
	var list apitypes.RunList
	f.viewer.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs?attention=needs_input", nil, &list)
	if len(list.Items) != 1 || list.Items[0].RunRef != r.RunRef {
		t.Fatalf("GET /runs?attention=needs_input: %+v", list.Items)
	}
	f.viewer.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs?attention=failed", nil, &list)
	if len(list.Items) != 0 {
		t.Fatalf("GET /runs?attention=failed: %+v, want none", list.Items)
	}
	if out, code := f.cli("session", "list", "--attention"); code != 0 || !strings.Contains(out, r.RunRef) || !strings.Contains(out, "needs_input") {
		t.Fatalf("session list --attention: exit %d\n%s", code, out)
	}

	// The stream: the pin, then the turn's rows, the last one idle again.
	evs := cs.until(t, "the viewer's pin", func(ev sse.Event) bool { return ev.Type == apitypes.ChangeMark })
	pin := evs[len(evs)-1]
	var mc apitypes.MarkChange
	if json.Unmarshal(pin.Data, &mc); mc.RunRef != r.RunRef || !mc.Pinned {
		t.Fatalf("mark event %s", pin.Data)
	}
	after := cs.until(t, "the turn's end", func(ev sse.Event) bool {
		x := runOf(ev)
		return x.RunRef == r.RunRef && x.State == apitypes.StateIdle && x.RingLast >= done.RingLast
	})
	end := after[len(after)-1]
	if x := runOf(end); x.Attention == nil || *x.Attention != "needs_input" || !x.Pinned {
		t.Fatalf("the turn's end on the stream: %s", end.Data)
	}
	// Resume after the pin: the same events, from the one right after it.
	rs := openChangeStream(t, f, f.viewer, pin.ID)
	again := rs.until(t, "the turn's end again", func(ev sse.Event) bool { return ev.ID == end.ID })
	if len(again) != len(after) {
		t.Fatalf("resumed after the pin: %d events, want the %d the first stream had", len(again), len(after))
	}
	for i := range again {
		if again[i].ID != after[i].ID || again[i].Type != after[i].Type {
			t.Fatalf("resumed event %d: %s %s, want %s %s", i, again[i].Type, again[i].ID, after[i].Type, after[i].ID)
		}
	}

	// Exactly one delivery per change: the test delivery comes next.
	if out, code := f.cli("webhook", "test", hook.ID); code != 0 || !strings.Contains(out, "delivered") {
		t.Fatalf("webhook test: exit %d\n%s", code, out)
	}
	if d := rc.next(t); d.Event != "test" {
		t.Fatalf("after the turn, a delivery %+v came before the test one", d)
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if len(rc.bad) > 0 {
		t.Fatalf("deliveries with a bad signature: %v", rc.bad)
	}
	// The turn's end and the test: none at launch (R-NOTIF-2).
	out, code = f.cli("webhook", "deliveries", hook.ID)
	if code != 0 || strings.Count(out, "delivered") != 2 {
		t.Fatalf("webhook deliveries: exit %d\n%s", code, out)
	}
}
