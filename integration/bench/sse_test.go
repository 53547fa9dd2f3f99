package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/olivares-dev/olivares/integration"
)

// sseConn is one attach read in the caller's goroutine, so that a timed
// loop measures the stack and not a channel hop. integration.Stream decodes
// every event with encoding/json on its own goroutine; on two cores that
// client would be a good part of what a 64 MiB flood measures.
type sseConn struct {
	resp   *http.Response
	br     *bufio.Reader
	cancel context.CancelFunc
	line   []byte // a line longer than the reader's buffer
	data   []byte // the current event's data
}

// sseEvent is one server-sent event; data is valid until the next call.
type sseEvent struct {
	name string
	id   uint64
	data []byte
}

// attachSSE opens GET /runs/{ref}/attach?from=from and returns once the
// coordinator has answered 200 (the agent's viewer is subscribed by then).
func attachSSE(ctx context.Context, c *integration.Client, base, ref string, from uint64) (*sseConn, error) {
	ctx, cancel := context.WithCancel(ctx)
	u := fmt.Sprintf("%s/v1/m/sessions/runs/%s/attach?from=%d", base, ref, from)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		cancel()
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.Token)
	req.Header.Set("X-Olivares-Tenant", c.Tenant)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("attach %s: status %d: %s", ref, resp.StatusCode, b)
	}
	return &sseConn{resp: resp, br: bufio.NewReaderSize(resp.Body, 1<<20), cancel: cancel}, nil
}

func (s *sseConn) Close() {
	s.cancel()
	s.resp.Body.Close()
}

// readLine returns one line without its '\n'.
func (s *sseConn) readLine() ([]byte, error) {
	l, err := s.br.ReadSlice('\n')
	if err == nil {
		return l[:len(l)-1], nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return nil, err
	}
	s.line = append(s.line[:0], l...)
	for {
		l, err = s.br.ReadSlice('\n')
		s.line = append(s.line, l...)
		if err == nil {
			return s.line[:len(s.line)-1], nil
		}
		if !errors.Is(err, bufio.ErrBufferFull) {
			return nil, err
		}
	}
}

// next reads one event.
func (s *sseConn) next() (sseEvent, error) {
	var ev sseEvent
	s.data = s.data[:0]
	seen := false
	for {
		l, err := s.readLine()
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return sseEvent{}, err
		}
		switch {
		case len(l) == 0:
			if seen {
				ev.data = s.data
				return ev, nil
			}
		case bytes.HasPrefix(l, []byte("event: ")):
			ev.name, seen = string(l[len("event: "):]), true
		case bytes.HasPrefix(l, []byte("id: ")):
			n, err := strconv.ParseUint(string(l[len("id: "):]), 10, 64)
			if err != nil {
				return sseEvent{}, fmt.Errorf("event id %q: %v", l, err)
			}
			ev.id, seen = n, true
		case bytes.HasPrefix(l, []byte("data: ")):
			if len(s.data) > 0 {
				s.data = append(s.data, '\n')
			}
			s.data, seen = append(s.data, l[len("data: "):]...), true
		}
	}
}

// outputData appends the decoded bytes of an output event's data (an
// apitypes.Output: its "data" string, base64-decoded when "encoding" says
// so) to dst. It reads the one field it needs instead of running
// encoding/json over every 16 KiB piece of a flood; TestOutputData checks
// it against encoding/json.
func outputData(dst, event []byte) ([]byte, error) {
	const key = `"data":"`
	i := bytes.Index(event, []byte(key))
	if i < 0 {
		return dst, fmt.Errorf("output event without data: %.200s", event)
	}
	start := len(dst)
	dst, rest, err := appendJSONString(dst, event[i+len(key):])
	if err != nil {
		return dst, err
	}
	if bytes.Contains(rest, []byte(`"encoding":"base64"`)) {
		raw, err := base64.StdEncoding.AppendDecode(nil, dst[start:])
		if err != nil {
			return dst, err
		}
		dst = append(dst[:start], raw...)
	}
	return dst, nil
}

// appendJSONString decodes the JSON string body src (after its opening
// quote) onto dst and returns what follows the closing quote.
func appendJSONString(dst, src []byte) ([]byte, []byte, error) {
	for {
		q := bytes.IndexByte(src, '"')
		if q < 0 {
			return dst, nil, errors.New("unterminated JSON string")
		}
		b := bytes.IndexByte(src[:q], '\\')
		if b < 0 {
			return append(dst, src[:q]...), src[q+1:], nil
		}
		dst = append(dst, src[:b]...)
		src = src[b:]
		if len(src) < 2 {
			return dst, nil, errors.New("bad JSON escape")
		}
		switch c := src[1]; c {
		case '"', '\\', '/':
			dst, src = append(dst, c), src[2:]
		case 'b':
			dst, src = append(dst, '\b'), src[2:]
		case 'f':
			dst, src = append(dst, '\f'), src[2:]
		case 'n':
			dst, src = append(dst, '\n'), src[2:]
		case 'r':
			dst, src = append(dst, '\r'), src[2:]
		case 't':
			dst, src = append(dst, '\t'), src[2:]
		case 'u':
			r, n, err := jsonRune(src)
			if err != nil {
				return dst, nil, err
			}
			dst, src = utf8.AppendRune(dst, r), src[n:]
		default:
			return dst, nil, fmt.Errorf("bad JSON escape \\%c", c)
		}
	}
}

// jsonRune decodes \uXXXX, or a surrogate pair \uXXXX\uXXXX, at src.
func jsonRune(src []byte) (rune, int, error) {
	hex4 := func(b []byte) (rune, bool) {
		if len(b) < 6 || b[0] != '\\' || b[1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(string(b[2:6]), 16, 16)
		return rune(n), err == nil
	}
	r, ok := hex4(src)
	if !ok {
		return 0, 0, errors.New("bad \\u escape")
	}
	if utf16.IsSurrogate(r) {
		if r2, ok := hex4(src[6:]); ok {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12, nil
			}
		}
		return utf8.RuneError, 6, nil
	}
	return r, 6, nil
}
