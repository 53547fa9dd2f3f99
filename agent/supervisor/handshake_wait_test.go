package supervisor

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// A resumed tool is judged hung only when it stays silent StartTimeout after
// the spawn, or prints and does not confirm the conversation within
// HandshakeTimeout of its first byte: a tool that takes 40 s to print its
// first line on a loaded host is slow, not unable to resume (R-RES-2).
func TestAwaitHandshakeCountsFromTheFirstByte(t *testing.T) {
	for _, tc := range []struct {
		name      string
		spokeAt   time.Duration // 0: never
		confirmAt time.Duration // 0: never
		want      time.Duration // when awaitHandshake returns
	}{
		{"silent tool", 0, 0, StartTimeout},
		{"slow first line, no confirmation", 50 * time.Second, 0, 50*time.Second + HandshakeTimeout},
		{"slow first line, then confirmed", 40 * time.Second, 45 * time.Second, 45 * time.Second},
		{"prompt first line, never confirmed", time.Second, 0, time.Second + HandshakeTimeout},
		{"first line after the start bound", StartTimeout + time.Second, 0, StartTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				g := &generation{spoke: make(chan struct{}), handshake: make(chan struct{}),
					refused: make(chan struct{}), ended: make(chan struct{})}
				if tc.spokeAt > 0 {
					time.AfterFunc(tc.spokeAt, func() { close(g.spoke) })
				}
				if tc.confirmAt > 0 {
					time.AfterFunc(tc.confirmAt, func() { close(g.handshake) })
				}
				start := time.Now()
				g.awaitHandshake(context.Background())
				if got := time.Since(start); got != tc.want {
					t.Errorf("awaitHandshake returned after %v, want %v", got, tc.want)
				}
			})
		})
	}
}
