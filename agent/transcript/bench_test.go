package transcript

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// benchTranscript writes a Claude Code transcript of about size bytes in a
// fresh home, turn after turn in the shape of the real ones (real-clis.md
// §1.3): queue operations, the prompt, attachments, an API request blob,
// assistant text, a Bash call and its result with output, a final text.
func benchTranscript(b *testing.B, size int64) Source {
	b.Helper()
	home := b.TempDir()
	cwd := "/nonexistent/olivares/bench"
	sid := "bbbbbbbb-cccc-4ddd-8eee-ffffffffffff"
	dir := filepath.Join(home, ".claude", "projects", ClaudeSlug(cwd))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, sid+".jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	at := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	var written int64
	put := func(r map[string]any) {
		at = at.Add(time.Second)
		r["timestamp"] = at.Format(time.RFC3339Nano)
		r["sessionId"], r["cwd"], r["version"] = sid, cwd, "2.1.328"
		line, _ := json.Marshal(r)
		n, _ := w.Write(append(line, '\n'))
		written += int64(n)
	}
	words := strings.Fields("the parser drops a token when the lexer sees a comment at the end of a file so we look at the state machine and fix the transition then run the tests again")
	text := func(n, seed int) string {
		var sb strings.Builder
		for i := 0; sb.Len() < n; i++ {
			sb.WriteString(words[(seed+i)%len(words)])
			if i%13 == 12 {
				sb.WriteString("\n")
			} else {
				sb.WriteByte(' ')
			}
		}
		return sb.String()
	}
	for turn := 0; written < size; turn++ {
		prompt := fmt.Sprintf("turn %d: %s", turn, text(200, turn))
		put(map[string]any{"type": "queue-operation", "operation": "enqueue", "content": prompt})
		put(map[string]any{"type": "user", "isSidechain": false, "promptSource": "sdk", "message": map[string]any{"role": "user", "content": prompt}})
		for _, kind := range []string{"environment", "date", "skill_listing"} {
			put(map[string]any{"type": "attachment", "attachment": map[string]any{"type": kind, "content": text(300, turn)}})
		}
		put(map[string]any{"type": "api-request-blob", "hash": fmt.Sprint(turn), "message": map[string]any{"role": "system", "content": []any{map[string]any{"type": "text", "text": text(6000, turn)}}}})
		mid := fmt.Sprintf("msg_%d", turn)
		put(map[string]any{"type": "assistant", "isSidechain": false, "message": map[string]any{"id": mid, "role": "assistant", "model": "claude-opus-5-5",
			"content": []any{map[string]any{"type": "text", "text": text(800, turn+1)}}, "usage": map[string]any{"input_tokens": 100, "cache_read_input_tokens": 9000}}})
		tool := fmt.Sprintf("toolu_%d", turn)
		put(map[string]any{"type": "assistant", "isSidechain": false, "message": map[string]any{"id": mid, "role": "assistant", "model": "claude-opus-5-5",
			"content": []any{map[string]any{"type": "tool_use", "id": tool, "name": "Bash", "input": map[string]any{"command": "go test ./...", "description": "Run the tests"}}}}})
		out := text(2500, turn+2)
		put(map[string]any{"type": "user", "isSidechain": false, "message": map[string]any{"role": "user", "content": []any{map[string]any{"type": "tool_result", "tool_use_id": tool, "content": out}}},
			"toolUseResult": map[string]any{"stdout": out, "stderr": "", "interrupted": false}})
		put(map[string]any{"type": "assistant", "isSidechain": false, "message": map[string]any{"id": mid + "b", "role": "assistant", "model": "claude-opus-5-5",
			"content": []any{map[string]any{"type": "text", "text": text(600, turn+3)}}}})
		put(map[string]any{"type": "last-prompt", "lastPrompt": prompt})
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return Source{Tool: ToolClaude, Home: home, ConversationID: sid, Cwd: cwd}
}

// p50 is the median of ds.
func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// pageQueries are the two pages the benchmark asks for: the default page
// (the person's messages, 50, oldest first) and a text=1 page of 50 of all
// messages, newest first (copying a conversation from its end).
var pageQueries = []struct {
	name string
	q    MessagesQuery
}{
	{"page", MessagesQuery{Role: RoleUser, Limit: 50}},
	{"text", MessagesQuery{Role: RoleAll, Order: OrderDesc, Limit: 50, Text: true}},
}

// BenchmarkMessagesPage measures a messages page on a 1 MiB and on a
// 50 MiB transcript in the same run, with the index warm (later
// requests), and reports the p50 of each and their ratio (the issue's
// target: at most 4×). Run: go test -run ^$ -bench MessagesPage ./agent/transcript
func BenchmarkMessagesPage(b *testing.B) {
	small, large := benchTranscript(b, 1<<20), benchTranscript(b, 50<<20)
	c := NewCache(0, 0)
	for _, src := range []Source{small, large} {
		if _, err := c.Messages(src, DefaultMessagesQuery()); err != nil { // index once
			b.Fatal(err)
		}
	}
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for b.Loop() {
		for _, pq := range pageQueries {
			for _, sz := range []struct {
				name string
				src  Source
			}{{"1MiB", small}, {"50MiB", large}} {
				start := time.Now()
				p, err := c.Messages(sz.src, pq.q)
				times[pq.name+"-"+sz.name] = append(times[pq.name+"-"+sz.name], time.Since(start))
				if err != nil || len(p.Items) != 50 {
					b.Fatalf("%s %s: %d items, %v", pq.name, sz.name, len(p.Items), err)
				}
			}
		}
	}
	b.StopTimer()
	for _, pq := range pageQueries {
		s, l := p50(times[pq.name+"-1MiB"]), p50(times[pq.name+"-50MiB"])
		b.ReportMetric(float64(s.Microseconds()), "warm-"+pq.name+"-1MiB-p50-µs")
		b.ReportMetric(float64(l.Microseconds()), "warm-"+pq.name+"-50MiB-p50-µs")
		b.ReportMetric(float64(l)/float64(s), "warm-"+pq.name+"-ratio")
	}
	b.ReportMetric(0, "ns/op") // each op is four requests; the metrics above are the result
}

// BenchmarkMessagesPageCold is the first request for a transcript (a new
// cache: the whole file is indexed), on 1 MiB and 50 MiB in the same run.
// It grows with the file; it is reported apart from the warm figures.
func BenchmarkMessagesPageCold(b *testing.B) {
	small, large := benchTranscript(b, 1<<20), benchTranscript(b, 50<<20)
	times := map[string][]time.Duration{}
	b.ResetTimer()
	for b.Loop() {
		for _, pq := range pageQueries {
			for _, sz := range []struct {
				name string
				src  Source
			}{{"1MiB", small}, {"50MiB", large}} {
				c := NewCache(0, 0)
				start := time.Now()
				p, err := c.Messages(sz.src, pq.q)
				times[pq.name+"-"+sz.name] = append(times[pq.name+"-"+sz.name], time.Since(start))
				if err != nil || len(p.Items) != 50 {
					b.Fatalf("%s %s: %d items, %v", pq.name, sz.name, len(p.Items), err)
				}
			}
		}
	}
	b.StopTimer()
	for _, pq := range pageQueries {
		s, l := p50(times[pq.name+"-1MiB"]), p50(times[pq.name+"-50MiB"])
		b.ReportMetric(float64(s.Microseconds()), "cold-"+pq.name+"-1MiB-p50-µs")
		b.ReportMetric(float64(l.Microseconds()), "cold-"+pq.name+"-50MiB-p50-µs")
		b.ReportMetric(float64(l)/float64(s), "cold-"+pq.name+"-ratio")
	}
	b.ReportMetric(0, "ns/op")
}
