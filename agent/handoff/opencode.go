package handoff

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultExportTimeout bounds `opencode export` when Source.Timeout is zero
// (it takes about 1.2 s on the reference machine, real-clis.md §5).
const DefaultExportTimeout = 60 * time.Second

// offlineRegistry is a registry nothing listens on: OpenCode fetches
// package metadata at start, which must not leave the machine (real-clis.md
// §4).
const offlineRegistry = "http://127.0.0.1:9/"

var openCodeID = regexp.MustCompile(`^ses_[A-Za-z0-9]{1,128}$`)

// opencodeExport is `opencode export <id>`'s output (real-clis.md §4):
// {"info":{…},"messages":[{"info":{role,…},"parts":[…]},…]}.
type opencodeInfo struct {
	ID        string `json:"id"`
	Directory string `json:"directory"`
}

type opencodeMessage struct {
	Info struct {
		Role string `json:"role"`
		Time struct {
			Created int64 `json:"created"`
		} `json:"time"`
	} `json:"info"`
	Parts []opencodePart `json:"parts"`
}

type opencodePart struct {
	Type      string `json:"type"`
	Text      string `json:"text"`
	Synthetic bool   `json:"synthetic"`
	Ignored   bool   `json:"ignored"`
	Tool      string `json:"tool"`
	CallID    string `json:"callID"`
	Filename  string `json:"filename"`
	Files     []string
	State     struct {
		Status string          `json:"status"`
		Input  json.RawMessage `json:"input"`
		Output string          `json:"output"`
		Error  string          `json:"error"`
		Time   struct {
			Start int64 `json:"start"`
		} `json:"time"`
	} `json:"state"`
	Time struct {
		Start int64 `json:"start"`
	} `json:"time"`
}

// opencodeRecords turns one exported message into records.
func opencodeRecords(m opencodeMessage) []Record {
	at := msTime(m.Info.Time.Created)
	var out []Record
	for _, p := range m.Parts {
		pat := msTime(p.Time.Start)
		if pat.IsZero() {
			pat = at
		}
		switch p.Type {
		case "text":
			// A synthetic part is text OpenCode adds itself; an ignored one
			// was not sent to the model.
			if p.Synthetic || p.Ignored {
				continue
			}
			switch m.Info.Role {
			case "user":
				out = append(out, message(KindUser, pat, p.Text))
			case "assistant":
				out = append(out, message(KindAssistant, pat, p.Text))
			}
		case "file":
			if m.Info.Role == "user" {
				out = append(out, message(KindUser, pat, "[file: "+p.Filename+"]"))
			}
		case "tool":
			cat := msTime(p.State.Time.Start)
			if cat.IsZero() {
				cat = pat
			}
			out = append(out, toolCall(cat, p.Tool, p.CallID, p.State.Input))
			switch p.State.Status {
			case "completed":
				out = append(out, toolResult(cat, p.Tool, p.CallID, p.State.Output, false))
			case "error":
				out = append(out, toolResult(cat, p.Tool, p.CallID, p.State.Error, true))
			}
		case "patch":
			if len(p.Files) > 0 {
				text, n := clip(strings.Join(p.Files, " "), ToolInputBytes)
				out = append(out, Record{Kind: KindToolCall, At: pat, Tool: "patch", Text: text, Size: n, Files: p.Files, Writes: true})
			}
		}
	}
	return out
}

// UnmarshalJSON reads a part; "files" is only taken from patch parts.
func (p *opencodePart) UnmarshalJSON(b []byte) error {
	type plain opencodePart
	var q struct {
		plain
		Files json.RawMessage `json:"files"`
	}
	if err := json.Unmarshal(b, &q); err != nil {
		return err
	}
	*p = opencodePart(q.plain)
	if q.Type == "patch" {
		_ = json.Unmarshal(q.Files, &p.Files)
	}
	return nil
}

// boundReader enforces R-HOF-15 on a stream that a json.Decoder reads: the
// whole stream is at most lim.total, and the value begun at mark at most
// lim.record. Reads are cut to chunk bytes, so that the decoder never reads
// further ahead than that and an oversized value is refused while it
// streams, not after it was buffered whole. The refusal is sticky: a
// json.Decoder drops a read error when the bytes that came with it complete
// a value, so every later Read returns it again, with no more bytes, and
// the caller checks err after each value.
type boundReader struct {
	r    io.Reader
	lim  limits
	n    int64
	mark int64
	err  error
	// trailer: what follows the export counts toward the total only.
	trailer bool
}

const chunk = 64 << 10

func (b *boundReader) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if len(p) > chunk {
		p = p[:chunk]
	}
	k, err := b.r.Read(p)
	b.n += int64(k)
	switch {
	case b.n > b.lim.total:
		b.err = refuse(ErrConversationTooLarge, "the conversation is larger than %s; a handoff reads at most %s", sizeText(b.n), sizeText(b.lim.total)) // R-HOF-15
	case !b.trailer && b.n-b.mark > int64(b.lim.record)+2*chunk:
		// The decoder may hold one chunk read before mark was set.
		b.err = errRecordTooLarge(b.lim)
	}
	if b.err != nil {
		return k, b.err
	}
	return k, err
}

func errRecordTooLarge(lim limits) error {
	return refuse(ErrRecordTooLarge, "the conversation holds a record larger than %s", sizeText(int64(lim.record))) // R-HOF-15
}

// decodeExport reads an export from r, one message at a time.
func decodeExport(r io.Reader, lim limits, c *Conversation) error {
	br := &boundReader{r: r, lim: lim}
	dec := json.NewDecoder(br)
	// value decodes the next value into v, refusing one over lim.record.
	value := func(v any) (typeErr bool, err error) {
		br.mark = dec.InputOffset()
		start := dec.InputOffset()
		err = dec.Decode(v)
		if br.err != nil {
			return false, br.err
		}
		if dec.InputOffset()-start > int64(lim.record) {
			return false, errRecordTooLarge(lim)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return true, nil
		}
		return false, err
	}
	defer func() { c.Bytes = br.n }()
	if err := delim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := tok.(string)
		switch key {
		case "info":
			var info opencodeInfo
			if _, err := value(&info); err != nil {
				return err
			}
			c.Cwd = info.Directory
		case "messages":
			if err := delim(dec, '['); err != nil {
				return err
			}
			for dec.More() {
				var m opencodeMessage
				bad, err := value(&m)
				if err != nil {
					return err
				}
				if bad {
					c.Unreadable++
					continue
				}
				c.Records = append(c.Records, opencodeRecords(m)...)
			}
			if err := delim(dec, ']'); err != nil {
				return err
			}
		default:
			var skip json.RawMessage
			if _, err := value(&skip); err != nil {
				return err
			}
		}
	}
	if err := delim(dec, '}'); err != nil {
		return err
	}
	// Whatever follows the export is read (so that the exporter is not left
	// blocked on a full pipe) and ignored, under the same total bound.
	br.trailer = true
	if _, err := io.Copy(io.Discard, br); err != nil {
		return err
	}
	return nil
}

var errNotExport = errors.New("not an opencode export")

func delim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if isRefusal(err) {
		return err
	}
	if err != nil {
		if errors.Is(err, io.EOF) {
			return errNotExport
		}
		return err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return errNotExport
	}
	return nil
}

// readOpenCode runs `opencode export <id>` once, offline, under the
// profile's environment, with a deadline, and reads its output as it
// streams (R-HOF-6).
func readOpenCode(ctx context.Context, src Source, lim limits) (Conversation, error) {
	if !openCodeID.MatchString(src.ConversationID) {
		return Conversation{}, refuse(ErrBadSource, "%q is not an OpenCode session id (ses_…)", src.ConversationID)
	}
	bin, err := openCodeBin(src)
	if err != nil {
		return Conversation{}, err
	}
	env, home := exportEnv(src)
	if home == "" || !filepath.IsAbs(home) {
		return Conversation{}, refuse(ErrBadSource, "the profile environment has no absolute HOME")
	}
	if err := ensureNpmrc(home); err != nil {
		return Conversation{}, err
	}
	timeout := src.Timeout
	if timeout <= 0 {
		timeout = DefaultExportTimeout
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "export", src.ConversationID)
	cmd.Env = env
	cmd.Dir = home
	cmd.Stdin = nil
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The whole process group goes: the launcher may have children.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	stderr := &tailBuffer{max: 4 << 10}
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Conversation{}, err
	}
	if err := cmd.Start(); err != nil {
		if parent.Err() != nil {
			return Conversation{}, parent.Err()
		}
		return Conversation{}, refuse(ErrExportFailed, "cannot start %s: %v", bin, err)
	}
	c := Conversation{Tool: ToolOpenCode, ID: src.ConversationID}
	decErr := decodeExport(out, lim, &c)
	if decErr != nil {
		// Stop it at once: the rest of its output is not wanted.
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_, _ = io.Copy(io.Discard, io.LimitReader(out, 1<<20))
	}
	waitErr := cmd.Wait()
	// exited: it ended by itself with a status (not by our kill or the
	// deadline's), so its status and stderr say what went wrong.
	var ee *exec.ExitError
	exited := errors.As(waitErr, &ee) && ee.ExitCode() >= 0
	switch {
	case parent.Err() != nil:
		return Conversation{}, parent.Err()
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return Conversation{}, refuse(ErrExportTimeout, "opencode export %s did not finish within %v", src.ConversationID, timeout)
	case isRefusal(decErr):
		return Conversation{}, decErr
	case exited:
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, "Session not found") {
			return Conversation{}, refuse(ErrConversationUnavailable, "OpenCode has no session %s in this profile", src.ConversationID)
		}
		return Conversation{}, refuse(ErrExportFailed, "opencode export %s: %v: %s", src.ConversationID, waitErr, lastLine(msg))
	case errors.Is(decErr, errNotExport) && c.Bytes == 0 && waitErr == nil:
		// Exit 0 with nothing on stdout: no such session (real-clis.md §4).
		return Conversation{}, refuse(ErrConversationUnavailable, "opencode export printed nothing for %s", src.ConversationID)
	case decErr != nil:
		return Conversation{}, refuse(ErrExportFailed, "opencode export %s printed something that is not an export: %v", src.ConversationID, decErr)
	case waitErr != nil:
		return Conversation{}, refuse(ErrExportFailed, "opencode export %s: %v", src.ConversationID, waitErr)
	}
	c.finish()
	return c, nil
}

func isRefusal(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// openCodeBin is Source.OpenCodeBin, or opencode on the profile's PATH.
func openCodeBin(src Source) (string, error) {
	if src.OpenCodeBin != "" {
		if !filepath.IsAbs(src.OpenCodeBin) {
			return "", refuse(ErrBadSource, "the opencode binary %q is not an absolute path", src.OpenCodeBin)
		}
		return src.OpenCodeBin, nil
	}
	for _, kv := range src.Env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			for _, dir := range filepath.SplitList(v) {
				p := filepath.Join(dir, "opencode")
				if filepath.IsAbs(p) && unix.Access(p, unix.X_OK) == nil {
					return p, nil
				}
			}
		}
	}
	return "", refuse(ErrBadSource, "no opencode binary: set Source.OpenCodeBin or put opencode on the profile's PATH")
}

// exportEnv is the profile's environment with OpenCode kept offline
// (real-clis.md §4, §6.2), and its HOME.
func exportEnv(src Source) ([]string, string) {
	forced := map[string]string{"OPENCODE_DISABLE_MODELS_FETCH": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1"}
	var env []string
	home := src.Home
	hasRegistry := false
	for _, kv := range src.Env {
		k, v, _ := strings.Cut(kv, "=")
		if _, ok := forced[k]; ok {
			continue
		}
		if k == "HOME" {
			home = v
		}
		if strings.EqualFold(k, "npm_config_registry") {
			hasRegistry = true
		}
		env = append(env, kv)
	}
	if !hasEnv(src.Env, "HOME") && home != "" {
		env = append(env, "HOME="+home)
	}
	for _, k := range []string{"OPENCODE_DISABLE_MODELS_FETCH", "OPENCODE_DISABLE_AUTOUPDATE"} {
		env = append(env, k+"="+forced[k])
	}
	if !hasRegistry {
		env = append(env, "NPM_CONFIG_REGISTRY="+offlineRegistry)
	}
	return env, home
}

func hasEnv(env []string, key string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}

// ensureNpmrc writes <home>/.npmrc pointing npm at offlineRegistry when the
// profile has none (real-clis.md §4: with it, OpenCode makes only loopback
// connections). An existing .npmrc is the profile owner's and is left alone.
func ensureNpmrc(home string) error {
	fd, err := unix.Open(filepath.Join(home, ".npmrc"), unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if errors.Is(err, unix.EEXIST) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "create", Path: filepath.Join(home, ".npmrc"), Err: err}
	}
	f := os.NewFile(uintptr(fd), filepath.Join(home, ".npmrc"))
	_, werr := f.WriteString("registry=" + offlineRegistry + "\n")
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	return werr
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.ToValidUTF8(t.b, []byte("\uFFFD")))
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	out, _ := clip(s, 300)
	return out
}
