package supervisor

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// KindError is the ledger event of a new last_error (R-LERR-3): its kind,
// never its message (which may quote a prompt).
const KindError = "error"

// lastError records what a driver saw fail as the run's last_error
// (R-LERR-1): a failed turn (not one a person interrupted), an error the
// tool reported, or a retry loop the tool is in. It reports whether it
// changed the record (and notified).
func (g *generation) lastError(e cliruntime.Event) bool {
	kind := e.ErrorKind
	if kind == cliruntime.ErrorInterrupted {
		return false
	}
	if kind == "" {
		kind = cliruntime.ErrorTurnFailed
		if e.Kind == cliruntime.EventError {
			kind = cliruntime.ErrorTool
		}
	}
	msg := e.Error
	if msg == "" {
		msg = e.Reason
	}
	if msg == "" {
		msg = "the turn failed"
	}
	msg = cliruntime.Title(msg)
	r := g.r
	r.mu.Lock()
	old := r.rec.LastError
	r.mu.Unlock()
	if old != nil && old.Kind == kind && old.Message == msg {
		return false
	}
	le := &apitypes.LastError{Kind: kind, Message: msg, At: time.Now().UTC()}
	ev := ledger.Event{}
	if old == nil || old.Kind != kind {
		detail, _ := json.Marshal(map[string]string{"kind": kind})
		ev = ledger.Event{Kind: KindError, Generation: g.n, Detail: detail}
	}
	r.updateAsync(ev, func(rec *record) { rec.LastError = le })
	return true
}

// PreviewRunes bounds a run's last_message (R-LIST-8): the index push
// stays small whatever the tool said.
const PreviewRunes = 200

// Preview is text as the list's one-line preview: its whitespace runs made
// one space, cut at PreviewRunes runes with an ellipsis.
func Preview(text string) string {
	s := strings.Join(strings.Fields(text), " ")
	if utf8.RuneCountInString(s) <= PreviewRunes {
		return s
	}
	r := []rune(s)
	return string(r[:PreviewRunes-1]) + "\u2026"
}
