package api

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/olivares-dev/olivares/coordinator/outbound"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/webpush"
)

// Notifications (R-NOTIF-*): each change of a run's attention to a reason
// is sent, once, to the tenant's webhooks that take that reason.

// DefaultWebhookBackoff is the wait before each retry of a delivery
// (R-NOTIF-4): six attempts over about 13 minutes.
var DefaultWebhookBackoff = []time.Duration{time.Second, 5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute}

// Limits of a delivery.
const (
	// pushTTL is how long a push service keeps a message for a browser
	// that is offline (RFC 8030's TTL).
	pushTTL        = 24 * time.Hour
	webhookWorkers = 8
)

// Webhook request headers (R-NOTIF-3).
const (
	HeaderWebhookEvent     = "X-Olivares-Event"
	HeaderWebhookDelivery  = "X-Olivares-Delivery"
	HeaderWebhookTimestamp = "X-Olivares-Timestamp"
	HeaderWebhookSignature = "X-Olivares-Signature"
)

// WebhookSignature is R-NOTIF-3's signature of a delivery: "v1=" and the
// hex HMAC-SHA256, keyed by the hook's secret, of the timestamp header's
// value, a dot, and the body.
func WebhookSignature(secret, timestamp string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(timestamp))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1=" + hex.EncodeToString(mac.Sum(nil))
}

type notifier struct {
	s *core
	// vapid signs Web Push deliveries (R-NOTIF-8).
	vapid *ecdsa.PrivateKey
	// out is the only way a delivery leaves (R-NOTIF-9).
	out     *outbound.Guard
	backoff []time.Duration
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	workers chan struct{}

	mu   sync.Mutex
	last map[string]string    // run ref → the change key last seen (R-NOTIF-2)
	sent map[string]time.Time // run ref → when its last needs_input went out
	// turned holds the runs known to have begun a turn (a running row,
	// usage, input passed on by this coordinator, or indexed before it
	// started): a run idle before its first turn waits for its first
	// message, which is no news (R-NOTIF-2, issue 32 finding 11).
	turned map[string]bool
}

// turnGap is how long after a run's needs_input a grown ring alone makes
// a new one: a tool writes a few frames after its turn's end (usage,
// rate-limit reports), which are no new turn.
const turnGap = 2 * time.Second

// changeKey is what makes an attention a new one (R-NOTIF-2): its reason,
// and for needs_input also the generation and the ring's last seq, which a
// turn moves: the agent coalesces its pushes, so a quick turn may reach the
// index as one idle row after another, never as running.
// For needs_decision it is the reason and the number of requests waiting:
// fewer, with some still waiting, is the next request's turn (observe
// sends it); more is one queued behind the one already sent (it does not).
func changeKey(r apitypes.Run, a string) string {
	switch a {
	case apitypes.AttentionNeedsInput:
		return a + "#" + strconv.FormatUint(uint64(r.Generation), 10) + "#" + strconv.FormatUint(r.RingLast, 10)
	case apitypes.AttentionNeedsDecision:
		return a + "#" + strconv.Itoa(r.PendingRequests)
	}
	return a
}

func newNotifier(s *core, vapid *ecdsa.PrivateKey) *notifier {
	n := &notifier{s: s, vapid: vapid, out: s.o.Outbound, backoff: s.o.WebhookBackoff, last: map[string]string{}, sent: map[string]time.Time{}, turned: map[string]bool{},
		workers: make(chan struct{}, webhookWorkers)}
	if n.out == nil {
		n.out, _ = outbound.New(outbound.Options{}) // no allowlist: nothing to refuse
	}
	if n.backoff == nil {
		n.backoff = DefaultWebhookBackoff
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	return n
}

// prime takes the attention of every indexed run as already notified, so
// a restart does not notify again what the index already held (R-NOTIF-2).
func (n *notifier) prime(ctx context.Context) {
	if n.s.o.Store == nil {
		return
	}
	tenants, err := n.s.o.Store.ListTenants(ctx)
	if err != nil {
		n.s.log.Warn("notifications: cannot read the index to start from", logging.Err(err))
		return
	}
	now := n.s.o.Now()
	for _, t := range tenants {
		q := store.RunQuery{Tenant: t.ID, Limit: 200, CursorMode: true}
		for {
			rows, next, err := n.s.o.Store.ListRuns(ctx, q)
			if err != nil {
				n.s.log.Warn("notifications: cannot read the index to start from", logging.Err(err))
				return
			}
			n.mu.Lock()
			for _, r := range rows {
				n.last[r.RunRef] = changeKey(r, apitypes.AttentionOf(r, now))
				n.turned[r.RunRef] = true
			}
			n.mu.Unlock()
			if next == "" {
				break
			}
			q.Cursor = next
		}
	}
}

// waiting is the number of requests a needs_decision key counts.
func waiting(key string) int {
	_, n, _ := strings.Cut(key, "#")
	i, _ := strconv.Atoi(n)
	return i
}

// observe is told each run row the index took; a new reason is sent.
func (n *notifier) observe(rows ...apitypes.Run) {
	now := n.s.o.Now()
	for _, r := range rows {
		a := apitypes.AttentionOf(r, now)
		key := changeKey(r, a)
		n.mu.Lock()
		if r.State == apitypes.StateRunning || r.Usage != nil {
			n.turned[r.RunRef] = true
		}
		prevKey := n.last[r.RunRef]
		prev, _, _ := strings.Cut(prevKey, "#")
		if a == apitypes.AttentionNeedsInput && prev == a && key != prevKey && now.Sub(n.sent[r.RunRef]) < turnGap {
			key = prevKey // frames after the turn's end, not a new turn
		}
		if a == apitypes.AttentionNeedsInput && !n.turned[r.RunRef] {
			key = prevKey // waiting for its first message: no turn has ended
		}
		n.last[r.RunRef] = key
		if a == apitypes.AttentionNeedsInput && key != prevKey {
			n.sent[r.RunRef] = now
		}
		// One more request queued behind the one already sent.
		queued := a == apitypes.AttentionNeedsDecision && prev == a && waiting(key) > waiting(prevKey)
		n.mu.Unlock()
		if key == prevKey || a == "" || queued {
			continue
		}
		n.wg.Add(1)
		go func() {
			defer n.wg.Done()
			n.attention(r, a, prev)
		}()
	}
}

// inputSent is told of input passed on to a run: a turn begins, and the
// idle row that ends it needs input even when the agent coalesced the
// running row away.
func (n *notifier) inputSent(ref string) {
	n.mu.Lock()
	n.turned[ref] = true
	n.mu.Unlock()
}

// forget drops a deleted run.
func (n *notifier) forget(ref string) {
	n.mu.Lock()
	delete(n.last, ref)
	delete(n.sent, ref)
	delete(n.turned, ref)
	n.mu.Unlock()
}

// attention sends one change to every hook of the tenant that takes it.
func (n *notifier) attention(r apitypes.Run, a, prev string) {
	ctx := n.ctx
	hooks, err := n.s.o.Store.ListWebhooks(ctx, r.Tenant)
	if err != nil || len(hooks) == 0 {
		if err != nil && ctx.Err() == nil {
			n.s.log.Warn("notifications: cannot read the webhooks", logging.KeyRunRef, r.RunRef, logging.Err(err))
		}
		return
	}
	row := apitypes.WithAttention(r, n.s.o.Now())
	if metas, err := n.s.o.Store.GetRunMeta(ctx, []string{r.RunRef}); err == nil {
		m := metas[r.RunRef]
		row.Name, row.ArchivedAt = m.Name, utcPtr(m.ArchivedAt)
	}
	row.NodeReachable, row.Pinned, row.PinnedAt, row.Done, row.SnoozedUntil = nil, false, nil, false, nil
	runJSON, _ := json.Marshal(row)
	// R-NOTIF-10: a decision's notification says what is asked.
	var q apitypes.RunRequest
	var pending int
	asked := false
	if a == apitypes.AttentionNeedsDecision {
		q, pending, asked = n.pendingRequest(r)
	}
	for _, h := range hooks {
		if len(h.Reasons) > 0 && !slices.Contains(h.Reasons, a) {
			continue
		}
		d := n.newDelivery(h, apitypes.WebhookEventAttention)
		d.RunRef, d.Attention = r.RunRef, a
		var body []byte
		switch {
		case h.Kind == store.KindWebPush && asked:
			body = withRequest(pushMessage(row, a), h.Tenant, q, pending)
		case h.Kind == store.KindWebPush:
			body, _ = json.Marshal(pushMessage(row, a))
		default:
			p := apitypes.WebhookPayload{ID: d.ID, Event: d.Event, At: d.CreatedAt, Tenant: h.Tenant,
				Attention: a, Previous: prev, Run: runJSON}
			if asked {
				p.Request, p.Actions = askedOf(q, pending, 16<<10), webhookActions(h, q, r.RunRef, n.s.o.Now())
			}
			body, _ = json.Marshal(p)
		}
		n.deliver(h, d, body, true)
	}
}

// attentionText says a reason to a person.
var attentionText = map[string]string{
	apitypes.AttentionNeedsInput:    "waits for your input",
	apitypes.AttentionNeedsDecision: "waits for your decision",
	apitypes.AttentionNeedsApproval: "waits for approval",
	apitypes.AttentionFailed:        "failed",
	apitypes.AttentionLimited:       "stopped on a limit",
	apitypes.AttentionStalled:       "has written nothing for a while (stalled)",
}

// pushMessage is a push's payload for a run's new attention (R-NOTIF-8).
func pushMessage(r apitypes.Run, a string) apitypes.PushMessage {
	name := r.Name
	if name == "" {
		name = r.Driver + " " + r.RunRef
	}
	return apitypes.PushMessage{Title: name + " " + attentionText[a], Body: r.Driver + " on " + r.NodeID,
		RunRef: r.RunRef, Attention: a, URL: "/runs/" + r.RunRef, Tag: r.RunRef + ":" + a}
}

func (n *notifier) newDelivery(h store.Webhook, event string) apitypes.WebhookDelivery {
	now := n.s.o.Now().UTC()
	var b [8]byte
	rand.Read(b[:])
	return apitypes.WebhookDelivery{ID: "whd_" + strconv.FormatInt(now.UnixNano(), 36) + hex.EncodeToString(b[:]),
		HookID: h.ID, Event: event, State: apitypes.DeliveryPending, CreatedAt: now, UpdatedAt: now}
}

// deliver posts body to the hook, with retries when retry is set
// (R-NOTIF-4), recording each attempt in the log (R-NOTIF-5). It answers
// the delivery as it last recorded it.
func (n *notifier) deliver(h store.Webhook, d apitypes.WebhookDelivery, body []byte, retry bool) apitypes.WebhookDelivery {
	select {
	case n.workers <- struct{}{}:
	case <-n.ctx.Done():
		return d
	}
	defer func() { <-n.workers }()
	for attempt := 0; ; attempt++ {
		status, err := n.post(h, d, body)
		if err != nil {
			// The operator's log has what the tenant's does not.
			n.s.log.Debug("notifications: a delivery got no answer", "webhook", h.ID, logging.Err(err))
		}
		d.Attempts++
		// R-NOTIF-9: the status and a short reason, never the receiver's
		// body, nor what kept a connection from being made.
		d.LastStatus, d.LastResponse, d.LastError, d.NextAttempt = status, "", outbound.Reason(err), nil
		if status != 0 {
			d.LastResponse = strconv.Itoa(status) + " " + http.StatusText(status)
			if status >= 300 && status < 400 {
				d.LastResponse += " (redirects are not followed)"
			}
		}
		d.UpdatedAt = n.s.o.Now().UTC()
		switch {
		case err == nil && status >= 200 && status < 300:
			d.State = apitypes.DeliveryDelivered
		case !retry || attempt >= len(n.backoff) || (err == nil && !retryable(status)):
			d.State = apitypes.DeliveryFailed
		default:
			next := d.UpdatedAt.Add(n.backoff[attempt])
			d.NextAttempt = &next
		}
		if err := n.s.o.Store.PutDelivery(n.ctx, d); err != nil {
			if !errors.Is(err, store.ErrNotFound) && n.ctx.Err() == nil {
				n.s.log.Warn("notifications: cannot record a delivery", "webhook", h.ID, logging.Err(err))
			}
			return d // the hook was deleted meanwhile, or the coordinator stops
		}
		if d.State != apitypes.DeliveryPending {
			return d
		}
		t := time.NewTimer(n.backoff[attempt])
		select {
		case <-t.C:
		case <-n.ctx.Done():
			t.Stop()
			return d
		}
	}
}

// retryable: a server error, a timeout or a throttle is tried again; any
// other answer is the receiver's final word.
func retryable(status int) bool {
	return status >= 500 || status == http.StatusRequestTimeout || status == http.StatusTooManyRequests
}

// post is one attempt: the signed request, through the guard, and the
// status that came back.
func (n *notifier) post(h store.Webhook, d apitypes.WebhookDelivery, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.out.Timeout())
	defer cancel()
	var req *http.Request
	var err error
	if h.Kind == store.KindWebPush {
		// R-NOTIF-8: encrypted for the browser, signed by VAPID.
		urgency := "normal"
		if d.Attention == apitypes.AttentionNeedsDecision || d.Attention == apitypes.AttentionNeedsApproval {
			urgency = "high"
		}
		req, err = webpush.Request(n.vapid, webpush.Subscription{Endpoint: h.URL, P256dh: h.P256dh, Auth: h.Auth},
			n.s.o.VAPIDSubject, body, pushTTL, urgency, n.s.o.Now())
		if err != nil {
			return 0, err
		}
		if req.URL.Scheme != "https" {
			return 0, outbound.ErrScheme // a subscription stored before push was https only
		}
		req = req.WithContext(ctx)
	} else {
		req, err = http.NewRequestWithContext(ctx, http.MethodPost, h.URL, bytes.NewReader(body))
		if err != nil {
			return 0, err
		}
		ts := strconv.FormatInt(n.s.o.Now().Unix(), 10)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(HeaderWebhookEvent, d.Event)
		req.Header.Set(HeaderWebhookDelivery, d.ID)
		req.Header.Set(HeaderWebhookTimestamp, ts)
		req.Header.Set(HeaderWebhookSignature, WebhookSignature(h.Secret, ts, body))
	}
	req.Header.Set("User-Agent", "Olivares-Webhook/1")
	return n.out.Do(req)
}

// close stops the retries and waits for the deliveries under way.
func (n *notifier) close() {
	n.cancel()
	n.wg.Wait()
}
