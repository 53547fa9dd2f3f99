package ring

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the output path's series (R-OBS-8), observed once per
// committed transaction, never per frame. No run ref is a label.
type metrics struct {
	commit  prometheus.Histogram
	fsync   prometheus.Histogram
	frames  prometheus.Counter
	bytes   prometheus.Counter
	evicted prometheus.Counter
}

// commitBuckets: from a tmpfs commit (~50 µs) to a stalled disk (5 s).
var commitBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &metrics{
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "olivares_agent_ring_commit_duration_seconds",
			Help:    "Output ring transactions, from the start of the transaction to its durable commit.",
			Buckets: commitBuckets,
		}),
		fsync: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "olivares_agent_ring_fsync_duration_seconds",
			Help:    "The disk part of each ring commit: bbolt's page and meta writes with their fdatasyncs.",
			Buckets: commitBuckets,
		}),
		frames: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "olivares_agent_ring_frames_appended_total",
			Help: "Output frames committed to the rings.",
		}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "olivares_agent_ring_bytes_appended_total",
			Help: "Output bytes (frame data) committed to the rings.",
		}),
		evicted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "olivares_agent_ring_frames_evicted_total",
			Help: "Frames evicted from the rings beyond their frame or byte caps.",
		}),
	}
	reg.MustRegister(m.commit, m.fsync, m.frames, m.bytes, m.evicted)
	return m
}

func (m *metrics) observe(bs []*batch, commit, write time.Duration) {
	m.commit.Observe(commit.Seconds())
	m.fsync.Observe(write.Seconds())
	frames, bytes, evicted := 0, 0, 0
	for _, b := range bs {
		if !b.skip {
			frames, bytes, evicted = frames+b.frames, bytes+b.bytes, evicted+b.evicted
		}
	}
	m.frames.Add(float64(frames))
	m.bytes.Add(float64(bytes))
	m.evicted.Add(float64(evicted))
}
