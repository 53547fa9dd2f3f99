package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The CLI imports no agent package (issue 17): what it shares with the
// agent lives in shared/.
func TestNoAgentImports(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list the imports with")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/olivares-dev/olivares/agent/") {
			t.Errorf("the CLI imports %s", p)
		}
	}
}
