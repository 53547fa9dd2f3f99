package fake_test

import (
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime/cliruntimetest"
	"github.com/olivares-dev/olivares/agent/drivers/fake"
)

func TestCommands(t *testing.T) {
	cliruntimetest.RunCommands(t, fake.New(), "testdata/command/*.txt")
}

func TestSessions(t *testing.T) {
	cliruntimetest.RunScripts(t, fake.New(), "testdata/session/*.txt")
}

func FuzzObserve(f *testing.F) {
	cliruntimetest.FuzzObserve(f, fake.New(), "conv-1", "testdata/session/*.txt")
}
