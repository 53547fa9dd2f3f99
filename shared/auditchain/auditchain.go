// Package auditchain is the hash chain of the audit ledger: how an entry's
// hash is computed from its fields and its predecessor's hash, and how a
// reader checks a whole chain. The coordinator's store seals entries with it
// and `olivares audit verify` re-checks them on the client, so both sides
// agree on one encoding.
//
// auditchain never trusts a stored hash: Verify recomputes every one.
package auditchain

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// sealed is the canonical form that is hashed: every field of the entry but
// Hash, in this fixed order, with the time in UTC at nanosecond precision
// and Detail compacted. encoding/json writes struct fields in declaration
// order and escapes strings deterministically, so the bytes are the same on
// every machine.
type sealed struct {
	Seq    uint64               `json:"seq"`
	At     string               `json:"at"`
	Tenant string               `json:"tenant"`
	Actor  apitypes.AuditActor  `json:"actor"`
	Event  string               `json:"event"`
	Target apitypes.AuditTarget `json:"target"`
	Detail json.RawMessage      `json:"detail"`
	Prev   string               `json:"prev"`
}

// Canonical returns the bytes Hash covers.
func Canonical(e apitypes.AuditEntry) ([]byte, error) {
	detail := json.RawMessage("null")
	if len(e.Detail) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, e.Detail); err != nil {
			return nil, fmt.Errorf("auditchain: detail of entry %d is not JSON: %w", e.Seq, err)
		}
		detail = b.Bytes()
	}
	return json.Marshal(sealed{
		Seq: e.Seq, At: e.At.UTC().Format(time.RFC3339Nano), Tenant: e.Tenant, Actor: e.Actor,
		Event: e.Event, Target: e.Target, Detail: detail, Prev: e.Prev,
	})
}

// Hash returns the lowercase hex SHA-256 of Canonical(e).
func Hash(e apitypes.AuditEntry) (string, error) {
	c, err := Canonical(e)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

// Seal sets e.Seq, e.Prev and e.Hash for an entry that follows prev (the
// zero entry for the first of a tenant). Detail is compacted first, so the
// stored entry hashes the same as what was sealed.
func Seal(prev apitypes.AuditEntry, e apitypes.AuditEntry) (apitypes.AuditEntry, error) {
	e.Seq = prev.Seq + 1
	e.Prev = prev.Hash
	e.At = e.At.UTC()
	if len(e.Detail) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, e.Detail); err != nil {
			return e, fmt.Errorf("auditchain: detail is not JSON: %w", err)
		}
		e.Detail = b.Bytes()
	}
	h, err := Hash(e)
	if err != nil {
		return e, err
	}
	e.Hash = h
	return e, nil
}

// Break describes the first link of a chain that does not hold.
type Break struct {
	Seq    uint64 `json:"seq"`
	Reason string `json:"reason"`
}

// Verifier checks a tenant's chain entry by entry, in seq order, so that a
// client can verify a ledger it reads page by page.
type Verifier struct {
	prev  apitypes.AuditEntry
	n     int
	broke *Break
}

// Add checks the next entry. It returns the first break found so far (the
// same one on every later call).
func (v *Verifier) Add(e apitypes.AuditEntry) *Break {
	if v.broke != nil {
		return v.broke
	}
	fail := func(format string, args ...any) *Break {
		v.broke = &Break{Seq: e.Seq, Reason: fmt.Sprintf(format, args...)}
		return v.broke
	}
	switch {
	case e.Seq != v.prev.Seq+1:
		return fail("seq %d follows seq %d: an entry is missing or out of order", e.Seq, v.prev.Seq)
	case e.Prev != v.prev.Hash:
		return fail("prev %q is not the hash of entry %d (%q): an earlier entry was changed or removed", e.Prev, v.prev.Seq, v.prev.Hash)
	case v.n > 0 && e.Tenant != v.prev.Tenant:
		return fail("tenant %q in the chain of tenant %q", e.Tenant, v.prev.Tenant)
	}
	h, err := Hash(e)
	if err != nil {
		return fail("%v", err)
	}
	if h != e.Hash {
		return fail("hash %q does not match its content (%q): the entry was changed", e.Hash, h)
	}
	v.prev = e
	v.n++
	return nil
}

// Count is the number of entries checked and found sound.
func (v *Verifier) Count() int { return v.n }

// Head is the hash of the last sound entry: a person who writes it down can
// later tell a truncated ledger from a whole one.
func (v *Verifier) Head() string { return v.prev.Hash }
