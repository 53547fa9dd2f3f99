package supervisor

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Exit causes, the label of olivares_agent_child_exits_total.
const (
	causeExitedZero   = "exit_zero"
	causeExitedError  = "exit_nonzero"
	causeSignaled     = "signal"
	causeLost         = "lost"
	causeConversation = "conversation_gone"
)

// exitCause names how a child ended (a bounded label: R-OBS-8).
func exitCause(code *int, signal string, unavailable bool) string {
	switch {
	case unavailable:
		return causeConversation
	case code == nil && signal == "":
		return causeLost
	case signal != "":
		return causeSignaled
	case *code == 0:
		return causeExitedZero
	}
	return causeExitedError
}

var descInputQueue = prometheus.NewDesc("olivares_agent_input_queue_bytes",
	"Input bytes queued for the children's stdin and not written yet, all live runs together.", nil, nil)

// registerMetrics makes the exit counter and the input queue gauge.
func (s *Supervisor) registerMetrics(reg prometheus.Registerer) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	s.exits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "olivares_agent_child_exits_total",
		Help: "Exits of the runs' children by cause: exit_zero, exit_nonzero, signal, lost (no status observed), conversation_gone.",
	}, []string{"cause"})
	for _, c := range []string{causeExitedZero, causeExitedError, causeSignaled, causeLost, causeConversation} {
		s.exits.WithLabelValues(c)
	}
	reg.MustRegister(s.exits, inputQueue{s})
}

// inputQueue reads every live generation's queue at scrape time.
type inputQueue struct{ s *Supervisor }

func (q inputQueue) Describe(ch chan<- *prometheus.Desc) { ch <- descInputQueue }

func (q inputQueue) Collect(ch chan<- prometheus.Metric) {
	// Each run's mu alone, then its generation's.
	var gens []*generation
	for _, r := range q.s.Runs.all() {
		r.mu.Lock()
		if r.gen != nil {
			gens = append(gens, r.gen)
		}
		r.mu.Unlock()
	}
	total := 0
	for _, g := range gens {
		g.mu.Lock()
		total += g.queued
		g.mu.Unlock()
	}
	ch <- prometheus.MustNewConstMetric(descInputQueue, prometheus.GaugeValue, float64(total))
}
