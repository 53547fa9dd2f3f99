package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/ring"
)

// The ring's persisted write throughput against raw bbolt batched
// sequential writes on the same disk, in the same run.
const (
	ringFrame     = 4 << 10  // a typical pipe read
	ringBatch     = 64       // raw baseline: puts per Update, like ring.DefaultFlushFrames
	ringTotal     = 64 << 20 // bytes per measured run
	ringRuns      = 3        // the median is reported
	ringLatencyN  = 300      // idle Append -> viewer samples
	ringTarget    = 0.50     // ring / raw, from the ring issue
	ringRunBudget = 10 * time.Minute
)

func ringOpenDB(t *testing.T, noSync bool) *bbolt.DB {
	t.Helper()
	p := filepath.Join(t.TempDir(), "agent.db")
	db, err := bbolt.Open(p, 0o600, &bbolt.Options{Timeout: time.Second, NoSync: noSync})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// ringThroughput appends ringTotal bytes of 4 KiB frames from one goroutine
// and waits until all are committed; default options, so the 8 MiB bound
// evicts in steady state.
func ringThroughput(t *testing.T, noSync bool) float64 {
	db := ringOpenDB(t, noSync)
	s, err := ring.Open(db, ring.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Ring("run_bench")
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, ringFrame)
	start := time.Now()
	for range ringTotal / ringFrame {
		if _, err := r.Append(1, ring.Stdout, data); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Flush(); err != nil {
		t.Fatal(err)
	}
	return ringMBps(ringTotal, time.Since(start))
}

// rawThroughput is the baseline: one Update per 64 sequential 4 KiB puts.
func rawThroughput(t *testing.T, noSync bool) float64 {
	db := ringOpenDB(t, noSync)
	data := make([]byte, ringFrame)
	var seq uint64
	start := time.Now()
	for range ringTotal / ringFrame / ringBatch {
		err := db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("raw"))
			if err != nil {
				return err
			}
			for range ringBatch {
				seq++
				k := make([]byte, 8)
				binary.BigEndian.PutUint64(k, seq)
				if err := b.Put(k, data); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return ringMBps(ringTotal, time.Since(start))
}

// ringIdleLatency: one small Append on a quiet ring until a live viewer has
// the committed frame, against one raw Update of one put.
func ringIdleLatency(t *testing.T, noSync bool) (p50, p99, raw50 time.Duration) {
	db := ringOpenDB(t, noSync)
	s, err := ring.Open(db, ring.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r, err := s.Ring("run_latency")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ringRunBudget)
	defer cancel()
	v := r.Subscribe(0, 0)
	var lat, rawLat []time.Duration
	for i := range ringLatencyN {
		start := time.Now()
		if _, err := r.Append(1, ring.PTY, []byte("$ ")); err != nil {
			t.Fatal(err)
		}
		if ev, err := v.Next(ctx); err != nil || ev.Kind != ring.EventFrame {
			t.Fatalf("Next: %v %v", ev.Kind, err)
		}
		lat = append(lat, time.Since(start))

		start = time.Now()
		err := db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("raw"))
			if err != nil {
				return err
			}
			k := make([]byte, 8)
			binary.BigEndian.PutUint64(k, uint64(i))
			return b.Put(k, []byte("$ "))
		})
		if err != nil {
			t.Fatal(err)
		}
		rawLat = append(rawLat, time.Since(start))
	}
	slices.Sort(lat)
	slices.Sort(rawLat)
	return lat[len(lat)/2], lat[len(lat)*99/100], rawLat[len(rawLat)/2]
}

// ringMBps: 10^6 bytes per second, like the tunnel report.
func ringMBps(n int, d time.Duration) float64 { return float64(n) / 1e6 / d.Seconds() }

func ringMedian(xs []float64) float64 {
	xs = slices.Clone(xs)
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// TestRingReport prints the ring's persisted write throughput as a ratio to
// raw bbolt batched writes (target >= 0.50x) and its idle delivery latency,
// with fsync (the agent's configuration) and with NoSync. It runs only with
// OLIVARES_BENCH=1 and never fails on timing.
func TestRingReport(t *testing.T) {
	if os.Getenv("OLIVARES_BENCH") != "1" {
		t.Skip("set OLIVARES_BENCH=1 to measure the ring")
	}
	for _, noSync := range []bool{false, true} {
		mode := "fsync"
		if noSync {
			mode = "NoSync"
		}
		var ringMB, rawMB []float64
		for range ringRuns { // interleaved, so drift hits both alike
			rawMB = append(rawMB, rawThroughput(t, noSync))
			ringMB = append(ringMB, ringThroughput(t, noSync))
		}
		rg, rw := ringMedian(ringMB), ringMedian(rawMB)
		verdict := "meets"
		if rg/rw < ringTarget {
			verdict = "BELOW"
		}
		p50, p99, raw50 := ringIdleLatency(t, noSync)
		msg := fmt.Sprintf("ring %s: %d MiB of %d KiB frames: ring %.1f MB/s, raw bbolt (%d puts/Update) %.1f MB/s, ratio %.2fx (%s target %.2fx); idle Append->viewer p50 %v p99 %v (raw 1-put Update p50 %v)",
			mode, ringTotal>>20, ringFrame>>10, rg, ringBatch, rw, rg/rw, verdict, ringTarget,
			p50.Round(time.Microsecond), p99.Round(time.Microsecond), raw50.Round(time.Microsecond))
		t.Log(msg)
		fmt.Println(msg)
	}
}
