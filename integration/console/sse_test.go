package console

import (
	"fmt"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
)

// The console reads its SSE streams (attach and the change stream) with
// one module, sse.js. Its parser takes a body cut anywhere: CRLF lines,
// `:` keep-alive comments, data on several lines, an event without a
// name. An attach opened at from=2 whose connection drops mid-stream
// reconnects at last+1 and shows every frame from 2 on once, with no gap
// (R-RC-1, R-RC-6); an attach the coordinator refuses (a run that does
// not exist) says so once, as `refused` with the status.
func TestSSEReaderResumesAtLastPlusOne(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	p := f.profile("claude", nil)
	r := f.launch(f.admin, p, "sse")
	s := f.admin.Attach(r.RunRef, "from=0")
	defer s.Close()
	f.input(r, "work")
	s.UntilOutput(`"result":"worked"`, wait)
	last := f.admin.Run(r.RunRef).RingLast
	if last < 5 {
		t.Fatalf("the ring holds %d frames, want a few more to drop in the middle of", last)
	}
	tab := f.signIn()

	got := browser.Eval[string](tab, `import('/assets/sse.js').then(async (m) => {
  const enc = new TextEncoder();
  const chunks = ['id: 7\r\nevent: out', 'put\r\ndata: {"a":', '1}\r\n\r\n: keep-alive\n\nevent: two\ndata: x\ndata: y\n\n', 'data: {"b":2}\n\n'];
  const body = new ReadableStream({ start(c) { for (const s of chunks) c.enqueue(enc.encode(s)); c.close(); } });
  const out = [];
  for await (const ev of m.events(body)) out.push(ev);
  return JSON.stringify(out);
})`)
	if want := `[{"name":"output","id":"7","data":{"a":1}},{"name":"two","id":"","data":null},{"name":"message","id":"","data":{"b":2}}]`; got != want {
		t.Fatalf("events:\n got %s\nwant %s", got, want)
	}

	// The connection is cut (not closed by its owner) after two frames.
	tab.Exec(fmt.Sprintf(`window.__sse = { seqs: [], states: [] }; void import('/assets/runattach.js').then((m) => {
  const w = window.__sse;
  w.attach = new m.Attach(%s, { from: 2, onState: (s) => w.states.push(s), onEvent: (name, data) => {
    if (name !== 'output') return;
    w.seqs.push(data.seq);
    if (w.seqs.length === 2) w.attach.ctrl.abort();
  } }).start();
})`, js(r.RunRef)))
	tab.Await("every frame to the last, over a second connection", fmt.Sprintf(`window.__sse.seqs.includes(%d) && window.__sse.states.join() === 'open,reconnecting,open'`, last), wait)
	seqs := browser.Eval[[]uint64](tab, `window.__sse.attach.close(), window.__sse.seqs`)
	for i, seq := range seqs {
		if seq != uint64(i)+2 {
			t.Fatalf("seqs after the drop: %v, want 2..%d once each", seqs, last)
		}
	}

	tab.Exec(`window.__refused = []; void import('/assets/runattach.js').then((m) => {
  new m.Attach('run_nope', { onState: (s, err) => window.__refused.push(s + ' ' + (err ? err.status : '')), onEvent: () => {} }).start();
})`)
	tab.Await("the refusal", `window.__refused.length > 0`, wait)
	if got := browser.Eval[[]string](tab, `window.__refused`); len(got) != 1 || !strings.HasPrefix(got[0], "refused 4") {
		t.Fatalf("states of a refused attach: %q, want one refused with its 4xx status", got)
	}
}
