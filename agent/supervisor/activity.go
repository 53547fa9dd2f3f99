package supervisor

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/ledger"
	"github.com/olivares-dev/olivares/agent/transcript"
)

// ledgerNone is an update that writes no ledger row.
var ledgerNone = ledger.Event{}

// readsTranscript reports whether a driver's runs have a native record
// Olivares reads for activity and messages (R-ACT-2, R-MSG-1).
func readsTranscript(driver string) bool {
	return driver == string(cliruntime.KindClaude) || driver == string(cliruntime.KindCodex)
}

// newLive is the run's live observer of its stdout (R-ACT-7, R-WF-6,
// R-ACT-5), its window report persisted on the run's record so that it is
// kept across a stop and an agent restart.
func (r *run) newLive() {
	r.live = transcript.NewLive()
	r.live.SetWindow(r.rec.Window)
	r.live.OnWindow(func(w *transcript.WindowReport) {
		if err := r.update(ledgerNone, func(rec *record) { rec.Window = w }); err != nil {
			r.s.o.Logf("supervisor: run %s: window report: %v", r.ref, err)
		}
	})
}

// transcriptErr turns a transcript package refusal into the agent's answer.
func transcriptErr(err error) error {
	var te *transcript.Error
	if errors.As(err, &te) {
		return errf(te.Status, te.Code, "%s", te.Message)
	}
	return err
}

// transcriptSource checks a read of the run's native record: a tool without
// a reader is 422 (R-ACT-8, R-MSG-11), then taint 409 (R-CRED-3, R-CRED-4).
func (s *Supervisor) transcriptSource(ref, surface string) (*run, transcript.Source, error) {
	r, err := s.get(ref)
	if err != nil {
		return nil, transcript.Source{}, err
	}
	r.mu.Lock()
	rec, live := r.rec, r.gen != nil
	r.mu.Unlock()
	if !readsTranscript(rec.Driver) {
		return nil, transcript.Source{}, errf(http.StatusUnprocessableEntity, "unsupported_tool", "%s runs have no native record Olivares reads; activity and messages are for Claude Code and Codex runs", rec.Driver)
	}
	if err := taintRefusal(rec, live, surface); err != nil {
		return nil, transcript.Source{}, err
	}
	prof, ok, err := s.profile(rec.ProfileRef)
	if err != nil {
		return nil, transcript.Source{}, err
	}
	if !ok {
		return nil, transcript.Source{}, errf(http.StatusConflict, "profile_gone", "the profile %s of run %s is gone", rec.ProfileRef, ref)
	}
	return r, transcript.Source{Tool: rec.Driver, Home: prof.Home, ConversationID: rec.ConversationID, Cwd: rec.WorkspacePath, Live: live}, nil
}

// Activity is GET /runs/{ref}/activity (R-ACT-1..9, R-WF-*): read fresh from
// the tool's own record at every request, never by starting a tool.
func (s *Supervisor) Activity(ref string) (transcript.Activity, error) {
	r, src, err := s.transcriptSource(ref, SurfaceActivity)
	if err != nil {
		return transcript.Activity{}, err
	}
	snap := r.live.Snapshot()
	a, err := s.tcache.Activity(src, &snap, r.live.Window())
	return a, transcriptErr(err)
}

// SubAgent is GET /runs/{ref}/activity/agents/{agent} (R-AGT-1..5): Codex
// children are only reported in the root activity (R-AGT-4).
func (s *Supervisor) SubAgent(ref, agent string) (transcript.SubAgentTurns, error) {
	r, err := s.get(ref)
	if err != nil {
		return transcript.SubAgentTurns{}, err
	}
	r.mu.Lock()
	driver := r.rec.Driver
	r.mu.Unlock()
	if driver == string(cliruntime.KindCodex) {
		return transcript.SubAgentTurns{}, errf(http.StatusUnprocessableEntity, "unsupported_tool", "Codex child agents are reported in the run's activity; their transcripts are not offered") // R-AGT-4
	}
	_, src, err := s.transcriptSource(ref, SurfaceActivity)
	if err != nil {
		return transcript.SubAgentTurns{}, err
	}
	t, err := s.tcache.SubAgent(src, agent)
	return t, transcriptErr(err)
}

// Messages is GET /runs/{ref}/messages (R-MSG-1..17): the query is checked
// first (400), then the tool (422) and the taint (409).
func (s *Supervisor) Messages(ref string, query url.Values) (any, error) {
	q, err := transcript.ParseMessagesQuery(query)
	if err != nil {
		return nil, transcriptErr(err)
	}
	_, src, err := s.transcriptSource(ref, SurfaceMessages)
	if err != nil {
		return nil, err
	}
	if q.ID > 0 {
		m, err := s.tcache.Message(src, q.ID)
		return m, transcriptErr(err)
	}
	p, err := s.tcache.Messages(src, q)
	return p, transcriptErr(err)
}
