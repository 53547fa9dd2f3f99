// Package transfer copies every record of one coordinator store into
// another (the bbolt file of a single-node deployment into PostgreSQL, for
// olivares-coordinator migrate) and verifies the copy: every kind has the
// same count on both sides, and each tenant's audit chain verifies on the
// target and ends at the source's head.
//
// transfer only reads the source, and it never rewrites an audit chain on
// the target: a target whose chain differs from the source's is refused.
package transfer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/auditchain"
)

// batchSize is how many records one Import (one transaction) takes.
const batchSize = 1000

// progressEvery is how often, in records, a kind's progress is printed.
const progressEvery = 10_000

// Target is the store records are copied into.
type Target interface {
	store.Importer
	ListAudit(ctx context.Context, q store.AuditQuery) ([]apitypes.AuditEntry, string, error)
}

// ErrMismatch: the verification after the copy found a difference.
var ErrMismatch = errors.New("transfer: the copy does not match the source")

// Kind is what happened to one record kind.
type Kind struct {
	Kind    string
	Source  int // records in the source
	Written int // records the target changed (0 on a repeated copy)
	Target  int // records in the target after the copy
}

// Chain is one tenant's verified audit chain on the target.
type Chain struct {
	Tenant  string
	Entries int
	Head    string
}

// Report is the outcome of a Copy.
type Report struct {
	Kinds  []Kind
	Chains []Chain
}

// Written is the number of records the copy changed.
func (r Report) Written() int {
	n := 0
	for _, k := range r.Kinds {
		n += k.Written
	}
	return n
}

// Copy copies every record of src into dst, kind by kind in
// store.RecordKinds order and batchSize records per transaction, printing
// its progress to out, then verifies the copy. Repeating it with an
// unchanged source changes nothing (Report.Written is 0).
func Copy(ctx context.Context, src store.Exporter, dst Target, out io.Writer) (Report, error) {
	var rep Report
	total, err := src.Counts(ctx)
	if err != nil {
		return rep, fmt.Errorf("transfer: count the source: %w", err)
	}
	// The source's chains, as read: count and last entry per tenant.
	type head struct {
		n    int
		last apitypes.AuditEntry
	}
	heads := map[string]*head{}
	for _, kind := range store.RecordKinds {
		k := Kind{Kind: kind}
		batch := make([]store.Record, 0, batchSize)
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			n, err := dst.Import(ctx, batch)
			if err != nil {
				return fmt.Errorf("transfer: %s: %w", kind, err)
			}
			k.Written += n
			batch = batch[:0]
			return nil
		}
		err := src.Export(ctx, kind, func(r store.Record) error {
			k.Source++
			if e, ok := r.Value.(apitypes.AuditEntry); ok {
				h := heads[e.Tenant]
				if h == nil {
					h = &head{}
					heads[e.Tenant] = h
				}
				h.n++
				h.last = e
			}
			batch = append(batch, r)
			if len(batch) == batchSize {
				if err := flush(); err != nil {
					return err
				}
			}
			if k.Source%progressEvery == 0 {
				fmt.Fprintf(out, "migrate: %s: %d of %d\n", kind, k.Source, total[kind])
			}
			return nil
		})
		if err == nil {
			err = flush()
		}
		if err != nil {
			return rep, err
		}
		fmt.Fprintf(out, "migrate: %s: %d of %d copied (%d written)\n", kind, k.Source, total[kind], k.Written)
		rep.Kinds = append(rep.Kinds, k)
	}

	// Verify: counts per kind, then each tenant's chain.
	got, err := dst.Counts(ctx)
	if err != nil {
		return rep, fmt.Errorf("transfer: count the target: %w", err)
	}
	var bad []string
	for i, k := range rep.Kinds {
		rep.Kinds[i].Target = got[k.Kind]
		if got[k.Kind] != k.Source {
			bad = append(bad, fmt.Sprintf("%s: %d in the source, %d in the target", k.Kind, k.Source, got[k.Kind]))
		}
	}
	if len(bad) > 0 {
		return rep, fmt.Errorf("%w: %v (was the target written to by a coordinator? migrate into an empty database)", ErrMismatch, bad)
	}
	fmt.Fprintf(out, "migrate: verified: the target holds as many records of each kind as the source\n")
	tenants := make([]string, 0, len(heads))
	for t := range heads {
		tenants = append(tenants, t)
	}
	slices.Sort(tenants)
	for _, tenant := range tenants {
		want := heads[tenant]
		c, err := verifyChain(ctx, dst, tenant)
		if err != nil {
			return rep, err
		}
		if c.Entries != want.n || c.Head != want.last.Hash {
			return rep, fmt.Errorf("%w: tenant %q's audit chain in the target has %d entries ending at %s, the source's %d ending at %s",
				ErrMismatch, tenant, c.Entries, c.Head, want.n, want.last.Hash)
		}
		fmt.Fprintf(out, "migrate: verified: audit chain of tenant %q, %d entries, head %s\n", tenant, c.Entries, c.Head)
		rep.Chains = append(rep.Chains, c)
	}
	return rep, nil
}

// verifyChain reads tenant's whole chain from s and checks every link.
func verifyChain(ctx context.Context, s Target, tenant string) (Chain, error) {
	var v auditchain.Verifier
	q := store.AuditQuery{Tenant: tenant, Limit: 1000}
	for {
		page, next, err := s.ListAudit(ctx, q)
		if err != nil {
			return Chain{}, fmt.Errorf("transfer: read the audit chain of tenant %q: %w", tenant, err)
		}
		for _, e := range page {
			if b := v.Add(e); b != nil {
				return Chain{}, fmt.Errorf("%w: tenant %q's audit chain in the target breaks at seq %d: %s", ErrMismatch, tenant, b.Seq, b.Reason)
			}
		}
		if next == "" {
			return Chain{Tenant: tenant, Entries: v.Count(), Head: v.Head()}, nil
		}
		q.Cursor = next
	}
}
