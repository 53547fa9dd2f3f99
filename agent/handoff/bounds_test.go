package handoff

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestConversationTooLarge (R-HOF-15): a conversation file over 256 MiB is
// refused from its size, before it is read: a sparse file of 256 MiB + 1
// byte, for each file reader (the Gemini log after its header).
func TestConversationTooLarge(t *testing.T) {
	t.Parallel()
	for _, tool := range fileTools {
		head := ""
		if tool == ToolGemini {
			head = geminiHeader + "\n"
		}
		src, path := homeWith(t, tool, []byte(head))
		if err := os.Truncate(path, MaxConversationBytes+1); err != nil {
			t.Fatal(err)
		}
		_, err := Read(context.Background(), src)
		wantErr(t, tool, err, ErrConversationTooLarge)
		if err != nil && !strings.Contains(err.Error(), "256 MiB") {
			t.Errorf("%s: message %q does not name the bound", tool, err)
		}
	}
}

// TestRecordTooLarge (R-HOF-15): one line over 32 MiB is refused while it
// streams, in a file under 256 MiB, before any parse: in the middle (Claude
// Code), last with its newline (Codex), last and cut off (Gemini CLI). The
// edges of every position are in TestBoundEdges, under lowered bounds.
func TestRecordTooLarge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tool, where string
	}{{ToolClaude, "middle"}, {ToolCodex, "last, with its newline"}, {ToolGemini, "last, unterminated"}} {
		lines := strings.SplitAfter(sample[tc.tool], "\n")
		first := lines[0]
		trailing := map[string]string{"middle": "\n" + strings.Join(lines[1:], ""), "last, with its newline": "\n", "last, unterminated": ""}[tc.where]
		src, path := homeWith(t, tc.tool, []byte(first))
		// A sparse run of MaxRecordBytes+1 zero bytes: one line, not JSON,
		// refused for its length.
		if err := os.Truncate(path, int64(len(first))+MaxRecordBytes+1); err != nil {
			t.Fatal(err)
		}
		if trailing != "" {
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteString(trailing); err != nil {
				t.Fatal(err)
			}
			f.Close()
		}
		_, err := Read(context.Background(), src)
		wantErr(t, tc.tool+", "+tc.where, err, ErrRecordTooLarge)
	}
}

// TestBoundEdges: at the bound is read, one byte over is refused, for the
// whole conversation and for one record (lowered bounds, same code).
func TestBoundEdges(t *testing.T) {
	t.Parallel()
	line := `{"type":"user","uuid":"u1","message":{"role":"user","content":"hello"}}`
	for _, tc := range []struct {
		name    string
		content string
		lim     limits
		want    *Error
	}{
		{"record at the bound", line + "\n", limits{total: 1 << 20, record: len(line)}, nil},
		{"record one over, in the middle", line + "\n" + line + "x\n" + line + "\n", limits{total: 1 << 20, record: len(line)}, ErrRecordTooLarge},
		{"record at the bound, unterminated", line, limits{total: 1 << 20, record: len(line)}, nil},
		{"record one over", line + "\n", limits{total: 1 << 20, record: len(line) - 1}, ErrRecordTooLarge},
		{"record one over, unterminated", line, limits{total: 1 << 20, record: len(line) - 1}, ErrRecordTooLarge},
		{"file at the bound", line + "\n", limits{total: int64(len(line) + 1), record: 1 << 20}, nil},
		{"file one over", line + "\n", limits{total: int64(len(line)), record: 1 << 20}, ErrConversationTooLarge},
	} {
		src, _ := homeWith(t, ToolClaude, []byte(tc.content))
		src.lim = &tc.lim
		c, err := Read(context.Background(), src)
		if tc.want == nil {
			if err != nil || len(c.Records) != 1 {
				t.Errorf("%s: %v, %d records; want the record", tc.name, err, len(c.Records))
			}
			continue
		}
		wantErr(t, tc.name, err, tc.want)
	}
	// A file that grows past the bound while it is read is refused too.
	grown := strings.Repeat(line+"\n", 10)
	_, _, err := readLines(context.Background(), strings.NewReader(grown), limits{total: int64(len(grown) - 1), record: 1 << 20}, func([]byte) bool { return true })
	wantErr(t, "stream over the bound", err, ErrConversationTooLarge)
}

// TestOpenCodeBounds (R-HOF-15): the export is refused once its output
// passes the bound or one exported message does, as it streams: the stand-in
// prints forever, and is stopped.
func TestOpenCodeBounds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, script string
		lim          limits
		want         *Error
	}{
		{"endless messages", `printf '{"info":{},"messages":['; exec yes '{"info":{"role":"user"},"parts":[]},'`,
			limits{total: 4 << 20, record: 1 << 20}, ErrConversationTooLarge},
		{"endless message", `printf '{"info":{},"messages":[{"info":{"role":"user"},"parts":[{"type":"text","text":"'; yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | exec tr -d '\n'`,
			limits{total: 64 << 20, record: 1 << 20}, ErrRecordTooLarge},
		{"endless info", `printf '{"info":{"title":"'; yes aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa | exec tr -d '\n'`,
			limits{total: 64 << 20, record: 1 << 20}, ErrRecordTooLarge},
		{"endless unknown key", `printf '{"other":['; exec yes '1,'`,
			limits{total: 64 << 20, record: 1 << 20}, ErrRecordTooLarge},
		{"endless output after the export", `printf '{"info":{},"messages":[]}'; exec yes`,
			limits{total: 4 << 20, record: 1 << 20}, ErrConversationTooLarge},
		{"output after the export", `printf '{"info":{},"messages":[{"info":{"role":"user"},"parts":[{"type":"text","text":"hi"}]}]}'; exec head -c 3000000 /dev/zero`,
			limits{total: 4 << 20, record: 1 << 20}, nil},
	} {
		home := t.TempDir()
		src := Source{Tool: ToolOpenCode, Home: home, ConversationID: "ses_x", OpenCodeBin: stubOpenCode(t, tc.script),
			Env: []string{"PATH=/usr/bin:/bin"}, lim: &tc.lim, Timeout: time.Minute}
		c, err := Read(context.Background(), src)
		if tc.want == nil {
			if err != nil || len(c.Records) != 1 {
				t.Errorf("%s: %v, %d records; want the export read and the rest ignored", tc.name, err, len(c.Records))
			}
			continue
		}
		wantErr(t, tc.name, err, tc.want)
	}
}

// TestOpenCodeRealRecordBound: the real 32 MiB bound on an exported message
// that never ends; it is refused after at most 32 MiB and two read chunks.
func TestOpenCodeRealRecordBound(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("scans 32 MiB; -short leaves it out")
	}
	var c Conversation
	r := &countingReader{r: io.MultiReader(strings.NewReader(`{"info":{},"messages":[{"info":{"role":"user"},"parts":[{"type":"text","text":"`), endless('a'))}
	err := decodeExport(r, defaultLimits, &c)
	wantErr(t, "endless message", err, ErrRecordTooLarge)
	if r.n > MaxRecordBytes+4*chunk {
		t.Errorf("read %d bytes before refusing, want at most %d", r.n, MaxRecordBytes+4*chunk)
	}
}

// TestOpenCodeBoundAligned: reads that always end on a value boundary (as
// GNU yes writes) still hit the bound: json.Decoder drops a read error that
// comes with a complete value, so the refusal must stick.
func TestOpenCodeBoundAligned(t *testing.T) {
	t.Parallel()
	var c Conversation
	r := io.MultiReader(strings.NewReader(`{"info":{},"messages":[`),
		io.LimitReader(aligned(`{"info":{"role":"user"},"parts":[{"type":"text","text":"x"}]},`), 8<<20))
	err := decodeExport(r, limits{total: 1 << 20, record: 1 << 10}, &c)
	wantErr(t, "aligned endless messages", err, ErrConversationTooLarge)
	if c.Bytes > 1<<20+chunk {
		t.Errorf("read %d bytes, want the refusal right after 1 MiB", c.Bytes)
	}
}

// aligned returns s once, whole, at every Read (the decoder always asks
// for more than that).
type aligned string

func (a aligned) Read(p []byte) (int, error) {
	return copy(p, a), nil
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	k, err := c.r.Read(p)
	c.n += int64(k)
	return k, err
}

// endless is an infinite stream of b.
type endless byte

func (e endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(e)
	}
	return len(p), nil
}

// TestLinkRefusals: a conversation is never read through a symlink,
// nor from a hard-linked or special file; the profile home itself may be
// reached through a symlink (it is the operator's path).
func TestLinkRefusals(t *testing.T) {
	t.Parallel()
	for _, tool := range fileTools {
		// The conversation file is a symlink to a real copy.
		src, path := homeWith(t, tool, []byte(sample[tool]))
		real := path + ".real"
		mustRename(t, path, real)
		mustSymlink(t, real, path)
		_, err := Read(context.Background(), src)
		wantErr(t, tool+": symlinked file", err, ErrNotRegularFile)

		// A second name for the file.
		src, path = homeWith(t, tool, []byte(sample[tool]))
		if err := os.Link(path, path+".other"); err != nil {
			t.Fatal(err)
		}
		_, err = Read(context.Background(), src)
		wantErr(t, tool+": hard link", err, ErrNotRegularFile)

		// A FIFO: refused without blocking.
		src, path = homeWith(t, tool, nil)
		os.Remove(path)
		if err := syscall.Mkfifo(path, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err = Read(context.Background(), src)
		wantErr(t, tool+": FIFO", err, ErrNotRegularFile)

		// A folder named like the conversation.
		src, path = homeWith(t, tool, nil)
		os.Remove(path)
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err = Read(context.Background(), src)
		wantErr(t, tool+": folder", err, ErrNotRegularFile)

		// The tool's own folder (.claude, .codex, .gemini) is a symlink.
		src, _ = homeWith(t, tool, []byte(sample[tool]))
		top := src.Home + "/" + strings.SplitN(layout(tool), "/", 2)[0]
		mustRename(t, top, top+".real")
		mustSymlink(t, top+".real", top)
		_, err = Read(context.Background(), src)
		wantErr(t, tool+": symlinked tool folder", err, ErrNotRegularFile)

		// The home is reached through a symlink: allowed.
		src, _ = homeWith(t, tool, []byte(sample[tool]))
		link := t.TempDir() + "/home-link"
		mustSymlink(t, src.Home, link)
		src.Home = link
		if c := readT(t, src); len(c.Records) != len(sampleSaid[tool]) {
			t.Errorf("%s: home through a symlink: %d records", tool, len(c.Records))
		}
	}
	// Claude: the project folder of the cwd is a symlink.
	src, path := homeWith(t, ToolClaude, []byte(sample[ToolClaude]))
	dir := path[:strings.LastIndex(path, "/")]
	elsewhere := t.TempDir() + "/project"
	mustRename(t, dir, elsewhere)
	mustSymlink(t, elsewhere, dir)
	_, err := Read(context.Background(), src)
	wantErr(t, "claude: symlinked project folder", err, ErrNotRegularFile)
	// Without the cwd, a symlinked project folder is never entered.
	src.Cwd = ""
	_, err = Read(context.Background(), src)
	wantErr(t, "claude: symlinked project folder, no cwd", err, ErrConversationUnavailable)

	// Gemini: projects.json is a symlink.
	src, _ = homeWith(t, ToolGemini, []byte(sample[ToolGemini]))
	pj := src.Home + "/.gemini/projects.json"
	mustRename(t, pj, pj+".real")
	mustSymlink(t, pj+".real", pj)
	_, err = Read(context.Background(), src)
	wantErr(t, "gemini: symlinked projects.json", err, ErrNotRegularFile)
}

func mustRename(t *testing.T, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestLineReader: lines, their endings, and blank lines.
func TestLineReader(t *testing.T) {
	t.Parallel()
	lr := newLineReader(strings.NewReader("a\r\nbb\n\nccc"), limits{total: 100, record: 3})
	type line struct {
		s    string
		term bool
	}
	var got []line
	for {
		b, term, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, line{string(b), term})
	}
	want := []line{{"a", true}, {"bb", true}, {"", true}, {"ccc", false}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d: got %v, want %v", i, got[i], want[i])
		}
	}
	// A line longer than the reader's buffer is joined.
	long := bytes.Repeat([]byte("x"), 200<<10)
	lr = newLineReader(bytes.NewReader(append(long, '\n')), defaultLimits)
	if b, term, err := lr.next(); err != nil || !term || !bytes.Equal(b, long) {
		t.Errorf("long line: %d bytes, %t, %v", len(b), term, err)
	}
}
