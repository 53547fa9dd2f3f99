package bench

import (
	"os"
	"testing"

	"github.com/olivares-dev/olivares/coordinator/store/postgres/pgtest"
	"github.com/olivares-dev/olivares/integration"
)

// TestMain removes the binaries TestRunsReport builds (integration.Binaries)
// and stops the PostgreSQL cluster TestListStoresReport starts.
func TestMain(m *testing.M) {
	code := pgtest.Main(m)
	integration.RemoveBinaries()
	os.Exit(code)
}
