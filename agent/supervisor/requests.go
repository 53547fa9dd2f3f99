package supervisor

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/ring"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
)

// People in the loop (docs/rules/requests.md): a tool's question becomes a
// request on its run. The driver reports it (cliruntime.EventRequest); the
// generation applies the profile's approval policy next to the process
// (R-REQ-10, R-REQ-11) or leaves it pending for a person, with a timer for
// the ask timeout (R-REQ-12); the first answer settles it (R-REQ-2) and the
// driver writes it to the tool. Each request and each settlement is a
// frame of the run's ring (R-REQ-4), so a viewer sees them in order with
// the output and a reconnect at last+1 neither loses nor repeats one.
//
// Requests are kept in their own bucket, key "<run>/<id>", committed with
// the record (run.save), so that they survive an agent restart, as expired
// (R-REQ-8).

// bucketRequests holds the runs' requests (owned here).
var bucketRequests = []byte("requests")

// Ledger kinds of requests (R-EVT-3): the id, kind, tool, decision and who;
// never the command, the diff or a text answer (R-EVT-4).
const (
	KindRequestAsked   = "request_asked"
	KindRequestSettled = "request_settled"
	KindRequestExpired = "request_expired"
)

// Limits.
const (
	// maxSettledKept: the settled requests a run keeps beside its pending
	// ones (R-REQ-2).
	maxSettledKept = 20
	// maxPending: a tool that asks more than this without an answer has
	// its new requests denied.
	maxPending = 64
)

// The reasons of settlements a person did not make.
const (
	reasonGone      = "the process that asked is gone"
	reasonRestarted = "the process that asked is gone: the agent restarted"
	reasonWithdrawn = "the tool no longer waits for it (its turn was interrupted or ended)"
)

// storedRequest is a request as the agent keeps it.
type storedRequest struct {
	apitypes.RunRequest
	// ToolID is the driver's id of it in its generation's session.
	ToolID    string `json:"tool_id"`
	ToolUseID string `json:"tool_use_id,omitempty"`
}

// reqEntry is a request in memory, under its run's mu.
type reqEntry struct {
	storedRequest
	stop func() bool // stops the ask timeout's timer
	// shown is closed once the asked frame is in the output; nil when it
	// was there before the entry was (a restored request). Every later
	// frame of the request waits for it, so that a watcher never reads a
	// settlement before its request (R-REQ-4), however fast the answer.
	shown chan struct{}
}

// awaitShown waits until e's asked frame is in the output. It must not
// be called with r.mu held.
func (e *reqEntry) awaitShown() {
	if e.shown != nil {
		<-e.shown
	}
}

func requestKey(ref, id string) []byte { return []byte(ref + "/" + id) }

// loadRequests reads every stored request, by run.
func loadRequests(db *bbolt.DB) (map[string][]storedRequest, error) {
	out := map[string][]storedRequest{}
	err := db.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketRequests).ForEach(func(k, v []byte) error {
			var sr storedRequest
			if err := json.Unmarshal(v, &sr); err != nil {
				return fmt.Errorf("supervisor: %s/%s: %w", bucketRequests, k, err)
			}
			ref, _, _ := bytes.Cut(k, []byte("/"))
			out[string(ref)] = append(out[string(ref)], sr)
			return nil
		})
	})
	for _, rs := range out {
		sort.SliceStable(rs, func(i, j int) bool { return rs[i].AskedAt.Before(rs[j].AskedAt) })
	}
	return out, err
}

// deleteRequestsTx removes a run's requests (Delete).
func deleteRequestsTx(tx *bbolt.Tx, ref string) error {
	c := tx.Bucket(bucketRequests).Cursor()
	prefix := []byte(ref + "/")
	var keys [][]byte
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := tx.Bucket(bucketRequests).Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// restoreRequests puts a run's stored requests back in memory at Open. A
// pending one's process died with the agent: it is expired (R-REQ-8), and
// when the ring is still live (the generation is about to be recorded
// lost) its settlement goes into the output before the ring's end.
func (r *run) restoreRequests(rs []storedRequest) bool {
	now := time.Now().UTC()
	changed := false
	for _, sr := range rs {
		e := &reqEntry{storedRequest: sr}
		if e.Options == nil {
			e.Options = []apitypes.RequestOption{} // a list, never null (R-REQ-1)
		}
		if e.State == apitypes.RequestPending {
			e.State, e.At, e.Reason = apitypes.RequestExpired, &now, reasonRestarted
			r.markReqLocked(e.ID)
			r.unsaved = append(r.unsaved, reqLedger(KindRequestExpired, e))
			changed = true
			if r.ring.Live() {
				r.appendRequest(e.Generation, e.RunRequest)
			}
		}
		r.reqs = append(r.reqs, e)
	}
	if changed {
		r.dirty = true
	}
	return changed
}

// markReqLocked queues request id for the next commit.
func (r *run) markReqLocked(id string) {
	if r.reqDirty == nil {
		r.reqDirty = map[string]bool{}
	}
	r.reqDirty[id] = true
}

// reqLocked returns the request id, or nil.
func (r *run) reqLocked(id string) *reqEntry {
	for _, e := range r.reqs {
		if e.ID == id {
			return e
		}
	}
	return nil
}

// trimLocked drops the oldest settled requests beyond maxSettledKept.
func (r *run) trimLocked() {
	settled := 0
	for i := len(r.reqs) - 1; i >= 0; i-- {
		if r.reqs[i].State == apitypes.RequestPending {
			continue
		}
		settled++
		if settled > maxSettledKept {
			r.reqDrop = append(r.reqDrop, r.reqs[i].ID)
			delete(r.reqDirty, r.reqs[i].ID)
			r.reqs = append(r.reqs[:i], r.reqs[i+1:]...)
		}
	}
}

// pendingLocked counts the pending requests (R-REQ-3).
func (r *run) pendingLocked() int {
	n := 0
	for _, e := range r.reqs {
		if e.State == apitypes.RequestPending {
			n++
		}
	}
	return n
}

// reqWritesLocked returns the puts and deletes of the requests changed
// since the last commit, and clears them (run.save).
func (r *run) reqWritesLocked() (puts map[string][]byte, dels []string, err error) {
	for id := range r.reqDirty {
		e := r.reqLocked(id)
		if e == nil {
			continue
		}
		b, err := json.Marshal(e.storedRequest)
		if err != nil {
			return nil, nil, err
		}
		if puts == nil {
			puts = map[string][]byte{}
		}
		puts[id] = b
	}
	dels = r.reqDrop
	r.reqDirty, r.reqDrop = nil, nil
	return puts, dels, nil
}

// requeueReqWritesLocked puts back what a failed commit did not write.
func (r *run) requeueReqWritesLocked(puts map[string][]byte, dels []string) {
	for id := range puts {
		r.markReqLocked(id)
	}
	r.reqDrop = append(dels, r.reqDrop...)
}

func writeRequestsTx(tx *bbolt.Tx, ref string, puts map[string][]byte, dels []string) error {
	b := tx.Bucket(bucketRequests)
	for id, v := range puts {
		if err := b.Put(requestKey(ref, id), v); err != nil {
			return err
		}
	}
	for _, id := range dels {
		if err := b.Delete(requestKey(ref, id)); err != nil {
			return err
		}
	}
	return nil
}

// appendRequest puts a request (asked or settled) into the run's output
// (R-REQ-4).
func (r *run) appendRequest(gen uint32, v apitypes.RunRequest) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	if _, err := r.ring.Append(gen, ring.Request, b); err != nil {
		r.s.o.Log.Warn("request not recorded in the ring", logging.KeyRunRef, r.ref, "err", err)
	}
}

func reqLedger(kind string, e *reqEntry) ledger.Event {
	d := map[string]string{"id": e.ID, "kind": e.Kind}
	// An empty field is left out: an expiry has no decision nor anyone
	// who made it.
	for k, v := range map[string]string{"tool": e.Tool, "decision": e.Decision, "by": e.By} {
		if v != "" && (k == "tool" || e.State != apitypes.RequestPending) {
			d[k] = v
		}
	}
	detail, _ := json.Marshal(d)
	return ledger.Event{Kind: kind, Generation: e.Generation, Detail: detail}
}

func newRequestID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// subject is what the policy's rules match of a request.
func subject(req *cliruntime.Request) registry.Subject {
	return registry.Subject{Tool: req.Tool, Kind: string(req.Kind), Command: req.Command, Paths: req.Files}
}

// request records a request the tool asked in this generation, settles it
// at once when the profile's policy decides it (R-REQ-10, R-REQ-11), and
// otherwise leaves it to a person until the ask timeout (R-REQ-12).
func (g *generation) request(req *cliruntime.Request) {
	r := g.r
	if req == nil || req.ID == "" {
		return
	}
	now := time.Now().UTC()
	e := &reqEntry{storedRequest: storedRequest{ToolID: req.ID, ToolUseID: req.ToolUseID, RunRequest: apitypes.RunRequest{
		ID: newRequestID(), Kind: string(req.Kind), Tool: req.Tool, Title: req.Title, Generation: g.n, AskedAt: now,
		State: apitypes.RequestPending, Options: []apitypes.RequestOption{},
		Detail: apitypes.RequestDetail{Command: req.Command, Cwd: req.Cwd, Files: req.Files, Diff: req.Diff, Question: req.Question,
			Text: req.Text},
	}}}
	if len(req.Input) > 0 && json.Valid(req.Input) {
		e.Detail.Input = json.RawMessage(req.Input)
	}
	for _, o := range req.Options {
		e.Options = append(e.Options, apitypes.RequestOption{ID: o.ID, Label: o.Label, Decision: string(o.Decision), Session: o.Session})
	}
	action, rule := g.policy.Decide(subject(req))
	reason := ""
	switch {
	case rule > 0:
		reason = fmt.Sprintf("approval rule %d of the profile", rule)
	case action != apitypes.ApprovalsAsk:
		reason = "the profile's approvals policy is " + action
	}
	r.mu.Lock()
	if r.pendingLocked() >= maxPending {
		action, reason = apitypes.ApprovalsDeny, "too many requests wait for an answer"
	}
	if action == apitypes.ApprovalsAsk {
		exp := now.Add(g.policy.AskTimeout)
		e.ExpiresAt = &exp
	}
	r.mu.Unlock()
	e.shown = make(chan struct{})
	r.mu.Lock()
	rev := r.s.Runs.NextRev() // under r.mu (run.change)
	r.reqs = append(r.reqs, e)
	r.markReqLocked(e.ID)
	r.unsaved = append(r.unsaved, reqLedger(KindRequestAsked, e))
	r.rec.Rev, r.dirty = rev, true
	view := e.RunRequest
	r.mu.Unlock()
	r.appendRequest(g.n, view)
	close(e.shown)
	r.s.saver.mark(r)
	r.s.o.OnChange(r.ref)

	switch action {
	case apitypes.ApprovalsAllow, apitypes.ApprovalsDeny:
		d := apitypes.DecisionAllow
		if action == apitypes.ApprovalsDeny {
			d = apitypes.DecisionDeny
		}
		if _, err := r.settle(e.ID, settlement{decision: d, by: apitypes.ByPolicy, reason: reason}, false); err != nil {
			r.s.o.Log.Warn("policy answer failed", logging.KeyRunRef, r.ref, "request", e.ID, "err", err)
		}
	default:
		id, timeout := e.ID, g.policy.AskTimeout
		stop := r.s.o.after(timeout, func() {
			if r.s.closed() {
				return // the agent is going down; the next Open expires it
			}
			_, err := r.settle(id, settlement{decision: apitypes.DecisionDeny, by: apitypes.ByTimeout,
				reason: fmt.Sprintf("nobody answered within %s", timeout)}, false)
			if err != nil && !errors.Is(err, ErrRequestSettled) && !errors.Is(err, ErrRequestExpired) {
				r.s.o.Log.Warn("request timeout failed", logging.KeyRunRef, r.ref, "request", id, "err", err)
			}
		})
		r.mu.Lock()
		if e.State == apitypes.RequestPending {
			e.stop = stop
		} else {
			stop()
		}
		r.mu.Unlock()
	}
}

// settlement is an answer to a request: a decision, the option (optional:
// the first option of that decision), a question's text, who answered and
// why.
type settlement struct {
	decision, optionID, text string
	by, byName, reason       string
}

// settle answers request id once (R-REQ-2): the first valid answer wins, a
// later one is ErrRequestSettled naming who answered first, an answer to a
// request whose process is gone ErrRequestExpired. sync commits before it
// returns (a person's answer); a rule's or the timeout's goes to the
// saver.
func (r *run) settle(id string, a settlement, sync bool) (apitypes.RunRequest, error) {
	r.mu.Lock()
	rev := r.s.Runs.NextRev() // under r.mu (run.change)
	e := r.reqLocked(id)
	if e == nil {
		r.mu.Unlock()
		return apitypes.RunRequest{}, refusal.New(ErrRequestNotFound, "run %s has no request %s", r.ref, id)
	}
	switch e.State {
	case apitypes.RequestSettled:
		v := e.RunRequest
		r.mu.Unlock()
		who := e.By
		if e.ByName != "" {
			who = e.ByName // R-NOTIF-10: "already answered by <name>"
		}
		return v, refusal.New(ErrRequestSettled, "request %s was already answered by %s (%s)", id, who, e.Decision)
	case apitypes.RequestExpired:
		v := e.RunRequest
		r.mu.Unlock()
		return v, refusal.New(ErrRequestExpired, "request %s expired: %s", id, e.Reason)
	}
	opt, err := pickOption(e, a)
	if err != nil {
		r.mu.Unlock()
		return apitypes.RunRequest{}, err
	}
	g := r.gen
	now := time.Now().UTC()
	if g == nil || g.n != e.Generation {
		// The generation ended between the ask and this answer.
		r.expireLocked(e, reasonGone, now, rev)
		v := e.RunRequest
		r.mu.Unlock()
		e.awaitShown()
		r.appendRequest(v.Generation, v)
		r.commit(sync)
		return v, refusal.New(ErrRequestExpired, "request %s expired: %s", id, reasonGone)
	}
	if e.stop != nil {
		e.stop()
		e.stop = nil
	}
	e.State, e.Decision, e.OptionID, e.By, e.ByName, e.At, e.Reason = apitypes.RequestSettled, opt.Decision, opt.ID, a.by, a.byName, &now, a.reason
	r.markReqLocked(e.ID)
	r.unsaved = append(r.unsaved, reqLedger(KindRequestSettled, e))
	r.rec.Rev, r.dirty = rev, true
	r.trimLocked()
	toolID := e.ToolID
	msg := denyMessage(a)
	v := e.RunRequest
	r.mu.Unlock()
	e.awaitShown()

	// The settlement goes into the output before the answer reaches the
	// tool, so that a watcher reads it before what the tool does next
	// (R-REQ-4).
	werr := g.answer(toolID, cliruntime.Answer{OptionID: opt.ID, Text: a.text, Message: msg}, func() { r.appendRequest(v.Generation, v) })
	if werr != nil {
		r.mu.Lock()
		rev := r.s.Runs.NextRev() // under r.mu (run.change)
		e.Decision, e.OptionID, e.By, e.ByName = "", "", "", ""
		r.expireLocked(e, reasonWithdrawn, now, rev)
		v = e.RunRequest
		r.mu.Unlock()
		r.appendRequest(v.Generation, v)
		r.commit(sync)
		if errors.Is(werr, cliruntime.ErrBadAnswer) {
			return v, refusal.New(ErrBadAnswer, "%v", werr)
		}
		return v, refusal.New(ErrRequestExpired, "request %s expired: %s", id, reasonWithdrawn)
	}
	return v, r.commit(sync)
}

// commit commits the record with its requests now (sync) or through the
// saver, and notifies the change.
func (r *run) commit(sync bool) error {
	if !sync {
		r.s.saver.mark(r)
		r.s.o.OnChange(r.ref)
		return nil
	}
	err := r.save(nil)
	r.s.o.OnChange(r.ref)
	return err
}

// expireLocked marks e expired with reason.
func (r *run) expireLocked(e *reqEntry, reason string, now time.Time, rev uint64) {
	if e.stop != nil {
		e.stop()
		e.stop = nil
	}
	e.State, e.At, e.Reason = apitypes.RequestExpired, &now, reason
	r.markReqLocked(e.ID)
	r.unsaved = append(r.unsaved, reqLedger(KindRequestExpired, e))
	r.rec.Rev, r.dirty = rev, true
	r.trimLocked()
}

// expireGeneration expires the pending requests of generation n: its
// process is gone (R-REQ-8). Their settlements go into the output before
// the ring's end; the caller commits.
func (r *run) expireGeneration(n uint32, reason string) {
	now := time.Now().UTC()
	var out []apitypes.RunRequest
	var es []*reqEntry
	r.mu.Lock()
	rev := r.s.Runs.NextRev() // under r.mu (run.change)
	for _, e := range r.reqs {
		if e.State == apitypes.RequestPending && e.Generation == n {
			r.expireLocked(e, reason, now, rev)
			out, es = append(out, e.RunRequest), append(es, e)
		}
	}
	r.mu.Unlock()
	for i, v := range out {
		es[i].awaitShown()
		r.appendRequest(n, v)
	}
}

// withdrawn: the tool no longer waits on its request toolID (its turn was
// interrupted).
func (r *run) withdrawn(g *generation, toolID string) {
	now := time.Now().UTC()
	r.mu.Lock()
	rev := r.s.Runs.NextRev() // under r.mu (run.change)
	var v *apitypes.RunRequest
	var shown *reqEntry
	for _, e := range r.reqs {
		if e.State == apitypes.RequestPending && e.Generation == g.n && e.ToolID == toolID {
			r.expireLocked(e, reasonWithdrawn, now, rev)
			x := e.RunRequest
			v, shown = &x, e
			break
		}
	}
	r.mu.Unlock()
	if v != nil {
		shown.awaitShown()
		r.appendRequest(g.n, *v)
		r.commit(false)
	}
}

// denied records a tool use the tool refused on its own (R-REQ-9) as a
// request it settled itself, unless a request of the run already covers
// that use (one a person, a rule or the engine's hook denied).
func (g *generation) denied(d *cliruntime.Denial, by string) {
	r := g.r
	if d == nil || d.Tool == "" {
		return
	}
	now := time.Now().UTC()
	kind := apitypes.RequestPermission
	title := g.tool + " refused " + d.Tool
	if by == apitypes.ByPolicy {
		title = "The profile's policy refused " + d.Tool
	}
	if d.Command != "" {
		kind = apitypes.RequestCommand
		title += ": " + cliruntime.Title(d.Command)
	}
	e := &reqEntry{storedRequest: storedRequest{ToolUseID: d.ToolUseID, RunRequest: apitypes.RunRequest{
		ID: newRequestID(), Kind: kind, Tool: d.Tool, Title: cliruntime.Clip(title), Generation: g.n, AskedAt: now,
		Detail: apitypes.RequestDetail{Command: d.Command}, Options: []apitypes.RequestOption{},
		State: apitypes.RequestSettled, Decision: apitypes.DecisionDeny, By: by, At: &now, Reason: d.Message,
	}}}
	r.mu.Lock()
	rev := r.s.Runs.NextRev() // under r.mu (run.change)
	if d.ToolUseID != "" {
		for _, x := range r.reqs {
			if x.ToolUseID == d.ToolUseID {
				r.mu.Unlock()
				return
			}
		}
	}
	r.reqs = append(r.reqs, e)
	r.markReqLocked(e.ID)
	r.unsaved = append(r.unsaved, reqLedger(KindRequestSettled, e))
	r.rec.Rev, r.dirty = rev, true
	r.trimLocked()
	v := e.RunRequest
	r.mu.Unlock()
	r.appendRequest(g.n, v)
	r.commit(false)
}

// pickOption finds the option an answer chooses (R-REQ-2): the one named,
// which must have the answer's decision, or the first of that decision
// ("once" before "for this session").
func pickOption(e *reqEntry, a settlement) (apitypes.RequestOption, error) {
	switch a.decision {
	case apitypes.DecisionAllow, apitypes.DecisionDeny, apitypes.DecisionAnswer:
	default:
		return apitypes.RequestOption{}, refusal.New(ErrBadAnswer, "decision %q: use allow, deny or answer", a.decision)
	}
	if a.text != "" && a.decision == apitypes.DecisionAllow {
		// Text is a question's answer, or the reason of a deny the tool
		// is told; an allow carries none.
		return apitypes.RequestOption{}, refusal.New(ErrBadAnswer, "request %s: an allow takes no text; give text with answer or deny", e.ID)
	}
	if a.optionID != "" {
		for _, o := range e.Options {
			if o.ID == a.optionID {
				if o.Decision != a.decision {
					return apitypes.RequestOption{}, refusal.New(ErrBadAnswer, "option %q of request %s is a %s, not a %s", o.ID, e.ID, o.Decision, a.decision)
				}
				return o, nil
			}
		}
		return apitypes.RequestOption{}, refusal.New(ErrBadAnswer, "request %s offers no option %q; it offers %s", e.ID, a.optionID, optionIDs(e.Options))
	}
	if a.decision == apitypes.DecisionAnswer && e.Detail.Text && a.text == "" {
		return apitypes.RequestOption{}, refusal.New(ErrBadAnswer, "request %s asks a question: give the answer as text, or pick an option", e.ID)
	}
	if a.decision == apitypes.DecisionAnswer && a.text != "" {
		// Text answers in the person's own words where the tool offers it.
		for _, o := range e.Options {
			if o.ID == cliruntime.OptionText {
				return o, nil
			}
		}
	}
	var pick *apitypes.RequestOption
	for i := range e.Options {
		o := &e.Options[i]
		if o.Decision == a.decision && (pick == nil || (pick.Session && !o.Session)) {
			pick = o
		}
	}
	if pick == nil {
		return apitypes.RequestOption{}, refusal.New(ErrBadAnswer, "request %s offers no %s option; it offers %s", e.ID, a.decision, optionIDs(e.Options))
	}
	return *pick, nil
}

func optionIDs(opts []apitypes.RequestOption) string {
	var ids []string
	for _, o := range opts {
		ids = append(ids, o.ID+" ("+o.Decision+")")
	}
	return strings.Join(ids, ", ")
}

// denyMessage is what the tool is told when a request is denied (Claude
// Code shows it to the model).
func denyMessage(a settlement) string {
	if a.decision != apitypes.DecisionDeny {
		return ""
	}
	switch a.by {
	case apitypes.ByTimeout:
		return "Denied: nobody answered this request in time (" + a.reason + ")."
	case apitypes.ByPolicy:
		return "Denied by the Olivares profile's policy (" + a.reason + ")."
	}
	if a.text != "" {
		return "The user denied this: " + a.text
	}
	return "The user denied this tool use."
}

// answer writes an answer to the tool; accepted runs once the driver took
// the answer and before its lines are queued for the tool's stdin.
func (g *generation) answer(toolID string, a cliruntime.Answer, accepted func()) error {
	g.mu.Lock()
	if g.stdinDone {
		g.mu.Unlock()
		return cliruntime.ErrNoSuchRequest
	}
	st, err := g.sess.Answer(toolID, a)
	if err == nil {
		accepted()
		g.pushLocked(st.Write)
	}
	g.mu.Unlock()
	if err != nil {
		return err
	}
	g.events(st.Events)
	return nil
}

// Requests is the runs' requests as people see them: listed, and answered.
type Requests struct {
	runs *Table
}

// List lists run ref's requests: the pending ones, oldest first, then the
// settled and expired ones, newest first (R-REQ-2).
func (q *Requests) List(ref string) ([]apitypes.RunRequest, error) {
	r, err := q.runs.get(ref)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := []apitypes.RunRequest{}
	for _, e := range r.reqs {
		if e.State == apitypes.RequestPending {
			out = append(out, e.RunRequest)
		}
	}
	for i := len(r.reqs) - 1; i >= 0; i-- {
		if e := r.reqs[i]; e.State != apitypes.RequestPending {
			out = append(out, e.RunRequest)
		}
	}
	return out, nil
}

// Answer is a person's answer to request id of run ref (R-REQ-2): by is
// their principal id. It returns the settled request once the answer is
// written to the tool and committed.
func (q *Requests) Answer(ref, id, by string, a apitypes.RequestAnswer) (apitypes.RunRequest, error) {
	r, err := q.runs.get(ref)
	if err != nil {
		return apitypes.RunRequest{}, err
	}
	if by == "" || by == apitypes.ByPolicy || by == apitypes.ByTimeout || by == apitypes.ByTool {
		return apitypes.RunRequest{}, refusal.New(ErrBadRequest, "an answer needs the principal who gives it")
	}
	if len(a.Text) > cliruntime.MaxRequestDetail {
		return apitypes.RunRequest{}, refusal.New(ErrBadAnswer, "the text is over %d bytes", cliruntime.MaxRequestDetail)
	}
	return r.settle(id, settlement{decision: a.Decision, optionID: a.OptionID, text: a.Text, by: by, byName: a.ByName}, true)
}

// approvals is the approval policy of the run's profile now, for a
// process about to start; a profile that is gone denies.
func (r *run) approvals() registry.Approvals {
	r.mu.Lock()
	ref := r.rec.ProfileRef
	r.mu.Unlock()
	p, ok, err := r.s.o.Registry.Profile(ref)
	if err != nil || !ok {
		return registry.Approvals{Default: apitypes.ApprovalsDeny, AskTimeout: registry.DefaultAskTimeout}
	}
	return p.ApprovalPolicy()
}
