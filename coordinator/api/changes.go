package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
)

// The fleet-wide change stream (R-CHG-*): GET /v1/m/sessions/events sends
// run rows as they change, the caller's own marks, and node links going up
// and down, from a bounded log this coordinator keeps in memory.

// DefaultChangeLog is how many changes the log keeps at least (R-CHG-4).
const DefaultChangeLog = 4096

// Default caps of the change streams (R-CHG-6): a console tab holds one,
// so a person's few browsers stay far below the first; the second bounds
// the goroutines and connections the streams hold at once.
const (
	DefaultChangeStreamsPerPrincipal = 32
	DefaultChangeStreams             = 4096
)

// ChangeStreamLimits cap the open change streams (R-CHG-6).
type ChangeStreamLimits struct {
	// PerPrincipal is the most one principal holds open; one more is 429
	// too_many_change_streams. When zero, DefaultChangeStreamsPerPrincipal.
	PerPrincipal int
	// Total is the most this coordinator holds open for everyone. When
	// zero, DefaultChangeStreams.
	Total int
}

func (l *ChangeStreamLimits) setDefaults() {
	if l.PerPrincipal <= 0 {
		l.PerPrincipal = DefaultChangeStreamsPerPrincipal
	}
	if l.Total <= 0 {
		l.Total = DefaultChangeStreams
	}
}

// change is one entry of the log.
type change struct {
	seq    uint64
	tenant string
	// owner, when set, is the only caller the change is for (a mark).
	owner string
	event string
	run   apitypes.Run // a run event's row, as the index took it
	view  *sharedRun   // a run event's rendering, shared by every stream
	data  any          // the other events' data
}

// sharedRun is a run change rendered once for every stream (issue 34:
// each stream rendered each change, a store read and a marshal per
// subscriber): the view every caller shares (sharedView, read at the first
// stream that sends it) and its JSON for a caller without marks on the run.
// A caller with marks renders its own from view.
type sharedRun struct {
	once sync.Once
	view apitypes.Run
	json []byte // nil when the session meta could not be read
}

// rendered renders ch, a run change, once.
func (s *core) rendered(ch change) *sharedRun {
	v := ch.view
	v.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		metas, err := s.o.Store.GetRunMeta(ctx, []string{ch.run.RunRef})
		if err != nil {
			s.log.Warn("change stream: the run's session meta; the change is not sent", logging.KeyRunRef, ch.run.RunRef, logging.Err(err))
			return
		}
		v.view = s.sharedView(ch.run, metas[ch.run.RunRef])
		v.json, err = json.Marshal(withMarks(v.view, store.Marks{}, s.o.Now()))
		if err != nil {
			v.json = nil
		}
	})
	return v
}

// changeLog is the bounded, ordered log of changes (R-CHG-3). seq
// increases by one per change; epoch names this process, so a cursor of
// another process (or of this one before a restart) is never taken for
// one of this log.
type changeLog struct {
	mu    sync.Mutex
	epoch string
	keep  int
	items []change // ascending seq; at least the last keep changes
	seq   uint64   // the last seq given
	wake  chan struct{}
}

func newChangeLog(keep int) *changeLog {
	if keep <= 0 {
		keep = DefaultChangeLog
	}
	var b [6]byte
	rand.Read(b[:])
	return &changeLog{epoch: hex.EncodeToString(b[:]), keep: keep, wake: make(chan struct{})}
}

// add appends c and wakes the streams.
func (l *changeLog) add(c change) {
	l.mu.Lock()
	l.seq++
	c.seq = l.seq
	l.items = append(l.items, c)
	if len(l.items) > l.keep+l.keep/4 {
		l.items = append([]change(nil), l.items[len(l.items)-l.keep:]...)
	}
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
}

// after returns the changes after seq. ok is false when seq is not one
// this log can go on from: older than what it keeps, or ahead of it.
// head is the last seq given; wake closes at the next add.
func (l *changeLog) after(seq uint64) (out []change, ok bool, head uint64, wake <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	oldest := l.seq + 1
	if len(l.items) > 0 {
		oldest = l.items[0].seq
	}
	if seq > l.seq || seq+1 < oldest {
		return nil, false, l.seq, l.wake
	}
	i := len(l.items) - int(l.seq-seq)
	return append([]change(nil), l.items[i:]...), true, l.seq, l.wake
}

// cursor is an event id: the process's epoch and the seq.
func (l *changeLog) cursor(seq uint64) string { return l.epoch + "-" + strconv.FormatUint(seq, 10) }

// parse reads a Last-Event-ID; ok is false for a malformed id or another
// process's.
func (l *changeLog) parse(id string) (uint64, bool) {
	epoch, n, found := strings.Cut(strings.TrimSpace(id), "-")
	if !found || epoch != l.epoch {
		return 0, false
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	return seq, err == nil
}

// --- what the API and the fleet publish ---

// fleetObserver is the fleet's side of the log, and of the sign-ins'
// audit.
type fleetObserver struct {
	s       *core
	signins *signinAPI
}

func (o fleetObserver) RunsIndexed(_ context.Context, runs []apitypes.Run) { o.s.publishRuns(runs...) }

func (o fleetObserver) SigninsEnded(ctx context.Context, nodeID string, as []apitypes.SigninAttempt) []string {
	return o.signins.signinsEnded(ctx, nodeID, as)
}

func (o fleetObserver) LinkChanged(nodeID string, connected bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n, err := o.s.o.Store.GetNode(ctx, nodeID)
	if err != nil {
		o.s.log.Warn("change stream: node link change of an unknown node", logging.KeyNodeID, nodeID, logging.Err(err))
		return
	}
	o.s.changes.add(change{tenant: n.Tenant, event: apitypes.ChangeNode,
		data: apitypes.NodeChange{NodeID: nodeID, Connected: connected, At: o.s.o.Now().UTC()}})
}

// --- changes between replicas (R-CHG-5) ---

// replicaChanges queues the runs this replica changed for the others.
type replicaChanges struct {
	on    atomic.Bool
	queue chan store.RunKey
}

// replicaQueue bounds the announcements waiting to be sent; beyond it one
// is dropped: the other replicas' streams miss that change.
const replicaQueue = 8192

func (r *replicaChanges) announce(tenant, ref string) {
	if !r.on.Load() {
		return
	}
	select {
	case r.queue <- store.RunKey{Tenant: tenant, Ref: ref}:
	default:
	}
}

// FollowReplicas carries run changes between the replicas of one database
// until ctx ends (R-CHG-5): the rows this replica indexes, the names and
// archive marks it changes and the runs it removes are announced to the
// others, in batches, after the store holds them; what the others announce
// is read from the store and logged here, for this replica's change
// streams (and not notified again: the replica that indexed a row sends
// its webhooks).
func (s *Server) FollowReplicas(ctx context.Context, reps store.Replicas) {
	c := s.core
	c.replicas.queue = make(chan store.RunKey, replicaQueue)
	c.replicas.on.Store(true)
	defer c.replicas.on.Store(false)
	// What the others announce collects here while a read runs: a run
	// announced again meanwhile is read once, at its newest.
	var mu sync.Mutex
	pending := map[store.RunKey]bool{}
	wake := make(chan struct{}, 1)
	connected := false
	go reps.WatchRuns(ctx, func(keys []store.RunKey) {
		if len(keys) == 0 {
			// (Re)connected. After a break, what the others announced
			// meanwhile is missed: every stream is told to refetch.
			if connected {
				c.changes.add(change{event: apitypes.ChangeReset, data: apitypes.ChangeResetEvent{Reason: apitypes.ResetMissed}})
			}
			connected = true
			return
		}
		mu.Lock()
		for _, k := range keys {
			pending[k] = true
		}
		mu.Unlock()
		select {
		case wake <- struct{}{}:
		default:
		}
	})
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-wake:
			}
			mu.Lock()
			keys := pending
			pending = map[store.RunKey]bool{}
			mu.Unlock()
			c.logAnnounced(ctx, keys)
		}
	}()
	for {
		var keys []store.RunKey
		select {
		case <-ctx.Done():
			return
		case k := <-c.replicas.queue:
			keys = append(keys, k)
		}
		seen := map[store.RunKey]bool{keys[0]: true}
	batch: // what queued meanwhile goes in the same announcement, once
		for len(keys) < 1000 {
			select {
			case k := <-c.replicas.queue:
				if !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			default:
				break batch
			}
		}
		if err := reps.AnnounceRuns(ctx, keys); err != nil && ctx.Err() == nil {
			c.log.Warn("change stream: run changes not announced to the other replicas", "runs", len(keys), logging.Err(err))
		}
	}
}

// logAnnounced reads the runs another replica announced, in one read, and
// logs each as a run event, or as removed when it is no longer indexed.
func (c *core) logAnnounced(ctx context.Context, keys map[store.RunKey]bool) {
	refs := make([]string, 0, len(keys))
	for k := range keys {
		refs = append(refs, k.Ref)
	}
	runs, err := c.o.Store.GetRuns(ctx, refs)
	if err != nil {
		c.log.Warn("change stream: the runs another replica changed could not be read", "runs", len(refs), logging.Err(err))
		return
	}
	for k := range keys {
		run, ok := runs[k.Ref]
		switch {
		case !ok:
			c.changes.add(change{tenant: k.Tenant, event: apitypes.ChangeRunRemoved, data: apitypes.RunRemoved{RunRef: k.Ref}})
		case run.Tenant == k.Tenant:
			c.changes.add(change{tenant: run.Tenant, event: apitypes.ChangeRun, run: run, view: &sharedRun{}})
		}
	}
}

// --- the stream ---

// changeAPI serves the change stream (R-CHG).
type changeAPI struct {
	*core
	streams streamSlots // the open change streams (R-CHG-6)
}

func (s *changeAPI) routes() []Route {
	return []Route{
		// R-CHG-1: what GET /runs shows, as it changes; run:read.
		{http.MethodGet, Base + "/events", auth.PermRunRead, s.changeStream, nil},
	}
}

// changeStream is GET /v1/m/sessions/events (R-CHG-1..5).
func (s *changeAPI) changeStream(c echo.Context) error {
	ctx := c.Request().Context()
	cl := CallerOf(c)
	// R-CHG-6: capped per principal and in all.
	release, n, ok := s.streams.acquire(cl.Principal.ID, s.o.ChangeStreams.PerPrincipal, s.o.ChangeStreams.Total)
	if !ok && n < 0 {
		return apierr.New(http.StatusTooManyRequests, "too_many_change_streams",
			"this coordinator has %d change streams open, the most it serves at once; try again in a minute, or ask its operator to raise api.max_change_streams", s.o.ChangeStreams.Total)
	}
	if !ok {
		return apierr.New(http.StatusTooManyRequests, "too_many_change_streams",
			"you have %d change streams open, the most one principal may hold at once; close a console tab or another client that follows the changes, then connect again", n)
	}
	defer release()
	sink := openSSE(c)
	var buf []byte
	flush := func() bool {
		if len(buf) == 0 {
			return true
		}
		sink.SetWriteDeadline(time.Now().Add(s.o.Attach.WriteTimeout))
		_, err := sink.Write(buf)
		buf = buf[:0]
		return err == nil && sink.Flush() == nil
	}
	eventJSON := func(name string, seq uint64, b []byte) {
		buf = append(buf, "event: "+name+"\nid: "+s.changes.cursor(seq)+"\ndata: "...)
		buf = append(buf, b...)
		buf = append(buf, "\n\n"...)
	}
	event := func(name string, seq uint64, data any) {
		if b, err := json.Marshal(data); err == nil {
			eventJSON(name, seq, b)
		}
	}
	reset := func(reason string, head uint64) {
		event(apitypes.ChangeReset, head, apitypes.ChangeResetEvent{Reason: reason})
	}

	// R-CHG-4: resume after Last-Event-ID when the log still holds what
	// followed it; otherwise a reset, and on from the head.
	_, _, head, _ := s.changes.after(0)
	seq := head
	if id := c.Request().Header.Get("Last-Event-ID"); id != "" {
		n, ok := s.changes.parse(id)
		if _, kept, h, _ := s.changes.after(n); ok && kept {
			seq = n
		} else if ok {
			reset(apitypes.ResetExpired, h)
			seq = h
		} else {
			reset(apitypes.ResetRestart, h)
			seq = h
		}
	} else {
		reset(apitypes.ResetNew, head)
	}
	buf = append(buf, ":\n\n"...) // the headers and the first event go now
	if !flush() {
		return nil
	}
	keepAlive := time.NewTimer(s.o.Attach.KeepAlive)
	defer keepAlive.Stop()
	for {
		items, ok, h, wake := s.changes.after(seq)
		if !ok {
			// This stream fell behind the log (R-CHG-4).
			reset(apitypes.ResetExpired, h)
			seq = h
			continue
		}
		// The caller's marks on every run row in this batch, from one
		// read: under a burst of changes a stream catches up in batches,
		// not in one store read per change. The rest of each row's view is
		// rendered once for every stream (sharedRun).
		var refs []string
		for _, ch := range items {
			if ch.event == apitypes.ChangeRun && ch.tenant == cl.Tenant {
				refs = append(refs, ch.run.RunRef)
			}
		}
		var marks map[string]store.Marks
		var marksErr error
		if len(refs) > 0 {
			if marks, marksErr = s.o.Store.GetMarks(ctx, cl.Tenant, cl.Owner(), refs); marksErr != nil {
				if ctx.Err() != nil {
					return nil
				}
				s.log.WarnContext(ctx, "change stream: the caller's marks; the batch's run changes are not sent", logging.Err(marksErr))
			}
		}
		now := s.o.Now()
		for _, ch := range items {
			seq = ch.seq
			if ch.event == apitypes.ChangeReset { // every tenant's (FollowReplicas)
				event(ch.event, ch.seq, ch.data)
				continue
			}
			if ch.tenant != cl.Tenant || (ch.owner != "" && ch.owner != cl.Owner()) {
				continue
			}
			if ch.event != apitypes.ChangeRun {
				event(ch.event, ch.seq, ch.data)
				continue
			}
			v := s.rendered(ch)
			switch m := marks[ch.run.RunRef]; {
			case marksErr != nil || v.json == nil:
				// Not read: the row is dropped, as a failed read did before.
			case !unmarked(m, now):
				event(ch.event, ch.seq, withMarks(v.view, m, now))
			default:
				eventJSON(ch.event, ch.seq, v.json)
			}
		}
		if len(buf) > 0 {
			if !flush() {
				return nil
			}
			keepAlive.Reset(s.o.Attach.KeepAlive)
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil
		case <-keepAlive.C:
			buf = append(buf, keepAliveComment...)
			if !flush() {
				return nil
			}
			keepAlive.Reset(s.o.Attach.KeepAlive)
		}
	}
}
