package ring

import (
	"fmt"
	"testing"
)

// BenchmarkRingAppend measures persisted write throughput: Append from one
// reader goroutine until every frame is committed (Flush), default options,
// so the 8 MiB bound evicts in steady state.
func BenchmarkRingAppend(b *testing.B) {
	for _, size := range []int{128, 4 << 10, 64 << 10} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			e := newEnv(b, Options{})
			r := e.ring("run_bench")
			data := make([]byte, size)
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := r.Append(1, Stdout, data); err != nil {
					b.Fatal(err)
				}
			}
			if err := r.Flush(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

// BenchmarkRingDeliveryIdle measures the latency a quiet run pays: one
// Append until a live viewer has the committed frame (one commit).
func BenchmarkRingDeliveryIdle(b *testing.B) {
	e := newEnv(b, Options{})
	r := e.ring("run_bench")
	v := r.Subscribe(0, 0)
	ctx := ctxT(b)
	data := []byte("$ ")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := r.Append(1, PTY, data); err != nil {
			b.Fatal(err)
		}
		if ev, err := v.Next(ctx); err != nil || ev.Kind != EventFrame {
			b.Fatalf("Next: %v %v", ev.Kind, err)
		}
	}
}
