package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// One address or a list, strictly: a bad entry names the key.
func TestAddrs(t *testing.T) {
	tests := []struct {
		name, toml string
		want       Addrs
		err        string
	}{
		{"one", `coordinator = "a.example:7444"`, Addrs{"a.example:7444"}, ""},
		{"list", `coordinator = ["10.0.0.1:7444", "10.0.0.2:7444"]`, Addrs{"10.0.0.1:7444", "10.0.0.2:7444"}, ""},
		{"absent", ``, nil, ""},
		{"no port", `coordinator = ["a.example"]`, nil, "coordinator"},
		{"twice", `coordinator = ["a:1", "a:1"]`, nil, "listed twice"},
		{"number", `coordinator = 7444`, nil, "coordinator"},
		{"list of numbers", `coordinator = [1, 2]`, nil, "coordinator"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.toml")
			if err := os.WriteFile(path, []byte(tt.toml+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var c struct {
				Coordinator Addrs `toml:"coordinator"`
			}
			err := DecodeFile(path, &c)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want an error naming %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Coordinator, tt.want) {
				t.Fatalf("got %v, want %v", c.Coordinator, tt.want)
			}
		})
	}
}
