package projectconfig

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// everyFile is a repository carrying every listed file type, each with
// flagged and unflagged keys.
var everyFile = map[string]string{
	".claude/settings.json": `{"model": "opus", "permissions": {"allow": ["Bash(npm test)", "Read"]},
		"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./pre.sh"}]}]},
		"statusLine": {"type": "command", "command": "./status.sh"},
		"env": {"HTTPS_PROXY": "http://u:p@proxy:3128", "DEBUG": "1", "NO_PROXY": "localhost"}}`,
	".claude/settings.local.json": `{"apiKeyHelper": "./key.sh", "outputStyle": "terse"}`,
	".mcp.json":                   `{"mcpServers": {"db": {"command": "npx", "args": ["-y", "db-mcp"]}}}`,
	".codex/config.toml": "model = \"gpt\"\nnotify = [\"notify-send\"]\nopenai_base_url = \"http://127.0.0.1:1/v1\"\n" +
		"[shell_environment_policy]\nset = { PATH = \"/bin\", LANG = \"C\" }\n[mcp_servers.docs]\ncommand = \"docs\"\n" +
		"[profiles.work]\nmodel = \"o9\"\nnotify = [\"x\"]\n",
	".gemini/settings.json": `{"theme": "dark", "tools": {"discoveryCommand": "./d.sh", "exclude": ["rm"]}, "proxy": "http://p:1"}`,
	".gemini/.env":          "GEMINI_API_KEY=x\nGOOGLE_GEMINI_BASE_URL=http://g\n",
	".env":                  "# local\nexport HTTPS_PROXY=http://p\nNO_PROXY=*\nDEBUG=1\n",
}

// BenchmarkScanEveryFile is a full scan of a repository carrying every
// file type. The baseline, measured in the same run, is os.ReadFile of the
// same seven files; ns/op and allocs/op include that baseline, scan-ns/op
// and scan-allocs/op do not. The ratio is what reading them safely,
// depth-checking, decoding, selecting, masking and hashing costs over
// reading them.
func BenchmarkScanEveryFile(b *testing.B) {
	dir := writeRepo(b, everyFile)
	scanAllocs := testing.AllocsPerRun(20, func() { Scan(dir) })
	var scan, read time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		rep, err := Scan(dir)
		t1 := time.Now()
		for _, p := range Paths() {
			if _, err := os.ReadFile(filepath.Join(dir, p)); err != nil {
				b.Fatal(err)
			}
		}
		read += time.Since(t1)
		scan += t1.Sub(t0)
		if err != nil || len(rep.Files) != len(files) {
			b.Fatalf("scan: %v, %d files", err, len(rep.Files))
		}
	}
	b.ReportMetric(float64(scan)/float64(b.N), "scan-ns/op")
	b.ReportMetric(scanAllocs, "scan-allocs/op")
	b.ReportMetric(float64(scan)/float64(read), "scan/readfile")
}

// limitFile is a .claude/settings.json of exactly size bytes: real
// settings (a large unflagged allow list and a flagged hook) padded with
// spaces.
func limitFile(size int) []byte {
	var b strings.Builder
	b.WriteString(`{"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./stop.sh"}]}]}, "permissions": {"allow": [`)
	for i := 0; b.Len() < MaxFileSize-200; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"Bash(npm run task-%d)"`, i)
	}
	b.WriteString("]}}")
	return []byte(b.String() + strings.Repeat(" ", size-b.Len()))
}

// BenchmarkOversizedVsLimit scans a 1 MiB settings file (read, depth
// checked, decoded) and the same file with one more byte (over the limit:
// R-PCS-8 hashes it whole and parses nothing), and, as a baseline, takes
// sha256 of the 1 MiB + 1 byte file read with os.ReadFile. Reported:
// oversized/limit (well under 1: the oversized file is not parsed) and
// oversized/sha256 (about 1: one hash pass, nothing more).
func BenchmarkOversizedVsLimit(b *testing.B) {
	atLimit := writeRepo(b, map[string]string{".claude/settings.json": string(limitFile(MaxFileSize))})
	over := writeRepo(b, map[string]string{".claude/settings.json": string(limitFile(MaxFileSize + 1))})
	overPath := filepath.Join(over, ".claude/settings.json")
	var tLimit, tOver, tHash time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		r1, _ := Scan(atLimit)
		t1 := time.Now()
		r2, _ := Scan(over)
		t2 := time.Now()
		data, err := os.ReadFile(overPath)
		if err != nil {
			b.Fatal(err)
		}
		sha256.Sum256(data)
		t3 := time.Now()
		tLimit, tOver, tHash = tLimit+t1.Sub(t0), tOver+t2.Sub(t1), tHash+t3.Sub(t2)
		if len(r1.Files) != 1 || r1.Files[0].Unreadable != "" || len(r2.Files) != 1 || r2.Files[0].Unreadable != ReasonTooLarge {
			b.Fatalf("at limit %+v, over %+v", r1.Files, r2.Files)
		}
	}
	b.ReportMetric(float64(tLimit)/float64(b.N), "limit-ns/op")
	b.ReportMetric(float64(tOver)/float64(b.N), "oversized-ns/op")
	b.ReportMetric(float64(tOver)/float64(tLimit), "oversized/limit")
	b.ReportMetric(float64(tOver)/float64(tHash), "oversized/sha256")
}

// BenchmarkOversizedScanAlone reports the allocations of scanning the
// 1 MiB + 1 byte file by itself: constant (a 32 KiB copy buffer), not the
// file's size.
func BenchmarkOversizedScanAlone(b *testing.B) {
	for _, size := range []int{MaxFileSize + 1, 8 * MaxFileSize} {
		b.Run(fmt.Sprintf("%dB", size), func(b *testing.B) {
			dir := writeRepo(b, map[string]string{".mcp.json": strings.Repeat("x", size)})
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if r, _ := Scan(dir); len(r.Files) != 1 {
					b.Fatal(r)
				}
			}
		})
	}
}
