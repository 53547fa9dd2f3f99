// Package localsock serves and calls a daemon's local control API: HTTP over
// a unix socket in the daemon's state dir, mode 0600 (Tailscale LocalAPI).
//
// Whoever can open the socket is trusted as the machine's operator; the
// socket is never reachable from the network.
package localsock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/olivares-dev/olivares/shared/apierr"
)

// ErrNotRunning: nothing answers on the socket.
var ErrNotRunning = errors.New("localsock: no daemon answers on the socket")

// Listen creates the socket at path with mode 0600. A stale socket left by a
// dead daemon is removed; a live one is an error.
func Listen(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if c, err := net.DialTimeout("unix", path, 500*time.Millisecond); err == nil {
		c.Close()
		return nil, fmt.Errorf("localsock: %s: another daemon is already listening", path)
	}
	os.Remove(path)
	// No umask games: umask is process-wide and would leak into every child
	// forked meanwhile. The directory is 0700, and a socket needs write
	// permission to connect, so the moment before the chmod exposes nothing.
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// Serve serves handler on ln until ctx ends.
func Serve(ctx context.Context, ln net.Listener, handler http.Handler) error {
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Client returns an HTTP client that dials the socket at path.
func Client(path string) *http.Client {
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", path)
			},
		},
	}
}

// Do calls method path on the socket with an optional JSON body and decodes
// a JSON result. ErrNotRunning when nothing answers.
func Do(ctx context.Context, sock, method, path string, body, result any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://local"+path, r)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := Client(sock).Do(req)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) || errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w (%s)", ErrNotRunning, sock)
		}
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var eb apierr.Body
		if json.Unmarshal(data, &eb) == nil && eb.Error != nil && eb.Error.Message != "" {
			return fmt.Errorf("%s", eb.Error.Message)
		}
		return fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	if result != nil {
		return json.Unmarshal(data, result)
	}
	return nil
}

// WriteJSON writes v with status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
}

// WriteError writes an R-API-4 error body.
func WriteError(w http.ResponseWriter, status int, code, msg string) {
	WriteJSON(w, status, apierr.Body{Error: &apierr.Error{Code: code, Message: msg}})
}
