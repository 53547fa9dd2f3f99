//go:build linux

// Command fakecli is a local peer that imitates the operate forms of the
// vendor CLIs as docs/real-clis.md records them, so that the
// driver conformance suite (R-DRV-2) and the journeys can run a real child
// process without a model, an account or the network.
//
// The tool is chosen by the program's base name (a symlink named claude,
// codex, grok, gemini or opencode) or by a first argument (`fakecli claude
// --print ...`):
//
//   - claude: `--print --input-format stream-json --output-format stream-json
//     --verbose [--resume <id>]` (claude.go, real-clis.md §1);
//   - codex: `app-server`, JSON-RPC over stdio (codex.go, §2);
//   - grok: `agent stdio`, the Agent Client Protocol (grok.go; no real binary
//     was measured, so it follows ACP as Gemini CLI speaks it, §3);
//   - gemini: `--acp`, Gemini CLI's ACP agent with its chat logs and its
//     late replay (gemini.go, §3);
//   - opencode: `acp`, OpenCode's ACP agent, and `export [<id>]`
//     (opencode.go, §4).
//
// The three ACP agents share acp.go.
//
// Conversations are stored under the tool's own home, as the real tools do,
// so that a resume in a new process finds them and an unknown id is refused.
// Every start and every resume is also appended to $HOME/.fakecli/calls.jsonl,
// so a test can assert what it was asked (J03).
//
// A user text drives the peer:
//
//	flood N      the reply is N bytes of text, sent quickly in 16 KiB pieces
//	stderr X     X is written to stderr, then the normal reply
//	exit N       the process exits with code N at once
//	slow         one delta per 100 ms until interrupted (at most 60 s)
//	ignore-term  SIGTERM is ignored from now on (a stop must SIGKILL)
//	history      the reply lists the earlier user texts of the conversation
//	limit        the turn ends on a usage limit (Claude and Codex shapes)
//	env NAME     (codex) the reply is NAME=<its value in the environment>
//	file NAME    (codex) the reply is NAME=<the content of the file at $NAME>
//	work         (claude) a turn that uses tools: a foreground sub-agent with
//	             its own transcript, a command, a todo list, a new file, a
//	             skill and an MCP tool, each with its result, as Claude Code
//	             2.1.328 records them; the last request used 34000 tokens
//	work ambiguous  the same, with a window report naming the model twice
//
// Anything else is answered "pong: <text>".
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func main() {
	tool, args := pickTool(os.Args)
	p := newPeer(tool)
	var code int
	switch tool {
	case "claude":
		code = runClaude(p, args)
	case "codex":
		code = runCodex(p, args)
	case "grok":
		code = runGrok(p, args)
	case "gemini":
		code = runGemini(p, args)
	case "opencode":
		code = runOpenCode(p, args)
	default:
		fmt.Fprintf(os.Stderr, "fakecli: run me as claude, codex, grok, gemini or opencode (argv[0] or the first argument), not %q\n", tool)
		code = 2
	}
	p.exit(code)
}

// pickTool reads the tool from argv[0]'s base name, else from argv[1].
func pickTool(argv []string) (string, []string) {
	base := filepath.Base(argv[0])
	switch base {
	case "claude", "codex", "grok", "gemini", "opencode":
		return base, argv[1:]
	}
	if len(argv) > 1 {
		return argv[1], argv[2:]
	}
	return "", nil
}

// peer is what the protocols share: one stdout writer, the signal
// policy and the call log.
type peer struct {
	tool string

	outMu sync.Mutex // one frame per write, never interleaved

	ignoreTerm atomic.Bool
	// onTerm is the tool's SIGTERM behaviour (claude exits 143, codex 0).
	onTerm func()
	// onInt is the tool's SIGINT behaviour.
	onInt func()
}

func newPeer(tool string) *peer {
	return &peer{tool: tool, onTerm: func() { dieOf(syscall.SIGTERM) }, onInt: func() { dieOf(syscall.SIGINT) }}
}

// listen installs the signal policy; the tool sets onTerm and onInt first.
func (p *peer) listen() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		for s := range sigs {
			switch {
			case s == syscall.SIGTERM && p.ignoreTerm.Load():
			case s == syscall.SIGTERM:
				p.onTerm()
			default:
				p.onInt()
			}
		}
	}()
}

// dieOf ends the process by the signal itself, as a program without a
// handler would.
func dieOf(s syscall.Signal) {
	signal.Reset(s)
	_ = syscall.Kill(os.Getpid(), s)
	time.Sleep(time.Second)
	os.Exit(128 + int(s))
}

func (p *peer) exit(code int) {
	p.outMu.Lock() // no frame is cut in half
	os.Exit(code)
}

// emit writes v as one JSON line on stdout.
func (p *peer) emit(v any) {
	b := marshalLine(v)
	p.outMu.Lock()
	defer p.outMu.Unlock()
	_, _ = os.Stdout.Write(b)
}

func marshalLine(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		panic(err)
	}
	return b.Bytes()
}

// logCall appends one record to $HOME/.fakecli/calls.jsonl.
func (p *peer) logCall(rec map[string]any) {
	home := os.Getenv("HOME")
	if home == "" {
		return
	}
	dir := filepath.Join(home, ".fakecli")
	if os.MkdirAll(dir, 0o700) != nil {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "calls.jsonl"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	rec["tool"] = p.tool
	rec["pid"] = os.Getpid()
	_, _ = f.Write(marshalLine(rec))
}

// special is a parsed driving input.
type special struct {
	kind string // "", flood, stderr, exit, slow, ignore-term, history, limit, env, file, work
	n    int
	arg  string
}

func parseSpecial(text string) special {
	word, rest, _ := strings.Cut(strings.TrimSpace(text), " ")
	switch word {
	case "flood", "exit":
		if n, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil && n >= 0 {
			return special{kind: word, n: n}
		}
	case "stderr":
		return special{kind: word, arg: rest}
	case "env", "file":
		if rest != "" && !strings.Contains(rest, " ") {
			return special{kind: word, arg: rest}
		}
	case "slow", "ignore-term", "history", "limit":
		if rest == "" {
			return special{kind: word}
		}
	case "work":
		if rest == "" || rest == "ambiguous" {
			return special{kind: word, arg: rest}
		}
	case "ask":
		// ACP: ask session/request_permission to run rest, and answer
		// with what the client chose.
		if rest != "" {
			return special{kind: word, arg: rest}
		}
	}
	return special{}
}

// The pace of `slow`.
const (
	slowTick = 100 * time.Millisecond
	slowMax  = 600
)

// floodChunk is the size of one flood piece.
const floodChunk = 16 << 10

// floodPieces splits n bytes of text into pieces.
func floodPieces(n int) []string {
	var out []string
	piece := strings.Repeat("x", floodChunk)
	for n > 0 {
		k := min(n, floodChunk)
		out = append(out, piece[:k])
		n -= k
	}
	return out
}

// envReply shows what the tool was handed (grants, R-GRANT-1): the value of an
// environment variable (env NAME), or the content of the file whose path
// it holds (file NAME).
func envReply(sp special) string {
	v, ok := os.LookupEnv(sp.arg)
	if !ok {
		return sp.kind + " " + sp.arg + " is not set"
	}
	if sp.kind == "file" {
		b, err := os.ReadFile(v)
		if err != nil {
			return "file " + sp.arg + ": " + err.Error()
		}
		v = string(b)
	}
	return sp.kind + " " + sp.arg + "=" + v
}

// history lists earlier user texts.
func historyReply(h []string) string {
	return "history: " + strings.Join(h, " | ")
}

func uuidV4() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}

// uuidV7 is a time-ordered id, the kind Codex gives threads and turns.
func uuidV7() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	var ms [8]byte
	binary.BigEndian.PutUint64(ms[:], uint64(time.Now().UnixMilli()))
	copy(b[:6], ms[2:])
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return formatUUID(b)
}

func formatUUID(b [16]byte) string {
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// appendJSONL appends one record to a file, creating its directory.
func appendJSONL(path string, rec any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(marshalLine(rec))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// readJSONL calls fn with each line of a JSONL file.
func readJSONL(path string, fn func(line []byte)) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(l)) > 0 {
			fn(l)
		}
	}
	return nil
}
