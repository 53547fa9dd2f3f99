package projectconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

func TestScanDirErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(dir, "missing"), file} {
		if _, err := Scan(p); !errors.Is(err, ErrDir) {
			t.Errorf("Scan(%s): got %v, want ErrDir", p, err)
		}
	}
}

// TestScanNeverExecutes: R-PCS-1. Every listed file configures a program
// that would create a marker file; the scan reads them all (they are
// flagged) and the marker never appears.
func TestScanNeverExecutes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	marker := filepath.Join(dir, "executed")
	script := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch '"+marker+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	q := `"` + script + `"`
	writeFiles(t, dir, map[string]string{
		".claude/settings.json": `{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": ` + q + `}]}]},
			"apiKeyHelper": ` + q + `, "statusLine": {"type": "command", "command": ` + q + `},
			"mcpServers": {"m": {"command": ` + q + `}}, "awsAuthRefresh": ` + q + `, "otelHeadersHelper": ` + q + `,
			"env": {"BASH_ENV": ` + q + `}}`,
		".claude/settings.local.json": `{"fileSuggestion": {"type": "command", "command": ` + q + `}}`,
		".mcp.json":                   `{"mcpServers": {"m": {"command": ` + q + `}}}`,
		".codex/config.toml":          "notify = [" + q + "]\n[mcp_servers.m]\ncommand = " + q + "\n",
		".gemini/settings.json":       `{"toolDiscoveryCommand": ` + q + `, "tools": {"callCommand": ` + q + `}}`,
		".gemini/.env":                "BASH_ENV=" + script + "\n",
		".env":                        "NODE_OPTIONS=--require " + script + "\n",
	})
	rep := mustScan(t, dir)
	if len(rep.Files) != len(files) {
		t.Fatalf("flagged files: got %d, want all %d", len(rep.Files), len(files))
	}
	for _, f := range rep.Files {
		if f.Unreadable != "" || len(f.Keys) == 0 {
			t.Errorf("%s: got unreadable %q with %d keys, want read and flagged", f.Path, f.Unreadable, len(f.Keys))
		}
	}
	if _, err := os.Lstat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker after the scan: got %v, want it absent", err)
	}
}

// TestScanDoesNotFollowSymlinks: R-PCS-23. A link to a flagged file shows
// as a link, not as the target's keys; a link to a FIFO does not block.
func TestScanDoesNotFollowSymlinks(t *testing.T) {
	t.Parallel()
	dir := writeRepo(t, map[string]string{
		"real.json":             `{"mcpServers": {"m": {"command": "x"}}}`,
		"inner/settings.json":   `{"hooks": {"Stop": "x"}}`,
		"inner/.keep":           "",
		".codex/placeholder":    "",
		".gemini/settings.json": `{"theme": "x"}`,
	})
	if err := unix.Mkfifo(filepath.Join(dir, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		".mcp.json":          "real.json",
		".env":               "pipe",
		".claude":            "inner",
		".codex/config.toml": "../real.json",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	rep := mustScan(t, dir)
	want := map[string]Reason{
		".claude/settings.json":       ReasonParentSymlink,
		".claude/settings.local.json": ReasonParentSymlink,
		".mcp.json":                   ReasonSymlink,
		".codex/config.toml":          ReasonSymlink,
		".env":                        ReasonSymlink,
	}
	got := map[string]Reason{}
	for _, f := range rep.Files {
		got[f.Path] = f.Unreadable
		if len(f.Keys) != 0 {
			t.Errorf("%s: got keys %v through a link, want none", f.Path, f.Keys)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("flagged: got %v, want %v", got, want)
	}
}

// TestScanNonDirectoryParent: .claude as a plain file holds no settings;
// no tool can read .claude/settings.json, so nothing is flagged.
func TestScanNonDirectoryParent(t *testing.T) {
	t.Parallel()
	rep := mustScan(t, writeRepo(t, map[string]string{".claude": `{"hooks": {"Stop": "x"}}`}))
	if len(rep.Files) != 0 || rep.SHA256 != "" {
		t.Errorf("got %v, want nothing flagged", rep)
	}
}

func TestScanSpecialFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A unix socket path must fit sun_path (108 bytes); a long TMPDIR
	// leaves that case out.
	sock := filepath.Join(dir, ".env")
	if len(sock) < 100 {
		l, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
	} else {
		t.Logf("socket case not run: %s is too long for a socket", sock)
	}
	dev := filepath.Join(dir, ".mcp.json")
	devErr := unix.Mknod(dev, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3)))
	rep := mustScan(t, dir)
	got := map[string]Reason{}
	for _, f := range rep.Files {
		got[f.Path] = f.Unreadable
	}
	if len(sock) < 100 && got[".env"] != ReasonSocket {
		t.Errorf(".env socket: got %q, want %q", got[".env"], ReasonSocket)
	}
	if devErr != nil {
		t.Logf("device case not run: mknod: %v", devErr)
	} else if got[".mcp.json"] != ReasonDevice {
		t.Errorf(".mcp.json device: got %q, want %q", got[".mcp.json"], ReasonDevice)
	}
}

// TestScanPermissionDenied: a listed file that exists but cannot be opened
// is flagged, not skipped.
func TestScanPermissionDenied(t *testing.T) {
	t.Parallel()
	if os.Geteuid() == 0 {
		t.Skip("root reads a mode-000 file; the case needs an unprivileged user")
	}
	dir := writeRepo(t, map[string]string{".env": "PATH=/x\n"})
	if err := os.Chmod(filepath.Join(dir, ".env"), 0); err != nil {
		t.Fatal(err)
	}
	rep := mustScan(t, dir)
	if len(rep.Files) != 1 || rep.Files[0].Unreadable != ReasonReadError {
		t.Errorf("got %+v, want .env flagged %q", rep.Files, ReasonReadError)
	}
}

// TestOversizedStreamedNotBuffered: R-PCS-8. A 32 MiB file is hashed whole
// and its hash is that of every byte, yet the scan allocates far less than
// the file: it kept no more than the limit and parsed nothing. Not
// parallel, so the allocation count is this test's own.
func TestOversizedStreamedNotBuffered(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, ".mcp.json")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(`{"mcpServers": {"m": {"command": "x"}}}`); err != nil {
		t.Fatal(err)
	}
	const size = 32 << 20
	if err := f.Truncate(size); err != nil { // sparse: cheap on disk
		t.Fatal(err)
	}
	f.Close()

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	rep := mustScan(t, dir)
	runtime.ReadMemStats(&after)

	if len(rep.Files) != 1 || rep.Files[0].Unreadable != ReasonTooLarge {
		t.Fatalf("got %+v, want .mcp.json too large", rep.Files)
	}
	h := sha256.New()
	r, _ := os.Open(p)
	defer r.Close()
	io.Copy(h, r)
	if want := hex.EncodeToString(h.Sum(nil)); rep.Files[0].ContentSHA256 != want {
		t.Errorf("content sha256: got %v, want %v (the whole file)", rep.Files[0].ContentSHA256, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > MaxFileSize/2 {
		t.Errorf("allocated: got %d bytes for a %d-byte file, want under %d", alloc, size, MaxFileSize/2)
	}
}

// endless yields 'a' forever and counts what it gave.
type endless struct{ n int64 }

func (e *endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	e.n += int64(len(p))
	return len(p), nil
}

// TestReadLimited: never more than MaxFileSize+1 bytes are taken from a
// file that is not oversized by its fstat size.
func TestReadLimited(t *testing.T) {
	t.Parallel()
	r := &endless{}
	data, over, err := readLimited(r, 10)
	if err != nil || !over || len(data) != MaxFileSize+1 || r.n != MaxFileSize+1 {
		t.Errorf("got %d bytes, over %v, err %v, read %d; want %d, true, nil, %d",
			len(data), over, err, r.n, MaxFileSize+1, MaxFileSize+1)
	}
	data, over, err = readLimited(strings.NewReader("{}"), 2)
	if err != nil || over || string(data) != "{}" {
		t.Errorf("got %q, %v, %v; want {}, false, nil", data, over, err)
	}
}

// TestReadRegularGrown: a file that grew past the limit after its fstat is
// hashed whole, not parsed.
func TestReadRegularGrown(t *testing.T) {
	t.Parallel()
	content := bytes.Repeat([]byte("z"), 2*MaxFileSize)
	ld := readRegular(bytes.NewReader(content), 5)
	want := sha256.Sum256(content)
	if ld.reason != ReasonTooLarge || ld.sum != hex.EncodeToString(want[:]) || ld.data != nil {
		t.Errorf("got %q %s (%d bytes kept), want too large with the hash of all %d bytes", ld.reason, ld.sum, len(ld.data), len(content))
	}
}

func TestScanConcurrent(t *testing.T) {
	t.Parallel()
	dir := writeRepo(t, map[string]string{
		".claude/settings.json": `{"hooks": {"Stop": "x"}}`,
		".codex/config.toml":    "notify = [\"x\"]\n",
		".env":                  "HTTPS_PROXY=http://p\n",
	})
	want := mustScan(t, dir)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got, err := Scan(dir); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("concurrent scan: got %v, %v, want %v", got, err, want)
			}
		})
	}
	wg.Wait()
}
