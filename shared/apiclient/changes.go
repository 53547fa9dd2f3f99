package apiclient

import (
	"context"
	"io"
	"net/http"

	"github.com/olivares-dev/olivares/shared/sse"
)

// ChangeStream is one connection to GET /events, the fleet-wide change
// stream (R-CHG-1). It does not reconnect: the caller does, with
// LastEventID, and refetches on a reset event (R-CHG-4).
type ChangeStream struct {
	body   io.ReadCloser
	rd     *sse.Reader
	cancel context.CancelFunc
}

// Changes opens the change stream; lastEventID "" starts it anew.
func (c *Client) Changes(ctx context.Context, lastEventID string) (*ChangeStream, error) {
	ctx, cancel := context.WithCancel(ctx)
	req, err := c.newRequest(ctx, http.MethodGet, Base+"/events", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.unreachable(err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
		cancel()
		return nil, errorOf(http.MethodGet, Base+"/events", resp.StatusCode, raw)
	}
	return &ChangeStream{body: resp.Body, rd: sse.NewReader(resp.Body), cancel: cancel}, nil
}

// Next is the next event: its type (run, mark, run_removed, node, reset),
// id and JSON data.
func (s *ChangeStream) Next() (sse.Event, error) { return s.rd.Next() }

// Close ends the connection.
func (s *ChangeStream) Close() error {
	s.cancel()
	return s.body.Close()
}
