package codexsup

import (
	"bufio"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/proto"
)

// BenchmarkTurnsPage reads one 4 MiB transcript page through Service.Turns
// (the app-server's pipe, the connection, the page written around Codex's
// bytes) and, in the same run, its baseline: the same line read through the
// same kind of pipe with nothing done to it. x_raw_pipe is ours / baseline.
func BenchmarkTurnsPage(b *testing.B) {
	raw := rawTurns(20, 200<<10)
	line := append(raw["thread/turns/list"](1), '\n')
	f := &fakeServer{raw: raw}
	s, _, _ := newTestService(b, f)
	c := ctx(b)
	if _, _, err := s.Turns(c, proto.CodexTurnsList{ThreadID: uuid(1)}); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if page, _, err := s.Turns(c, proto.CodexTurnsList{ThreadID: uuid(1)}); err != nil || len(page) < len(line)-200 {
			b.Fatal(err)
		}
	}
	ours := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for range b.N {
		pr, pw := io.Pipe()
		go func() { pw.Write(line); pw.Close() }()
		br := bufio.NewReaderSize(pr, 256<<10)
		var got []byte
		for {
			chunk, err := br.ReadSlice('\n')
			got = append(got, chunk...)
			if err != bufio.ErrBufferFull {
				break
			}
		}
		if len(got) != len(line) {
			b.Fatal("short read")
		}
	}
	b.ReportMetric(float64(ours)/float64(time.Since(start)), "x_raw_pipe")
}

// BenchmarkPageAssembly writes a 4 MiB page around Codex's bytes, beside
// the baseline of re-encoding it with encoding/json (which validates and
// compacts every byte again). x_reencode is ours / baseline.
func BenchmarkPageAssembly(b *testing.B) {
	line := rawTurns(20, 200<<10)["thread/turns/list"](1)
	var env struct {
		Result struct {
			Data json.RawMessage `json:"data"`
		} `json:"result"`
	}
	if err := json.Unmarshal(line, &env); err != nil {
		b.Fatal(err)
	}
	turns := env.Result.Data
	b.SetBytes(int64(len(turns)))
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if p := assemblePage(apitypes.CodexTurnsPage{Host: "node-1", ThreadID: uuid(1), NextCursor: "n"}, turns); len(p) < len(turns) {
			b.Fatal("short page")
		}
	}
	ours := time.Since(start)
	b.StopTimer()
	start = time.Now()
	for range b.N {
		if p, err := json.Marshal(apitypes.CodexTurnsPage{Host: "node-1", ThreadID: uuid(1), Turns: turns, NextCursor: "n"}); err != nil || len(p) < len(turns) {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(ours)/float64(time.Since(start)), "x_reencode")
}
