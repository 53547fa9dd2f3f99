package bench

import "testing"

// TestPhysicalBaselines checks that the baselines of TestRunsReport
// measure something (a small run; the figures are TestRunsReport's).
func TestPhysicalBaselines(t *testing.T) {
	dir := t.TempDir()
	if v, err := durableAppend(dir, 4<<20); err != nil || v <= 0 {
		t.Fatalf("durable append: %v %v", v, err)
	}
	if v, cpu, err := minimalPipeline(t, dir, 4<<20); err != nil || v <= 0 || cpu <= 0 {
		t.Fatalf("minimal pipeline: %v %v %v", v, cpu, err)
	}
	if cpu, err := relayCopy(t, 4<<20); err != nil || cpu <= 0 {
		t.Fatalf("relay: %v %v", cpu, err)
	}
	if ds, err := fsyncLatency(dir, 10); err != nil || len(ds) != 10 {
		t.Fatalf("fsync latency: %v %v", ds, err)
	}
}
