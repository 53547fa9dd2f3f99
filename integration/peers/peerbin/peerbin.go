// Package peerbin builds the fakecli peer (integration/peers/fakecli) once
// per test binary and links it as claude, codex and grok, so that the peer
// picks its protocol from argv[0]. Driver conformance, the supervisor's tests
// and the integration harness all run it from here; a package using it
// calls Remove from its TestMain.
package peerbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var (
	once sync.Once
	dir  string
	err  error
)

// Tools are the names the peer answers to.
var Tools = []string{"claude", "codex", "grok", "gemini", "opencode"}

// Dir returns the directory holding fakecli and its claude, codex and grok
// links, building it on first use.
func Dir(t testing.TB) string {
	t.Helper()
	once.Do(build)
	if err != nil {
		t.Fatalf("build fakecli: %v", err)
	}
	return dir
}

// Remove deletes what Dir built.
func Remove() {
	if dir != "" {
		os.RemoveAll(dir)
	}
}

func build() {
	dir, err = os.MkdirTemp("", "olv-fakecli-")
	if err != nil {
		return
	}
	_, file, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(file), "..", "..", "..")
	//lint:ignore SA1019 the toolchain that built this test binary builds the peer, on the same machine
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, serr := os.Stat(gobin); serr != nil {
		gobin = "go"
	}
	cmd := exec.Command(gobin, "build", "-o", filepath.Join(dir, "fakecli"), "./integration/peers/fakecli")
	cmd.Dir = root
	if out, berr := cmd.CombinedOutput(); berr != nil {
		err = fmt.Errorf("%v: %s", berr, out)
		return
	}
	for _, k := range Tools {
		if err = os.Symlink("fakecli", filepath.Join(dir, k)); err != nil {
			return
		}
	}
}
