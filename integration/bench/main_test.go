package bench

import (
	"os"
	"testing"

	"github.com/olivares-dev/olivares/integration"
)

// TestMain removes the binaries TestRunsReport builds (integration.Binaries).
func TestMain(m *testing.M) {
	code := m.Run()
	integration.RemoveBinaries()
	os.Exit(code)
}
