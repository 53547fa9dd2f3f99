package handoff

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Transcript returns the handoff transcript of c: what WriteTranscript
// writes.
func Transcript(c Conversation) []byte {
	var b bytes.Buffer
	_ = writeTranscript(&b, c)
	return b.Bytes()
}

// TranscriptBytes is the size of the file WriteTranscript would write for
// c, computed without writing it: the preview's transcript_bytes (R-HOF-20).
func TranscriptBytes(c Conversation) int64 {
	var n countWriter
	_ = writeTranscript(&n, c)
	return int64(n)
}

// WriteTranscript writes c's transcript to path atomically: a temporary
// file in the same folder, mode 0600, synced, then renamed over path
// (R-HOF-9, R-HOF-10). The folder is made (0700) when missing. The caller
// picks a path unique to the target profile's config home; a file already
// there is replaced. It returns the size written, TranscriptBytes(c). On
// any error nothing is left at path or beside it.
func WriteTranscript(path string, c Conversation) (int64, error) {
	if !filepath.IsAbs(path) {
		return 0, fmt.Errorf("handoff: transcript path %q is not absolute", path)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return 0, err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return 0, err
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(tmp, 64<<10)
	cw := &countingTo{w: w}
	if err := writeTranscript(cw, c); err != nil {
		return 0, err
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	if err := tmp.Sync(); err != nil {
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, err
	}
	done = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return cw.n, nil
}

type countWriter int64

func (n *countWriter) Write(p []byte) (int, error) { *n += countWriter(len(p)); return len(p), nil }

type countingTo struct {
	w io.Writer
	n int64
}

func (c *countingTo) Write(p []byte) (int, error) {
	k, err := c.w.Write(p)
	c.n += int64(k)
	return k, err
}

// errWriter keeps the first write error, so that rendering reads straight.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) printf(format string, args ...any) {
	if e.err == nil {
		_, e.err = fmt.Fprintf(e.w, format, args...)
	}
}

func (e *errWriter) write(s string) {
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
	}
}

// writeTranscript renders c as Markdown. Each record is a heading and its
// text in a ~~~ fence longer than any run of ~ in the text, so that no
// message can end its block early or pass for another record.
func writeTranscript(w io.Writer, c Conversation) error {
	e := &errWriter{w: w}
	id, _ := clip(oneLine(c.ID), headingBytes)
	e.printf("# Handoff transcript: %s session %s\n\n", toolTitle(c.Tool), id)
	e.printf("- Source: %s, session %s\n", toolTitle(c.Tool), id)
	if c.Cwd != "" {
		cwd, _ := clip(oneLine(c.Cwd), 4*headingBytes)
		e.printf("- Working directory: %s\n", cwd)
	}
	e.printf("- Turns: %d\n", c.Turns)
	if c.Unreadable == 0 {
		e.write("- Unreadable records: 0 (every record of the stored conversation was read)\n")
	} else {
		what := fmt.Sprintf("%d lines or entries of the stored conversation could not be read and are left out", c.Unreadable)
		if c.Unreadable == 1 {
			what = "1 line or entry of the stored conversation could not be read and is left out"
		}
		e.printf("- Unreadable records: %d (%s)\n", c.Unreadable, what)
	}
	e.printf("\nEach message is given in full up to %s; tool calls (%s) and tool results (%s) are abbreviated.\n",
		sizeText(MaxMessageBytes), sizeText(ToolInputBytes), sizeText(ToolResultBytes))
	for _, r := range c.Records {
		e.write("\n")
		switch r.Kind {
		case KindUser:
			e.printf("## User%s\n\n", stamp(r.At))
		case KindAssistant:
			e.printf("## Assistant%s\n\n", stamp(r.At))
		case KindToolCall:
			e.printf("### Tool call: %s%s%s\n\n", nameOf(r.Tool), callID(r.CallID), stamp(r.At))
		case KindToolResult:
			state := ""
			if r.IsError {
				state = " (error)"
			}
			e.printf("### Tool result: %s%s%s\n\n", nameOf(r.Tool), callID(r.CallID), state)
		}
		fence(e, r.Text)
		if r.Clipped() {
			switch r.Kind {
			case KindUser, KindAssistant:
				e.printf("\n[Message clipped: the first %s of %s are shown.]\n", sizeText(int64(len(r.Text))), sizeText(int64(r.Size)))
			default:
				e.printf("\n[Abbreviated: %s of %s shown.]\n", sizeText(int64(len(r.Text))), sizeText(int64(r.Size)))
			}
		}
	}
	return e.err
}

func fence(e *errWriter, text string) {
	longest, run := 0, 0
	for i := 0; i < len(text); i++ {
		if text[i] == '~' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("~", max(3, longest+1))
	e.write(f + "\n")
	e.write(text)
	if !strings.HasSuffix(text, "\n") {
		e.write("\n")
	}
	e.write(f + "\n")
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return " · " + t.UTC().Format(time.RFC3339)
}

// headingBytes bounds a name or id in a heading: they come from the
// source's records and may be anything.
const headingBytes = 200

func nameOf(tool string) string {
	if tool == "" {
		return "(unnamed)"
	}
	s, _ := clip(oneLine(tool), headingBytes)
	return s
}

func callID(id string) string {
	if id == "" {
		return ""
	}
	s, _ := clip(oneLine(id), headingBytes)
	return " [" + s + "]"
}
