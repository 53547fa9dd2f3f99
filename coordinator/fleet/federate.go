package fleet

import (
	"context"
	"sort"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/protobuf/proto"

	wproto "github.com/olivares-dev/olivares/shared/proto"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Federation of the agents' metrics (R-OBS-8): at each scrape of the
// coordinator's /metrics, every node with a live tunnel to this
// coordinator is asked for its olivares_agent_* families over the tunnel,
// and they are served with a node label. One scrape target covers the
// fleet, nodes need no inbound port (they dial out), and with replicas
// each coordinator serves the nodes whose tunnels it holds, so every node
// appears once across the replicas' scrapes.
const (
	// federateTimeout bounds the whole fan-out of one scrape, under
	// Prometheus's default scrape timeout (10 s).
	federateTimeout = 5 * time.Second
	// federateParallel bounds the calls in flight.
	federateParallel = 16
	// nodeLabel is the label each federated series gets.
	nodeLabel = "node"
)

// NodeMetrics is a prometheus.Gatherer of the connected nodes' metrics.
func (f *Fleet) NodeMetrics() NodeGatherer { return NodeGatherer{f} }

// NodeGatherer gathers the connected nodes' metrics (R-OBS-8).
type NodeGatherer struct{ f *Fleet }

const upName = "olivares_node_metrics_up"

// Gather implements prometheus.Gatherer. A node that does not answer in
// time (or answers what does not parse) has olivares_node_metrics_up 0 and
// no other series this scrape; it never fails the scrape.
func (g NodeGatherer) Gather() ([]*dto.MetricFamily, error) {
	ids := g.f.Connected()
	ctx, cancel := context.WithTimeout(context.Background(), federateTimeout)
	defer cancel()
	type result struct {
		id  string
		mfs map[string]*dto.MetricFamily
	}
	results := make([]result, len(ids))
	sem := make(chan struct{}, federateParallel)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = result{id: id, mfs: g.node(ctx, id)}
		}()
	}
	wg.Wait()
	merged := map[string]*dto.MetricFamily{}
	up := &dto.MetricFamily{Name: proto.String(upName), Type: dto.MetricType_GAUGE.Enum(),
		Help: proto.String("1 when the node answered this scrape's request for its metrics, else 0.")}
	for _, r := range results {
		v := 0.0
		if r.mfs != nil {
			v = 1
		}
		up.Metric = append(up.Metric, &dto.Metric{Label: []*dto.LabelPair{nodePair(r.id)}, Gauge: &dto.Gauge{Value: proto.Float64(v)}})
		for name, mf := range r.mfs {
			if !strings.HasPrefix(name, "olivares_agent_") {
				continue // a node speaks for itself only
			}
			for _, m := range mf.Metric {
				m.Label = append(m.Label, nodePair(r.id))
			}
			if have, ok := merged[name]; ok {
				if have.GetType() != mf.GetType() {
					continue // an agent of another version; keep the first
				}
				have.Metric = append(have.Metric, mf.Metric...)
				continue
			}
			merged[name] = mf
		}
	}
	var out []*dto.MetricFamily
	if len(up.Metric) > 0 {
		out = append(out, up)
	}
	for _, mf := range merged {
		out = append(out, mf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].GetName() < out[j].GetName() })
	return out, nil
}

func nodePair(id string) *dto.LabelPair {
	return &dto.LabelPair{Name: proto.String(nodeLabel), Value: proto.String(id)}
}

// node asks one node for its metrics; nil when it cannot.
func (g NodeGatherer) node(ctx context.Context, id string) map[string]*dto.MetricFamily {
	var reply wproto.MetricsReply
	if err := g.f.Call(ctx, id, wire.Header{Op: wproto.OpMetrics}, nil, &reply); err != nil {
		return nil
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(reply.Text))
	if err != nil {
		g.f.log.Warn("node metrics do not parse", "node_id", id, "err", err.Error())
		return nil
	}
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == nodeLabel {
					return nil // the label is ours to set
				}
			}
		}
	}
	return mfs
}
