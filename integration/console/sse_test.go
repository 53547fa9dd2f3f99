package console

import (
	"fmt"
	"strings"
	"testing"

	"github.com/olivares-dev/olivares/integration"
	"github.com/olivares-dev/olivares/integration/browser"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// The console reads its SSE streams (attach and the change stream) with
// one module, sse.js. Its parser takes a body cut anywhere: CRLF lines,
// `:` keep-alive comments, data on several lines, an event without a
// name. An attach opened at from=1 whose connection drops mid-stream
// reconnects with from=last+1 and shows every frame from 1 on once, with
// no gap, a turn that ran after the drop included (R-RC-1, R-RC-6); an
// attach the coordinator refuses (a run that does
// not exist) says so once, as `refused` with the status.
func TestSSEReaderResumesAtLastPlusOne(t *testing.T) {
	f := setup(t, integration.ProcOptions{})
	p := f.profile("claude", nil)
	r := f.launch(f.admin, p, "sse")
	s := f.admin.Attach(r.RunRef, "from=0")
	defer s.Close()
	f.input(r, "work")
	outs := s.UntilOutput(`"result":"worked"`, wait)
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

	// The console's attach from seq 1 has its connection cut (not closed
	// by its owner) after two frames; a second turn runs once it is back.
	tab.Exec(fmt.Sprintf(`window.__sse = { seqs: [], states: [], asked: [] }; void import('/assets/runattach.js').then((m) => {
  const w = window.__sse, fetch0 = window.fetch;
  window.fetch = (url, o) => { if (String(url).includes('/attach')) w.asked.push(String(url).split('?')[1]); return fetch0(url, o); };
  w.attach = new m.Attach(%s, { from: 1, onState: (s) => {
    w.states.push(s);
    if (s === 'reconnecting') w.want = 'from=' + (Math.max(...w.seqs) + 1);
  }, onEvent: (name, data) => {
    if (name !== 'output') return;
    w.seqs.push(data.seq);
    if (w.seqs.length === 2) w.attach.ctrl.abort();
  } }).start();
})`, js(r.RunRef)))
	seen := func(o []apitypes.Output) string {
		return fmt.Sprintf(`window.__sse.seqs.includes(%d)`, o[len(o)-1].Seq)
	}
	tab.Await("the first turn, and a second connection", seen(outs)+` && window.__sse.states.join() === 'open,reconnecting,open'`, wait)
	type asked struct {
		Asked []string
		Want  string
	}
	if a := browser.Eval[asked](tab, `({ Asked: window.__sse.asked, Want: window.__sse.want })`); len(a.Asked) != 2 || a.Asked[0] != "from=1" || a.Asked[1] != a.Want {
		t.Fatalf("attach asked for %q, want from=1 and then %s (the last seq seen + 1)", a.Asked, a.Want)
	}
	f.input(r, "work")
	more := s.UntilOutput(`"result":"worked"`, wait)
	tab.Await("the second turn", seen(more), wait)
	var want []uint64
	for _, o := range append(outs, more...) {
		if o.Seq >= 1 {
			want = append(want, o.Seq)
		}
	}
	if seqs := browser.Eval[[]uint64](tab, `window.__sse.attach.close(), window.__sse.seqs`); fmt.Sprint(seqs) != fmt.Sprint(want) {
		t.Fatalf("seqs over the two connections: %v, want %v (once each, none missing)", seqs, want)
	}

	tab.Exec(`window.__refused = []; void import('/assets/runattach.js').then((m) => {
  new m.Attach('run_nope', { onState: (s, err) => window.__refused.push(s + ' ' + (err ? err.status : '')), onEvent: () => {} }).start();
})`)
	tab.Await("the refusal", `window.__refused.length > 0`, wait)
	if got := browser.Eval[[]string](tab, `window.__refused`); len(got) != 1 || !strings.HasPrefix(got[0], "refused 4") {
		t.Fatalf("states of a refused attach: %q, want one refused with its 4xx status", got)
	}
}
