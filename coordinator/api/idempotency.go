package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/olivares-dev/olivares/coordinator/auth"
	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/logging"
)

// Idempotency-Key on the routes that start a run (POST /runs and POST
// /runs/{ref}/handoff, R-CRT-7): a retry with the same key from the same
// credential within 24 h gets the first answer (same status, same run)
// instead of a second launch; the same key with another body is 422
// idempotency_key_reused. The key, the body's hash and the run ref chosen
// for the request are stored before the node is asked (a claim), so
// concurrent duplicates launch once and a restart forgets nothing.
const (
	// HeaderIdempotencyKey is the request header.
	HeaderIdempotencyKey = "Idempotency-Key"
	// HeaderIdempotentReplayed is "true" on an answer replayed from an
	// earlier request with the same key.
	HeaderIdempotentReplayed = "Idempotent-Replayed"

	idempotencyTTL    = 24 * time.Hour
	maxIdempotencyKey = 255
	// idempotencyAbandoned: a claim older than this has no request behind
	// it any more (its coordinator died): a retry takes it over.
	idempotencyAbandoned = callTimeout + 30*time.Second
	// idempotencyPoll is how often a duplicate looks for the first
	// request's answer (another replica may hold it).
	idempotencyPoll = 50 * time.Millisecond
)

// runRefKey holds the run ref an idempotent request must use.
const runRefKey = "olivares.run_ref"

// newRunRef is the ref of the run a request creates: the one its
// Idempotency-Key claim holds, or a new one.
func newRunRef(c echo.Context) string {
	if ref, ok := c.Get(runRefKey).(string); ok && ref != "" {
		return ref
	}
	return auth.NewID("run_")
}

// idemWaiters wakes, in this process, the duplicates of a request when its
// answer is stored.
type idemWaiters struct {
	mu sync.Mutex
	ch map[string]chan struct{}
}

func (w *idemWaiters) wait(k string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = map[string]chan struct{}{}
	}
	ch, ok := w.ch[k]
	if !ok {
		ch = make(chan struct{})
		w.ch[k] = ch
	}
	return ch
}

func (w *idemWaiters) wake(k string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch, ok := w.ch[k]; ok {
		close(ch)
		delete(w.ch, k)
	}
}

// validIdempotencyKey: 1 to 255 visible ASCII characters.
func validIdempotencyKey(k string) bool {
	if len(k) == 0 || len(k) > maxIdempotencyKey {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

// idempotent wraps a handler that starts a run.
func (s *core) idempotent(h echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		key := c.Request().Header.Get(HeaderIdempotencyKey)
		if _, sent := c.Request().Header[http.CanonicalHeaderKey(HeaderIdempotencyKey)]; !sent {
			return h(c)
		}
		if !validIdempotencyKey(key) {
			return apierr.BadRequest("bad_idempotency_key", "the Idempotency-Key header must be 1 to %d visible ASCII characters (a UUID, say)", maxIdempotencyKey)
		}
		body, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxJSONBody))
		if err != nil {
			return apierr.New(http.StatusRequestEntityTooLarge, "body_too_large", "the request body is over %d bytes", maxJSONBody)
		}
		c.Request().Body = io.NopCloser(bytes.NewReader(body))
		sum := sha256.Sum256(body)
		cl := CallerOf(c)
		ctx := c.Request().Context()
		now := s.o.Now().UTC()
		rec := store.IdempotencyRecord{
			Scope: cl.Tenant + " " + cl.Credential.Hash + " " + c.Request().Method + " " + c.Request().URL.Path,
			Key:   key, BodyHash: hex.EncodeToString(sum[:]), RunRef: auth.NewID("run_"),
			CreatedAt: now, ExpiresAt: now.Add(idempotencyTTL),
		}
		wk := rec.Scope + "\x00" + key
		for {
			stored, claimed, err := s.o.Store.ClaimIdempotencyKey(ctx, rec)
			if err != nil {
				return err
			}
			switch {
			case claimed:
				c.Set(runRefKey, rec.RunRef)
				return s.recordAnswer(c, rec, wk, func() error { return h(c) })
			case stored.BodyHash != rec.BodyHash:
				return apierr.New(http.StatusUnprocessableEntity, "idempotency_key_reused",
					"Idempotency-Key %q was used at %s for another request body; use a new key for a new request", key, stored.CreatedAt.Format(time.RFC3339))
			case stored.Status != 0:
				h := c.Response().Header()
				h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
				h.Set(HeaderIdempotentReplayed, "true")
				return c.Blob(stored.Status, echo.MIMEApplicationJSON, stored.Body)
			case s.o.Now().Sub(stored.CreatedAt) > idempotencyAbandoned:
				// The first request's coordinator died before it answered.
				// Its run may have started: then that is the answer.
				taken := stored
				taken.CreatedAt = s.o.Now().UTC()
				if r, err := s.o.Store.GetRun(ctx, stored.RunRef); err == nil {
					if c.Path() != Base+"/runs" {
						// A handoff's answer holds more than its run.
						return apierr.New(http.StatusConflict, "idempotency_outcome_unknown",
							"the request with Idempotency-Key %q was cut off by a coordinator restart after it started run %s; look at that run before you try again with a new key", key, r.RunRef)
					}
					return s.recordAnswer(c, taken, wk, func() error { return s.respondRun(c, launchStatus(r), r) })
				}
				if err := s.o.Store.PutIdempotencyRecord(ctx, taken); err != nil {
					return err
				}
				c.Set(runRefKey, taken.RunRef)
				return s.recordAnswer(c, taken, wk, func() error { return h(c) })
			}
			// In flight: wait for its answer (woken by this process, or
			// polling for another replica's).
			woken := s.idem.wait(wk)
			t := time.NewTimer(idempotencyPoll)
			select {
			case <-woken:
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			t.Stop()
		}
	}
}

// recordAnswer stores the answer of a claimed key: a 2xx is kept for the
// key's retries; a refusal frees the key (nothing was started, so a retry
// may try again).
func (s *core) recordAnswer(c echo.Context, rec store.IdempotencyRecord, wk string, answer func() error) error {
	defer s.idem.wake(wk)
	// The answer is stored even when the client has gone: that is what a
	// retry after a timeout needs.
	ctx := context.WithoutCancel(c.Request().Context())
	w := &bodyRecorder{ResponseWriter: c.Response().Writer}
	c.Response().Writer = w
	err := answer()
	c.Response().Writer = w.ResponseWriter
	status := c.Response().Status
	if err != nil || status < 200 || status > 299 {
		if derr := s.o.Store.DeleteIdempotencyKey(ctx, rec.Scope, rec.Key); derr != nil {
			s.log.ErrorContext(ctx, "idempotency key: delete failed", logging.Err(derr))
		}
		return err
	}
	rec.Status, rec.Body = status, w.body.Bytes()
	if err := s.o.Store.PutIdempotencyRecord(ctx, rec); err != nil {
		s.log.ErrorContext(ctx, "idempotency key: record failed", logging.Err(err))
	}
	return nil
}

// bodyRecorder keeps a copy of what a handler writes.
type bodyRecorder struct {
	http.ResponseWriter
	body bytes.Buffer
}

func (r *bodyRecorder) Write(p []byte) (int, error) {
	r.body.Write(p)
	return r.ResponseWriter.Write(p)
}
