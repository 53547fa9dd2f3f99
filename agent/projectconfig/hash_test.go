package projectconfig

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

var hashBase = map[string]string{
	".claude/settings.json": `{"model": "opus", "hooks": {"Stop": "./s.sh"}, "env": {"DEBUG": "1", "HTTPS_PROXY": "http://u:p1@proxy:1"}}`,
	".codex/config.toml":    "model = \"a\"\nnotify = [\"x\"]\n[profiles.p]\nmodel = \"b\"\n",
	".env":                  "HOME=/tmp\nPATH=/repo/bin\n",
}

func with(edits map[string]string) map[string]string {
	m := map[string]string{}
	for k, v := range hashBase {
		m[k] = v
	}
	for k, v := range edits {
		if v == "" {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	return m
}

// TestHashStability: R-PCS-13. Unflagged changes keep the hash; a changed
// character of a flagged value, an added or removed flagged key, or a
// changed masked password all change it.
func TestHashStability(t *testing.T) {
	t.Parallel()
	base := mustScan(t, writeRepo(t, hashBase))
	if base.SHA256 == "" {
		t.Fatal("base repository flags nothing")
	}
	tests := []struct {
		name  string
		edits map[string]string
		same  bool
	}{
		{"unflagged TOML key changed", map[string]string{".codex/config.toml": "model = \"z\"\nnotify = [\"x\"]\n[profiles.p]\nmodel = \"q\"\n"}, true},
		{"unflagged JSON key and unlisted env changed", map[string]string{".claude/settings.json": `{"model": "sonnet", "hooks": {"Stop": "./s.sh"}, "env": {"DEBUG": "0", "HTTPS_PROXY": "http://u:p1@proxy:1"}}`}, true},
		{"reformatted and reordered", map[string]string{".claude/settings.json": "{\n  \"env\": {\"HTTPS_PROXY\": \"http://u:p1@proxy:1\", \"DEBUG\": \"1\"},\n  \"hooks\": { \"Stop\" : \"./s.sh\" },\n  \"model\": \"opus\"\n}\n"}, true},
		{"unlisted .env entry added", map[string]string{".env": "HOME=/tmp\nPATH=/repo/bin\nLANG=C\n# note\n"}, true},
		{"file flagging nothing added", map[string]string{".gemini/settings.json": `{"theme": "dark"}`}, true},
		{"empty flagged value added", map[string]string{".mcp.json": `{"mcpServers": {}}`}, true},

		{"one character of a flagged value", map[string]string{".codex/config.toml": "model = \"a\"\nnotify = [\"y\"]\n[profiles.p]\nmodel = \"b\"\n"}, false},
		{"flagged key added", map[string]string{".codex/config.toml": hashBase[".codex/config.toml"] + "openai_base_url = \"http://x\"\n"}, false},
		{"flagged key added under a profile", map[string]string{".codex/config.toml": hashBase[".codex/config.toml"] + "notify = [\"x\"]\n"}, false},
		{"flagged key removed", map[string]string{".claude/settings.json": `{"model": "opus", "env": {"DEBUG": "1", "HTTPS_PROXY": "http://u:p1@proxy:1"}}`}, false},
		{"flagged file removed", map[string]string{".env": ""}, false},
		{"masked password changed", map[string]string{".claude/settings.json": `{"model": "opus", "hooks": {"Stop": "./s.sh"}, "env": {"DEBUG": "1", "HTTPS_PROXY": "http://u:p2@proxy:1"}}`}, false},
		{"flagged value's type changed", map[string]string{".codex/config.toml": "model = \"a\"\nnotify = \"x\"\n[profiles.p]\nmodel = \"b\"\n"}, false},
		{"same key moved to another file", map[string]string{".env": "", ".gemini/.env": "PATH=/repo/bin\n"}, false},
		{"flagged file made unreadable", map[string]string{".env": "PATH=/repo/bin\nbroken line\n"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mustScan(t, writeRepo(t, with(tt.edits)))
			if same := got.SHA256 == base.SHA256; same != tt.same {
				t.Errorf("hash unchanged: got %v, want %v (%s vs %s)", same, tt.same, got.SHA256, base.SHA256)
			}
		})
	}
}

// TestHashMaskedPasswordOutputSame: the output hides the change the hash
// sees (R-PCS-21, R-PCS-25, Q-31).
func TestHashMaskedPasswordOutputSame(t *testing.T) {
	t.Parallel()
	a := mustScan(t, writeRepo(t, map[string]string{".env": "HTTPS_PROXY=http://u:one@p\n"}))
	b := mustScan(t, writeRepo(t, map[string]string{".env": "HTTPS_PROXY=http://u:two@p\n"}))
	if !bytes.Equal(a.Files[0].Keys[0].Value, b.Files[0].Keys[0].Value) {
		t.Errorf("output: got %s and %s, want the same masked value", a.Files[0].Keys[0].Value, b.Files[0].Keys[0].Value)
	}
	if string(a.Files[0].Keys[0].Value) != `"http://u:***@p"` {
		t.Errorf("output: got %s, want %s", a.Files[0].Keys[0].Value, `"http://u:***@p"`)
	}
	if a.SHA256 == b.SHA256 {
		t.Errorf("hash: got the same %v for different passwords, want different", a.SHA256)
	}
}

// TestHashUnreadableContent: an unreadable file is hashed by its content
// (R-PCS-8, R-PCS-21): one byte more in an oversized file, or another link
// target, changes the hash.
func TestHashUnreadableContent(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte("x"), MaxFileSize+1)
	a := mustScan(t, writeRepo(t, map[string]string{".mcp.json": string(big)}))
	big[MaxFileSize] = 'y'
	b := mustScan(t, writeRepo(t, map[string]string{".mcp.json": string(big)}))
	if a.SHA256 == b.SHA256 || a.Files[0].Unreadable != ReasonTooLarge {
		t.Errorf("oversized: got %v/%v (%s), want different hashes", a.SHA256, b.SHA256, a.Files[0].Unreadable)
	}
	link := func(target string) string {
		dir := t.TempDir()
		if err := os.Symlink(target, filepath.Join(dir, ".env")); err != nil {
			t.Fatal(err)
		}
		return mustScan(t, dir).SHA256
	}
	a1, a2, b1 := link("a"), link("a"), link("b")
	if a1 == b1 || a1 != a2 {
		t.Error("symlink: got a hash that does not follow the link target text")
	}
}

// TestHashStreamByHand writes the R-PCS-21 stream out for a repository
// with an unreadable file and TOML values JSON cannot hold, and checks the
// hash against it.
func TestHashStreamByHand(t *testing.T) {
	t.Parallel()
	dir := writeRepo(t, map[string]string{
		".codex/config.toml": "notify = [\"x\"]\n[otel]\nratio = 1.0\nwhen = 1979-05-27\nn = nan\n",
		".env":               "no_proxy=*\nhttp_proxy=http://a:b@p\n",
	})
	if err := os.Symlink("elsewhere.json", filepath.Join(dir, ".mcp.json")); err != nil {
		t.Fatal(err)
	}
	target := sha256.Sum256([]byte("elsewhere.json"))
	stream := ".mcp.json\x00!unreadable\x00symlink\x00" + hex.EncodeToString(target[:]) + "\n" +
		".codex/config.toml\x00notify\x00[\"x\"]\n" +
		".codex/config.toml\x00otel\x00{\"n\":nan,\"ratio\":1.0,\"when\":1979-05-27}\n" +
		".env\x00http_proxy\x00\"http://a:b@p\"\n"
	want := sha256.Sum256([]byte(stream))
	if got := mustScan(t, dir).SHA256; got != hex.EncodeToString(want[:]) {
		t.Errorf("sha256: got %v, want %v", got, hex.EncodeToString(want[:]))
	}
}
