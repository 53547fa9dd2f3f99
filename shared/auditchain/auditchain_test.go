package auditchain

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

func chain(t *testing.T, n int) []apitypes.AuditEntry {
	t.Helper()
	var out []apitypes.AuditEntry
	prev := apitypes.AuditEntry{}
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.FixedZone("x", 3600))
	for i := range n {
		e, err := Seal(prev, apitypes.AuditEntry{
			At: at.Add(time.Duration(i) * time.Second), Tenant: "t1",
			Actor: apitypes.AuditActor{CredentialID: "cred_1", Kind: apitypes.ActorHuman},
			Event: apitypes.AuditRunRenamed, Target: apitypes.AuditTarget{RunRef: "run_1"},
			Detail: json.RawMessage(`{ "a" : 1 }`),
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, e)
		prev = e
	}
	return out
}

func verify(es []apitypes.AuditEntry) (*Break, int) {
	var v Verifier
	for _, e := range es {
		if b := v.Add(e); b != nil {
			return b, v.Count()
		}
	}
	return nil, v.Count()
}

// The chain holds as sealed, survives a JSON round trip, and every kind of
// tampering names the first broken link.
func TestVerify(t *testing.T) {
	es := chain(t, 5)
	if b, n := verify(es); b != nil || n != 5 {
		t.Fatalf("sound chain: break %+v after %d", b, n)
	}
	raw, _ := json.Marshal(es)
	var back []apitypes.AuditEntry
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if b, _ := verify(back); b != nil {
		t.Fatalf("after a JSON round trip: %+v", b)
	}
	if string(es[0].Detail) != `{"a":1}` || es[0].At.Location() != time.UTC {
		t.Fatalf("Seal did not normalise detail or time: %s %v", es[0].Detail, es[0].At)
	}

	cases := []struct {
		name   string
		tamper func([]apitypes.AuditEntry) []apitypes.AuditEntry
		seq    uint64
	}{
		{"detail edited", func(es []apitypes.AuditEntry) []apitypes.AuditEntry {
			es[2].Detail = json.RawMessage(`{"a":2}`)
			return es
		}, 3},
		{"event edited", func(es []apitypes.AuditEntry) []apitypes.AuditEntry { es[1].Event = "x"; return es }, 2},
		{"actor edited", func(es []apitypes.AuditEntry) []apitypes.AuditEntry { es[0].Actor.CredentialID = "cred_2"; return es }, 1},
		{"time edited", func(es []apitypes.AuditEntry) []apitypes.AuditEntry {
			es[3].At = es[3].At.Add(time.Nanosecond)
			return es
		}, 4},
		{"entry removed", func(es []apitypes.AuditEntry) []apitypes.AuditEntry { return append(es[:2:2], es[3:]...) }, 4},
		{"rehashed but not relinked", func(es []apitypes.AuditEntry) []apitypes.AuditEntry {
			es[1].Detail = json.RawMessage(`{"a":9}`)
			es[1].Hash, _ = Hash(es[1])
			return es
		}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			es := chain(t, 5)
			b, _ := verify(tc.tamper(es))
			if b == nil || b.Seq != tc.seq {
				t.Fatalf("got break %+v, want one at seq %d", b, tc.seq)
			}
		})
	}
}
