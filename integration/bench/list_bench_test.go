package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/coordinator/store/bolt"
	"github.com/olivares-dev/olivares/coordinator/store/postgres"
	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Sizes of TestListReport (issue 5's benchmark).
const (
	listSmall   = 1_000
	listLarge   = 100_000
	listPins    = 20
	listPage    = 50
	listSamples = 300
	// listTarget: p50 at 100k runs / p50 at 1k runs.
	listTarget = 3.0
)

// TestListReport measures GET /runs (a page of 50, default offset mode, with
// 20 of the caller's pins outside the page, R-LIST-3) through the real API
// and bbolt store, with 1,000 and with 100,000 runs in the store, in the
// same run, and prints both p50s and their ratio against the target. It
// runs only with OLIVARES_BENCH=1 and never fails on a figure.
func TestListReport(t *testing.T) {
	if os.Getenv("OLIVARES_BENCH") != "1" {
		t.Skip("set OLIVARES_BENCH=1 (or run scripts/bench) to measure GET /runs")
	}
	small := listP50(t, listSmall)
	large := listP50(t, listLarge)
	ratio := float64(large) / float64(small)
	verdict := "met"
	if ratio > listTarget {
		verdict = "missed"
	}
	t.Logf("GET /runs?limit=%d with %d out-of-page pins: p50 %v at %d runs, %v at %d runs: %.2fx (target <= %.1fx): %s",
		listPage, listPins, small, listSmall, large, listLarge, ratio, listTarget, verdict)
}

// TestListStoresReport measures the same GET /runs page at 100,000 runs on
// a coordinator whose store is PostgreSQL (a throwaway cluster on loopback,
// fsync off like the bbolt load) and on one whose store is bbolt, in the
// same run, and prints both p50s and their ratio. It runs only with
// OLIVARES_BENCH=1 and never fails on a figure.
func TestListStoresReport(t *testing.T) {
	if os.Getenv("OLIVARES_BENCH") != "1" {
		t.Skip("set OLIVARES_BENCH=1 (or run scripts/bench) to measure GET /runs on PostgreSQL")
	}
	dsn := pgtest.NewDatabase(t)
	bbolt := listP50(t, listLarge)
	pg := listP50(t, listLarge, integration.Options{Postgres: dsn})
	t.Logf("GET /runs?limit=%d with %d out-of-page pins at %d runs: p50 %v on bbolt, %v on PostgreSQL: PostgreSQL/bbolt %.2fx",
		listPage, listPins, listLarge, bbolt, pg, float64(pg)/float64(bbolt))
}

// listP50 fills a fresh coordinator's store with n runs, pins the 20 oldest
// (outside the first page), and returns the p50 of GET /runs?limit=50.
func listP50(t *testing.T, n int, o ...integration.Options) time.Duration {
	var opts integration.Options
	if len(o) > 0 {
		opts = o[0]
	}
	opts.Unchecked = true // the contract check would be timed too
	env := integration.NewEnv(t, opts)
	ctx := context.Background()
	base := time.Now().Add(-time.Duration(n) * time.Second)
	refs := make([]string, n)
	runs := make([]apitypes.Run, n)
	for i := range n {
		refs[i] = fmt.Sprintf("run_%016x", i)
		runs[i] = apitypes.Run{RunRef: refs[i], Tenant: integration.Tenant, NodeID: "node-bench", State: apitypes.StateStopped,
			Driver: "codex", Generation: 1, Isolation: apitypes.IsolationNative, ProviderProfileRef: "prof_bench",
			CreatedAt: base.Add(time.Duration(i) * time.Second), Rev: 1}
	}
	switch st := env.Coord.Store.(type) {
	case *bolt.Store:
		st.SetNoSync(true)
		for _, r := range runs {
			if _, err := st.PutRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		st.SetNoSync(false)
	case *postgres.Store:
		// The bulk path of olivares-coordinator migrate: the same rows
		// PutRun writes, a thousand per transaction.
		for i := 0; i < n; i += 1000 {
			var batch []store.Record
			for _, r := range runs[i:min(i+1000, n)] {
				batch = append(batch, store.Record{Kind: store.RecRuns, Value: r})
			}
			if _, err := st.Import(ctx, batch); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := st.Pool().Exec(ctx, "ANALYZE"); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("the coordinator's store is %T", env.Coord.Store)
	}
	id, tok := env.PrincipalNamed(integration.Tenant, "bench", store.RoleViewer, store.KindHuman)
	for i, ref := range refs[:listPins] {
		at := base.Add(time.Duration(i) * time.Millisecond)
		if _, err := env.Coord.Store.UpdateMarks(ctx, store.MarkKey{Tenant: integration.Tenant, Owner: "prn:" + id, RunRef: ref}, func(m *store.Marks) { m.PinnedAt = &at }); err != nil {
			t.Fatal(err)
		}
	}
	c := env.Client(tok)
	var page apitypes.RunList
	c.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs?limit=50", nil, &page)
	if len(page.Items) != listPage+listPins {
		t.Fatalf("%d runs: the page has %d rows, want %d + %d pins", n, len(page.Items), listPage, listPins)
	}
	times := make([]time.Duration, listSamples)
	for i := range times {
		start := time.Now()
		c.Must(http.StatusOK, http.MethodGet, "/v1/m/sessions/runs?limit=50", nil, nil)
		times[i] = time.Since(start)
	}
	slices.Sort(times)
	return times[len(times)/2]
}
