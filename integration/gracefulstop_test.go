package integration

import (
	"testing"
	"time"

	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/shared/tunnel"
)

// R-OPS-4, issue 32 finding 2: a graceful stop of the coordinator tells its agents
// goodbye, with either store: they leave "connected" at once, not after
// three missed heartbeats (18 s with PostgreSQL, reported). The heartbeat
// here is long (10 s) so that only the goodbye can pass within the
// deadline; the figure is logged, never asserted.
func TestAgentsNoticeAGracefulStop(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"bbolt", "postgres"} {
		for _, tr := range []string{tunnel.TransportQUIC, tunnel.TransportYamux} {
			t.Run(store+"/"+tr, func(t *testing.T) {
				t.Parallel()
				o := Options{Heartbeat: 10 * time.Second}
				if store == "postgres" {
					o.Postgres = pgtest.Shared(t).NewDatabase(t)
				}
				env := NewEnv(t, o)
				a := env.StartAgent(AgentOptions{Transport: tr})
				a.AwaitConnected(10 * time.Second)
				start := time.Now()
				env.mu.Lock()
				c, cancel := env.Coord, env.cancel
				env.mu.Unlock()
				cancel()
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
				closed := time.Since(start)
				Await(t, 20*time.Second, "the agent to see the coordinator go", func() bool { return a.Daemon.Link().State != "connected" })
				t.Logf("%s over %s: Close took %v; the agent saw it gone %v after the stop began", store, tr, closed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
				env.startCoordinator()
			})
		}
	}
}
