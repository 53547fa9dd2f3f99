package tunnel_test

import (
	"context"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/tunnel"
	"github.com/olivares-dev/olivares/shared/tunnel/tunneltest"
)

// Bytes of any stream show the peer is alive: LastReceived moves when the
// peer writes on a stream other than the heartbeat's, which is what lets a
// busy tunnel keep a heartbeat queued behind its output (R-TUN-4).
func TestLastReceivedCountsEveryStream(t *testing.T) {
	for _, tr := range tunneltest.Transports {
		t.Run(tr, func(t *testing.T) {
			client, server := tunneltest.Pair(t, tr)
			before := tunnel.LastReceived(server)
			s, err := client.OpenStream(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.Write(make([]byte, 4096)); err != nil {
				t.Fatal(err)
			}
			tunneltest.Await(t, "the server to count the stream's bytes as received", func() bool {
				return tunnel.LastReceived(server).After(before)
			})
			if got := tunnel.LastReceived(server); time.Since(got) > time.Hour {
				t.Errorf("LastReceived = %v, want about now", got)
			}
		})
	}
}
