package claudesup

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/proto"
)

// BenchmarkCatalog lists a home of 200 conversations of ≈40 KB each as the
// catalog does after the first call (each summary read once per size and
// mtime) and, in the same run, with every summary read again (the first
// call, or a home whose files all changed). x_cold is cold / warm.
func BenchmarkCatalog(b *testing.B) {
	e := newEnv(b, true)
	pad := `{"type":"attachment","attachment":{"type":"x","content":"` + strings.Repeat("x", 40<<10) + `"}}`
	t0 := time.Now().Add(-time.Hour)
	for i := range 200 {
		cwd := fmt.Sprintf("/src/p%d", i%10)
		conversation(b, e.user, cwd, sid(i+1), t0.Add(time.Duration(i)*time.Second), prompt(cwd, fmt.Sprint("task ", i)), pad,
			`{"type":"custom-title","customTitle":"title `+fmt.Sprint(i)+`"}`)
	}
	list := func() {
		if h, err := e.s.Sessions(proto.ClaudeSessionsList{Limit: 100}); err != nil || len(h.Rows) != 100 {
			b.Fatal(err)
		}
	}
	list()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		list()
	}
	warm := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for range b.N {
		e.s.sums = map[string]summary{}
		list()
	}
	b.ReportMetric(float64(time.Since(start))/float64(warm), "x_cold")
}
