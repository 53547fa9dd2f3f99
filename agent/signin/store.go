package signin

import (
	"encoding/json"
	"slices"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Attempts outlive the agent (R-ACCT-10): each is kept in the node's
// database as it changes, and an ended one waits there, unreported, until
// the coordinator took it with a run-index push. An attempt that was live
// when the agent stopped cannot go on (its process is gone): the next
// start ends it failed, saying so, and reports that end.

// KeepFor is how long an ended attempt stays readable once reported (it
// is dropped at the agent's next start after that).
const KeepFor = 24 * time.Hour

// The messages of an attempt the agent's stop (Close) or its crash and
// restart cut.
const (
	MsgAgentStopped   = "the agent stopped during the sign-in; start it again once the agent is back"
	MsgAgentRestarted = "the agent restarted during the sign-in; start it again"
)

var bucketSignins = []byte("signins")

// record is an attempt as the database holds it.
type record struct {
	Tenant   string                 `json:"tenant"`
	Reported bool                   `json:"reported,omitempty"`
	Attempt  apitypes.SigninAttempt `json:"attempt"`
}

// load reads the kept attempts: the live ones end failed, and the ones
// reported and ended more than KeepFor ago are dropped.
func (m *Manager) load() error {
	if m.o.DB == nil {
		return nil
	}
	now := m.o.Now().UTC()
	return m.o.DB.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketSignins)
		if err != nil {
			return err
		}
		var drop [][]byte
		err = b.ForEach(func(k, v []byte) error {
			var r record
			// An unreported end stays until the coordinator took it.
			if json.Unmarshal(v, &r) != nil || (r.Reported && now.Sub(r.Attempt.UpdatedAt) > KeepFor) {
				drop = append(drop, k)
				return nil
			}
			if !r.Attempt.Done() {
				r.Attempt.State, r.Attempt.Message, r.Attempt.UpdatedAt = apitypes.SigninFailed, MsgAgentRestarted, now
				r.Attempt.URL, r.Attempt.UserCode = "", ""
				r.Reported = false
				if err := put(b, r); err != nil {
					return err
				}
			}
			m.byID[r.Attempt.ID] = &attempt{m: m, tenant: r.Tenant, view: r.Attempt, cancel: func() {}}
			if r.Reported {
				m.reported[r.Attempt.ID] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range drop {
			if err := b.Delete(k); err != nil {
				return err
			}
		}
		return nil
	})
}

func put(b *bbolt.Bucket, r record) error {
	v, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return b.Put([]byte(r.Attempt.ID), v)
}

// save writes a's current view; an ended attempt wakes the reporter. The
// view is read under saveMu, so that of two saves racing the later write
// holds the later view.
func (a *attempt) save() {
	m := a.m
	m.saveMu.Lock()
	v := a.snapshot()
	m.mu.Lock()
	r := record{Tenant: a.tenant, Reported: m.reported[v.ID], Attempt: v}
	m.mu.Unlock()
	if m.o.DB != nil {
		err := m.o.DB.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists(bucketSignins)
			if err != nil {
				return err
			}
			return put(b, r)
		})
		if err != nil && m.o.OnError != nil {
			m.o.OnError(err)
		}
	}
	m.saveMu.Unlock()
	if v.Done() && !r.Reported && m.o.OnEnd != nil {
		m.o.OnEnd()
	}
}

// Ended is every ended attempt the coordinator has not taken yet
// (R-ACCT-10), oldest first.
func (m *Manager) Ended() []apitypes.SigninAttempt {
	m.mu.Lock()
	as := make([]*attempt, 0, len(m.byID))
	for id, a := range m.byID {
		if !m.reported[id] {
			as = append(as, a)
		}
	}
	m.mu.Unlock()
	var out []apitypes.SigninAttempt
	for _, a := range as {
		if v := a.snapshot(); v.Done() {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, func(a, b apitypes.SigninAttempt) int { return a.UpdatedAt.Compare(b.UpdatedAt) })
	return out
}

// Reported marks the attempts ids the coordinator took; they are not sent
// again.
func (m *Manager) Reported(ids []string) {
	for _, id := range ids {
		m.mu.Lock()
		a := m.byID[id]
		if a != nil {
			m.reported[id] = true
		}
		m.mu.Unlock()
		if a != nil {
			a.save()
		}
	}
}
