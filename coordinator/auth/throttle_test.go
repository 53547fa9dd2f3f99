package auth

import (
	"testing"
	"time"
)

// R-SIGNIN-5: a source is throttled once it failed Limit times in a
// window, until the window ends; the window ends with one summary per
// tenant named, counting every attempt.
func TestFailuresThrottleAndSummary(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	f := &Failures{Limit: 3, Window: time.Minute}
	for i := range 3 {
		if _, blocked := f.Blocked("192.0.2.1", t0); blocked {
			t.Fatalf("blocked after %d failures, want after 3", i)
		}
		tenant := "acme"
		if i == 2 {
			tenant = ""
		}
		f.Fail("192.0.2.1", tenant, t0.Add(time.Duration(i)*time.Second))
	}
	after, blocked := f.Blocked("192.0.2.1", t0.Add(20*time.Second))
	if !blocked || after != 40*time.Second {
		t.Fatalf("after 3 failures: blocked %v for %v, want true for 40s", blocked, after)
	}
	if _, blocked := f.Blocked("192.0.2.2", t0.Add(20*time.Second)); blocked {
		t.Fatal("another source is blocked")
	}
	if got := f.Sweep(t0.Add(30 * time.Second)); len(got) != 0 {
		t.Fatalf("a window still open is summed up: %+v", got)
	}
	if _, blocked := f.Blocked("192.0.2.1", t0.Add(time.Minute)); blocked {
		t.Fatal("still blocked once the window ended")
	}
	got := f.Sweep(t0.Add(time.Minute))
	want := []Summary{
		{Source: "192.0.2.1", Tenant: "", Failures: 1, Start: t0, Window: time.Minute, Throttled: true},
		{Source: "192.0.2.1", Tenant: "acme", Failures: 2, Start: t0, Window: time.Minute, Throttled: true},
	}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("summaries: got %+v, want %+v", got, want)
	}
	if got := f.Sweep(t0.Add(2 * time.Minute)); len(got) != 0 {
		t.Fatalf("a window summed up twice: %+v", got)
	}
}

// A failure after a window ended opens a new one; the ended one is still
// summed up, once.
func TestFailuresNewWindowKeepsTheOld(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	f := &Failures{Limit: 5, Window: time.Minute}
	f.Fail("192.0.2.1", "acme", t0)
	f.Fail("192.0.2.1", "acme", t0.Add(90*time.Second))
	got := f.Sweep(t0.Add(100 * time.Second))
	if len(got) != 1 || got[0].Failures != 1 || !got[0].Start.Equal(t0) || got[0].Throttled {
		t.Fatalf("summaries: %+v, want the first window's one failure", got)
	}
	got = f.Sweep(t0.Add(151 * time.Second))
	if len(got) != 1 || !got[0].Start.Equal(t0.Add(90*time.Second)) {
		t.Fatalf("summaries: %+v, want the second window's", got)
	}
}

func TestSource(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:5555":             "192.0.2.1",
		"[::ffff:192.0.2.1]:1":       "192.0.2.1",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443": "2001:db8:1:2::/64",
		"[::1]:80":                   "::/64",
		"not an address":             "not an address",
	} {
		if got := Source(in); got != want {
			t.Errorf("Source(%q) = %q, want %q", in, got, want)
		}
	}
}
