package api

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/olivares-dev/olivares/coordinator/store"
	"github.com/olivares-dev/olivares/shared/apierr"
	"github.com/olivares-dev/olivares/shared/wire"
)

// metrics are the API's own series (R-OBS-7); the request histograms are
// accesslog's. Labels are bounded: a launch's result is "started" or an
// error code (codes are the API's and the agent's constants, and a code
// seen for the first time once maxCodes are known counts as "other"), a
// run's state and tool come from the index's fixed sets.
type metrics struct {
	attachViewers prometheus.Gauge
	slowDrops     prometheus.Counter
	launches      *prometheus.CounterVec
	codes         boundedLabel
	audits        *prometheus.CounterVec
	events        boundedLabel
}

func newMetrics(st store.Store, reg prometheus.Registerer) *metrics {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &metrics{
		attachViewers: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "olivares_attach_viewers",
			Help: "Attach streams relayed now.",
		}),
		slowDrops: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "olivares_attach_slow_viewer_drops_total",
			Help: "Attach viewers dropped because they read too slowly (their stream ends without end; they reconnect).",
		}),
		launches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "olivares_launches_total",
			Help: `Run launches (POST /runs) by result: "started", or the error code of the refusal.`,
		}, []string{"result"}),
		codes: boundedLabel{max: maxCodes},
		audits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "olivares_audit_appends_total",
			Help: "Audit entries appended (committed) by this coordinator, by event.",
		}, []string{"event"}),
		events: boundedLabel{max: maxCodes},
	}
	m.launches.WithLabelValues(launchStarted)
	reg.MustRegister(m.attachViewers, m.slowDrops, m.launches, m.audits, &runsCollector{st: st})
	if ao, ok := st.(store.AuditObserver); ok {
		ao.ObserveAudit(func(event string) { m.audits.WithLabelValues(m.events.of(event)).Inc() })
	}
	return m
}

const launchStarted = "started"

// launched counts a launch by its handler's result.
func (m *metrics) launched(err error) {
	if err == nil {
		m.launches.WithLabelValues(launchStarted).Inc()
		return
	}
	var we *wire.Error
	code := apierr.As(err).Code
	if errors.As(err, &we) {
		code = we.Code
	}
	m.launches.WithLabelValues(m.codes.of(code)).Inc()
}

// maxCodes bounds the distinct codes one label may take.
const maxCodes = 64

// boundedLabel passes through at most max distinct values; later ones are
// "other". An agent's error code is its own text, so it is bounded here.
type boundedLabel struct {
	mu   sync.Mutex
	max  int
	seen map[string]bool
}

func (b *boundedLabel) of(v string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	if b.seen[v] {
		return v
	}
	if len(b.seen) >= b.max || !codeLike(v) {
		return "other"
	}
	b.seen[v] = true
	return v
}

// codeLike: 1-64 lower-case letters, digits, '_' and '.', as our codes and
// audit events are.
func codeLike(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// runsCollector counts the index's runs by state and tool at scrape time,
// through the store's RunCounter, at most once per runsEvery (a count
// reads every row).
type runsCollector struct {
	st store.Store

	mu     sync.Mutex
	at     time.Time
	counts []store.RunCount
}

// runsEvery is how long a count of the index is reused.
const runsEvery = 15 * time.Second

var descRuns = prometheus.NewDesc("olivares_runs", "Runs in the index by state and tool (driver), across tenants.", []string{"state", "tool"}, nil)

func (c *runsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descRuns }

func (c *runsCollector) Collect(ch chan<- prometheus.Metric) {
	rc, ok := c.st.(store.RunCounter)
	if !ok {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil || time.Since(c.at) >= runsEvery {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		counts, err := rc.CountRuns(ctx)
		cancel()
		if err != nil {
			ch <- prometheus.NewInvalidMetric(descRuns, err)
			return
		}
		c.counts, c.at = counts, time.Now()
	}
	for _, n := range c.counts {
		ch <- prometheus.MustNewConstMetric(descRuns, prometheus.GaugeValue, float64(n.Runs), n.State, n.Tool)
	}
}
