package fleet

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/tunnel/tunneltest"
	"github.com/olivares-dev/olivares/shared/wire"
)

// Open returns as soon as its context ends, even while the node has not
// answered the call's header: the HTTP request that asked for it went away
// (or the coordinator drains), so the stream must not stay blocked on a
// silent agent (R-OPS-4).
func TestOpenHonoursCancellation(t *testing.T) {
	for _, tr := range tunneltest.Transports {
		t.Run(tr, func(t *testing.T) {
			agent, coord := tunneltest.Pair(t, tr)
			f := New(Options{})
			f.links["node-1"] = &link{nodeID: "node-1", sess: coord}

			// The agent reads the header and never answers.
			got := make(chan struct{})
			go func() {
				s, err := agent.AcceptStream(context.Background())
				if err != nil {
					return
				}
				defer s.Close()
				var h wire.Header
				wire.ReadMessage(s, &h)
				close(got)
				<-agent.Done()
			}()

			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				_, err := f.Open(ctx, "node-1", wire.Header{Op: "never.answers"}, nil, nil)
				done <- err
			}()
			select {
			case <-got:
			case <-time.After(tunneltest.Timeout):
				t.Fatal("the agent never got the call")
			}
			cancel()
			select {
			case err := <-done:
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("Open after cancel: got %v, want context.Canceled", err)
				}
			case <-time.After(tunneltest.Timeout):
				t.Fatal("Open still blocked after its context was cancelled")
			}
		})
	}
}

// Close cuts the live tunnels and returns only when the goroutines that
// serve them (and use the store) have returned; a session accepted after
// Close is closed at once.
func TestCloseWaitsForHandlers(t *testing.T) {
	agent, coord := tunneltest.Pair(t, "yamux")
	f := New(Options{})
	f.links["node-1"] = &link{nodeID: "node-1", sess: coord}
	if !f.track() {
		t.Fatal("track refused before Close")
	}
	returned := make(chan struct{})
	go func() {
		defer f.handlers.Done()
		<-coord.Done()
		close(returned)
	}()
	f.Close()
	select {
	case <-returned:
	default:
		t.Fatal("Close returned before the session's handler")
	}
	select {
	case <-agent.Done():
	case <-time.After(tunneltest.Timeout):
		t.Fatal("the agent's session is still open after Close")
	}
	if f.track() {
		t.Fatal("track accepted a handler after Close")
	}
}
