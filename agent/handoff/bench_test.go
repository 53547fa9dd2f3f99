package handoff

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// benchTranscript is a Claude Code transcript of turns turns, each a
// request, a tool call, its result of 4 KiB, an answer of 1 KiB and the
// bookkeeping records between them: about 9 KiB per turn.
func benchTranscript(turns int) []byte {
	var b bytes.Buffer
	result := strings.Repeat("result line of a tool\n", 190)
	answer := strings.Repeat("an answer of the model ", 45)
	for i := range turns {
		ts := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second).Format(time.RFC3339Nano)
		line := func(v any) {
			j, _ := json.Marshal(v)
			b.Write(j)
			b.WriteByte('\n')
		}
		line(map[string]any{"type": "queue-operation", "operation": "enqueue", "content": fmt.Sprintf("request %d", i)})
		line(map[string]any{"type": "user", "uuid": fmt.Sprintf("u%d", i), "timestamp": ts, "cwd": "/w/p",
			"message": map[string]any{"role": "user", "content": fmt.Sprintf("request %d: please change file %d", i, i)}})
		line(map[string]any{"type": "attachment", "attachment": map[string]any{"type": "environment", "text": strings.Repeat("e", 300)}})
		line(map[string]any{"type": "assistant", "uuid": fmt.Sprintf("a%d", i), "timestamp": ts, "message": map[string]any{"id": fmt.Sprintf("msg_%d", i),
			"role": "assistant", "content": []any{map[string]any{"type": "tool_use", "id": fmt.Sprintf("t%d", i), "name": "Edit",
				"input": map[string]any{"file_path": fmt.Sprintf("/w/p/f%d.go", i), "old_string": "a", "new_string": "b"}}}}})
		line(map[string]any{"type": "user", "uuid": fmt.Sprintf("r%d", i), "timestamp": ts, "message": map[string]any{"role": "user",
			"content": []any{map[string]any{"type": "tool_result", "tool_use_id": fmt.Sprintf("t%d", i), "content": result}}}})
		line(map[string]any{"type": "assistant", "uuid": fmt.Sprintf("b%d", i), "timestamp": ts, "message": map[string]any{"id": fmt.Sprintf("msg_%db", i),
			"role": "assistant", "content": []any{map[string]any{"type": "text", "text": answer}}}})
		line(map[string]any{"type": "cost-state", "totalCostUSD": 0.01})
	}
	return b.Bytes()
}

// scanValid is the baseline a reader cannot beat: stream the file's lines
// and check that each is JSON, keeping nothing.
func scanValid(b *testing.B, path string) {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), MaxRecordBytes+1)
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			b.Fatal("invalid line")
		}
	}
}

// BenchmarkReadClaude: Read of a 2,000-turn (about 18 MiB) Claude Code
// transcript, as a ratio to the baseline scan measured in the same run
// (x-scan-valid), with the size and the rate.
func BenchmarkReadClaude(b *testing.B) {
	content := benchTranscript(2000)
	src, path := homeWith(b, ToolClaude, content)
	ctx := context.Background()
	b.SetBytes(int64(len(content)))
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		c, err := Read(ctx, src)
		if err != nil || c.Turns != 4000 {
			b.Fatalf("Read: %d turns, %v", c.Turns, err)
		}
	}
	read := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for range b.N {
		scanValid(b, path)
	}
	base := time.Since(start)
	b.ReportMetric(float64(read)/float64(base), "x-scan-valid")
	b.ReportMetric(float64(len(content))/(1<<20), "MiB")
}

// BenchmarkTranscript: rendering the handoff transcript of the same
// conversation, as a ratio to copying its record texts into a buffer in the
// same run (x-copy-texts); TranscriptBytes as a ratio to the rendering.
func BenchmarkTranscript(b *testing.B) {
	c, err := parseWith(ToolClaude, benchTranscript(2000), defaultLimits)
	if err != nil {
		b.Fatal(err)
	}
	var buf bytes.Buffer
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		buf.Reset()
		if err := writeTranscript(&buf, c); err != nil {
			b.Fatal(err)
		}
	}
	render := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for range b.N {
		buf.Reset()
		for _, r := range c.Records {
			_, _ = io.WriteString(&buf, r.Text)
		}
	}
	copyTexts := time.Since(start)
	start = time.Now()
	for range b.N {
		if TranscriptBytes(c) == 0 {
			b.Fatal("empty")
		}
	}
	size := time.Since(start)
	b.ReportMetric(float64(render)/float64(copyTexts), "x-copy-texts")
	b.ReportMetric(float64(size)/float64(render), "size-x-render")
}
