package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/conversation"
)

// renderer prints a run's conversation as it streams (R-CLI-7): the
// frames go through shared/conversation, the same items the console shows,
// and each item is printed once, text items growing in place as they
// stream:
//
//	> what the person sent
//	the assistant's text, as it streams
//	~ the model's reasoning
//	→ Bash  ls -la              a tool call, in short
//	  ✓ Bash  3 lines: total 8  its result, in short (✗ on error)
//	✗ error: ...                the tool's errors and refusals
//	· a session fact or warning
//	── completed · 0.4 s · $0.0001   a turn boundary
//	? req_… asks (command, Bash): …  a request of the tool, how to answer it
//
// Stderr frames go to stderr, each line marked "stderr│ ", and so does the
// output of the workspace's setup command, marked "setup│ " (R-SETUP-2).
type renderer struct {
	n      *conversation.Normalizer
	out    io.Writer
	errOut io.Writer
	tty    termOut
	state  map[int]*printed
	// last is the item whose text the cursor is after, -1 for none;
	// atBOL tells whether the cursor is at the start of a line.
	last  int
	atBOL bool
	// errBOL is atBOL for stderr, errMark the mark of its current line;
	// wrote tells whether anything was printed on stdout yet.
	errBOL  bool
	errMark string
	wrote   bool
}

// printed is what of an item is on the screen.
type printed struct {
	text   int    // bytes of Text printed (user)
	seen   string // the Text printed (assistant, thinking)
	shown  bool   // the item's line (a tool call's call line) is printed
	result bool   // the tool call's result line is printed
}

func newRenderer(driver string, out, errOut io.Writer, tty termOut) *renderer {
	return &renderer{n: conversation.New(driver), out: out, errOut: errOut, tty: tty,
		state: map[int]*printed{}, last: -1, atBOL: true, errBOL: true}
}

// feed prints what one output frame adds to the conversation.
func (r *renderer) feed(o apitypes.Output) error {
	if o.Stream == "setup" {
		data := o.Data
		if o.Encoding == "base64" {
			raw, _ := base64.StdEncoding.DecodeString(data)
			data = strings.ToValidUTF8(string(raw), "\uFFFD")
		}
		r.printMarked("setup│ ", data)
		return nil
	}
	changed, stderr := r.n.Feed(o)
	for _, s := range stderr {
		r.printMarked("stderr│ ", s)
	}
	r.print(changed)
	return nil
}

// flush prints what is left unterminated, before a notice or at the end.
func (r *renderer) flush(seq uint64) {
	r.print(r.n.Flush(seq))
	r.newline()
}

// newline ends the current line, if any.
func (r *renderer) newline() {
	if !r.atBOL {
		fmt.Fprintln(r.out)
		r.atBOL = true
	}
	r.last = -1
}

// line prints one whole line (s has no newline).
func (r *renderer) line(s string) {
	s = r.tty.plain(s)
	r.newline()
	fmt.Fprintln(r.out, s)
	r.wrote = true
}

func (r *renderer) print(changed []int) {
	for _, i := range changed {
		st := r.state[i]
		if st == nil {
			st = &printed{}
			r.state[i] = st
		}
		it := r.n.Items[i]
		switch it.Kind {
		case conversation.KindAssistant, conversation.KindThinking:
			r.printText(i, it, st)
		case conversation.KindUser:
			if !st.shown {
				st.shown = true
				r.prefixed(it.Text, "> ", sgrBold)
				st.text = len(it.Text)
			} else if len(it.Text) > st.text && strings.HasPrefix(it.Text, it.Text[:st.text]) {
				// an ACP user message arrives in chunks
				r.prefixed(it.Text[st.text:], "> ", sgrBold)
				st.text = len(it.Text)
			}
		case conversation.KindToolCall:
			if !st.shown {
				st.shown = true
				head := "→ " + dash(it.Name)
				if s := toolSummary(it.Input); s != "" {
					head += "  " + s
				}
				r.line(r.tty.paint(sgrCyan, head))
			}
			if !st.result && (it.Status == conversation.StatusDone || it.Status == conversation.StatusError) {
				st.result = true
				mark, code := "✓", sgrDim
				if it.Status == conversation.StatusError {
					mark, code = "✗", sgrRed
				}
				text := "  " + mark + " " + dash(it.Name)
				if s := resultSummary(it.Result); s != "" {
					text += "  " + s
				}
				r.line(r.tty.paint(code, text))
			}
		case conversation.KindTurnStart:
			if !st.shown {
				st.shown = true
				r.newline()
				if r.wrote {
					// A blank line between turns.
					fmt.Fprintln(r.out)
				}
			}
		case conversation.KindTurnEnd:
			if !st.shown {
				st.shown = true
				r.line(r.tty.paint(turnColor(it.Status), "── "+turnText(it)))
			}
		case conversation.KindError:
			if !st.shown {
				st.shown = true
				r.prefixed(it.Text, "✗ ", sgrRed)
			}
		case conversation.KindSystem:
			if !st.shown {
				st.shown = true
				r.prefixed(it.Text, "· ", sgrYellow)
			}
		case conversation.KindOutput:
			if !st.shown {
				st.shown = true
				r.line(it.Text)
			}
		}
	}
}

// request prints a request of the tool where it was asked (R-REQ-4): what
// it asks and the commands that answer it, or how it was settled.
//
//	? req_… asks (command, Bash): Run make
//	    command: make
//	    answer:  olivares session answer RUN req_…   (allow once) …
//	? request req_…: allow by prn_alice: Run make
func (r *renderer) request(ref string, req apitypes.RunRequest) {
	if req.State == apitypes.RequestPending {
		for i, l := range requestLines(ref, req) {
			if i == 0 {
				r.line(r.tty.paint(sgrYellow, "? "+l))
			} else {
				r.line("  " + l)
			}
		}
		return
	}
	code := sgrDim
	if req.Decision != apitypes.DecisionAllow && req.Decision != apitypes.DecisionAnswer {
		code = sgrYellow
	}
	r.line(r.tty.paint(code, "? "+settledLine(req)))
}

// printText prints what an assistant or thinking item gained since it was
// last printed; a text replaced by another (the whole message after its
// deltas, when they differ) is printed again whole.
func (r *renderer) printText(i int, it conversation.Item, st *printed) {
	prefix, code := "", ""
	if it.Kind == conversation.KindThinking {
		prefix, code = "~ ", sgrDim
	}
	var add string
	switch {
	case !st.shown:
		st.shown = true
		add = it.Text
		r.newline()
	case strings.HasPrefix(it.Text, st.seen):
		add = it.Text[len(st.seen):]
		if r.last != i {
			// Another item was printed in between: go on on a line of its own.
			r.newline()
		}
	default:
		add = it.Text
		r.newline()
	}
	st.seen = it.Text
	if add == "" {
		return
	}
	r.stream(add, prefix, code)
	r.last = i
}

// prefixed prints text whole on lines of its own, each line prefixed.
func (r *renderer) prefixed(text, prefix, code string) {
	r.newline()
	r.stream(text, prefix, code)
	r.newline()
}

// stream writes text where the cursor is, starting each new line with
// prefix, in colour code.
func (r *renderer) stream(text, prefix, code string) {
	text = r.tty.plain(text)
	if text != "" {
		r.wrote = true
	}
	for text != "" {
		if r.atBOL {
			fmt.Fprint(r.out, r.tty.paint(code, prefix))
		}
		nl := strings.IndexByte(text, '\n')
		if nl < 0 {
			fmt.Fprint(r.out, r.tty.paint(code, text))
			r.atBOL = false
			return
		}
		fmt.Fprint(r.out, r.tty.paint(code, text[:nl])+"\n")
		r.atBOL = true
		text = text[nl+1:]
	}
}

// printMarked writes text to stderr, each line marked with mark.
func (r *renderer) printMarked(mark, s string) {
	s = r.tty.plain(s)
	if mark != r.errMark {
		r.endStderr()
		r.errMark = mark
	}
	for s != "" {
		if r.errBOL {
			fmt.Fprint(r.errOut, r.tty.paint(sgrDim, mark))
		}
		nl := strings.IndexByte(s, '\n')
		if nl < 0 {
			fmt.Fprint(r.errOut, s)
			r.errBOL = false
			return
		}
		fmt.Fprint(r.errOut, s[:nl+1])
		r.errBOL = true
		s = s[nl+1:]
	}
}

// endStderr ends an unterminated stderr line.
func (r *renderer) endStderr() {
	if !r.errBOL {
		fmt.Fprintln(r.errOut)
		r.errBOL = true
	}
}

func turnColor(status string) string {
	switch status {
	case conversation.StatusFailed:
		return sgrRed
	case conversation.StatusInterrupted:
		return sgrYellow
	}
	return sgrDim
}

// turnText is a turn boundary: its status and what the tool said of it.
func turnText(it conversation.Item) string {
	parts := []string{it.Status}
	if d, ok := number(it.Detail["duration_ms"]); ok {
		if d < 1000 {
			parts = append(parts, fmt.Sprintf("%.0f ms", d))
		} else {
			parts = append(parts, fmt.Sprintf("%.1f s", d/1000))
		}
	}
	if c, ok := number(it.Detail["cost_usd"]); ok {
		parts = append(parts, fmt.Sprintf("$%.4f", c))
	}
	if s, ok := it.Detail["stop_reason"].(string); ok {
		parts = append(parts, "stop reason "+s)
	}
	return strings.Join(parts, " · ")
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	}
	return 0, false
}

// toolSummary is what a tool call shows on one line: the command, path,
// description or query of its input, else its first line (as the console's
// summary does).
func toolSummary(input string) string {
	s := input
	var o map[string]any
	if json.Unmarshal([]byte(input), &o) == nil {
		for _, k := range []string{"command", "cmd", "file_path", "path", "description", "query", "pattern", "skill"} {
			if v, ok := o[k].(string); ok && v != "" {
				s = v
				break
			}
		}
	}
	return clip(firstLine(s), 120)
}

// resultSummary is a tool result on one line: its first non-blank line and
// how many lines it has.
func resultSummary(result string) string {
	result = strings.TrimRight(result, "\n")
	if strings.TrimSpace(result) == "" {
		return ""
	}
	lines := strings.Split(result, "\n")
	first := ""
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			first = strings.TrimSpace(l)
			break
		}
	}
	first = clip(first, 100)
	if len(lines) > 1 {
		return fmt.Sprintf("%d lines: %s", len(lines), first)
	}
	return first
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// clip cuts s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
