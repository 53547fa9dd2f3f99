package agentd

import (
	"testing"
	"testing/synctest"
)

// R-REP-5: a call's answer waits until the rows it changed are in the
// index. When the push loop has already taken them and is sending them,
// the answer's flush finds nothing left to push: it must wait for that
// push under way, not answer before it.
func TestFlushWaitsForThePushUnderWay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPusher(&Agent{})
		p.sending <- struct{}{} // the loop took the changed rows and sends them
		returned := make(chan struct{})
		go func() {
			p.flush(t.Context())
			close(returned)
		}()
		synctest.Wait()
		select {
		case <-returned:
			t.Fatal("flush returned while a push of changed rows was under way")
		default:
		}
		<-p.sending // the coordinator answered that push
		<-returned
	})
}
