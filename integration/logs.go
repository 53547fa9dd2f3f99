package integration

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/olivares-dev/olivares/shared/logging"
)

// logCapture keeps every line the env's in-process daemons log (JSON, at
// debug: the most a daemon can say), so a test can read them back
// (R-OBS-3: no secret in any line). With -v the lines go to the test log
// too.
type logCapture struct {
	t       testing.TB
	mu      sync.Mutex
	b       bytes.Buffer
	secrets []string
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.b.Write(p)
	c.mu.Unlock()
	if testing.Verbose() {
		c.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (c *logCapture) logger() *slog.Logger {
	return logging.New(c, logging.Config{Level: "debug", Format: logging.FormatJSON})
}

// NoteSecret records a secret the test made (a token, a join token, a
// sign-in link's secret, a vault value): AssertNoSecretInLogs looks for
// it in every line. The env notes the tokens and join tokens it makes.
func (e *Env) NoteSecret(s string) {
	if s == "" {
		return
	}
	e.logs.mu.Lock()
	e.logs.secrets = append(e.logs.secrets, s)
	e.logs.mu.Unlock()
}

// AssertNoSecretInLogs fails the test for every noted secret that appears
// in a log line of the env's daemons (R-OBS-3), and says how many secrets
// and lines it checked.
func (e *Env) AssertNoSecretInLogs(t testing.TB) (secrets, lines int) {
	t.Helper()
	e.logs.mu.Lock()
	ss := append([]string(nil), e.logs.secrets...)
	e.logs.mu.Unlock()
	ls := e.Logs()
	for _, s := range ss {
		for _, l := range ls {
			if strings.Contains(l, s) {
				t.Errorf("a log line holds a secret (%.8s...): %s", s, l)
			}
		}
	}
	return len(ss), len(ls)
}

// Logs is every line logged so far by the env's daemons: the coordinator,
// the in-process agents, and the output of the agent processes.
func (e *Env) Logs() []string {
	e.logs.mu.Lock()
	s := e.logs.b.String()
	e.logs.mu.Unlock()
	e.mu.Lock()
	procs := append([]*AgentProc(nil), e.procs...)
	e.mu.Unlock()
	for _, p := range procs {
		s += p.Output()
	}
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// LogRecords is Logs decoded: one map per JSON line (lines that are not
// JSON, such as a process's panic, are left out).
func (e *Env) LogRecords() []map[string]any {
	var out []map[string]any
	for _, l := range e.Logs() {
		var m map[string]any
		if json.Unmarshal([]byte(l), &m) == nil {
			out = append(out, m)
		}
	}
	return out
}
