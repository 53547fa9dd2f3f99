package tunneltest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/olivares-dev/olivares/shared/tunnel"
)

// ServeEcho accepts streams on s and writes back what each sends until it
// half-closes, then closes the stream. It returns when s can accept no
// more, after its streams are done; run it in a goroutine.
func ServeEcho(s tunnel.Session) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		st, err := s.AcceptStream(context.Background())
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer st.Close()
			st.SetDeadline(time.Now().Add(Timeout))
			io.Copy(st, st)
		}()
	}
}

// EchoStreams opens n streams on s at once and, once all n are open, echoes
// size bytes on each through a ServeEcho peer: write, CloseWrite, read back
// to EOF, compare, Close. It returns s.NumStreams() as seen while all n were
// open, and the first error. ctx's deadline bounds every stream.
func EchoStreams(ctx context.Context, s tunnel.Session, n, size int) (open int, err error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(Timeout)
	}
	var (
		opened, done sync.WaitGroup
		start        = make(chan struct{})
		once         sync.Once
	)
	fail := func(e error) { once.Do(func() { err = e }) }
	opened.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			want := bytes.Repeat([]byte{byte(i)}, size)
			st, err := s.OpenStream(ctx)
			if err != nil {
				opened.Done()
				fail(fmt.Errorf("stream %d: open: %w", i, err))
				return
			}
			defer st.Close()
			st.SetDeadline(deadline)
			_, err = st.Write(want) // QUIC shows the peer a stream once it carries data
			opened.Done()
			if err != nil {
				fail(fmt.Errorf("stream %d: write: %w", i, err))
				return
			}
			<-start
			if err := st.CloseWrite(); err != nil {
				fail(fmt.Errorf("stream %d: close write: %w", i, err))
				return
			}
			got, err := io.ReadAll(st)
			if err != nil {
				fail(fmt.Errorf("stream %d: read: %w", i, err))
				return
			}
			if !bytes.Equal(got, want) {
				fail(fmt.Errorf("stream %d: got %d bytes back, want the %d sent", i, len(got), size))
			}
		}()
	}
	opened.Wait()
	open = s.NumStreams()
	close(start)
	done.Wait()
	return open, err
}
