package accesslog

import "github.com/prometheus/client_golang/prometheus"

// metrics are the request metrics. Labels are bounded: the method is one of
// seven or OTHER, the route is a template of the route table (or
// Unmatched), the status three digits (R-OBS-7).
type metrics struct {
	duration    *prometheus.HistogramVec
	streams     *prometheus.CounterVec
	streamsOpen *prometheus.GaugeVec
}

// requestBuckets: from a cached read (~1 ms) to a call that waits on a slow
// node (30 s).
var requestBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "olivares_api_request_duration_seconds",
			Help:    "HTTP requests of the API and console by method, route template and status, from the first byte read to the handler's return. Event streams (SSE) are counted in olivares_api_streams_total instead.",
			Buckets: requestBuckets,
		}, []string{"method", "route", "status"}),
		streams: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "olivares_api_streams_total",
			Help: "Event streams (SSE: attach, events) ended, by route template and status.",
		}, []string{"route", "status"}),
		streamsOpen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "olivares_api_streams_open",
			Help: "Event streams (SSE) open now, by route template.",
		}, []string{"route"}),
	}
	reg.MustRegister(m.duration, m.streams, m.streamsOpen)
	return m
}
