// Package grok is the driver of Grok Build's stdio agent, `grok agent stdio`:
// JSON-RPC 2.0, one message per line (R-TR-4).
//
// No grok binary could be measured for real-clis.md, so this driver follows
// the Agent Client Protocol (agentclientprotocol.com), which xAI documents as
// the protocol of `grok agent stdio`, in the shape real-clis.md §3 recorded
// for Gemini CLI's ACP agent: initialize, session/new (launch) or
// session/load (resume, which replays the history as session/update
// notifications before it answers, R-HW-4), session/prompt per text input,
// and the session/cancel notification to interrupt. The protocol is
// agent/drivers/internal/acp's; this package holds what is Grok's own. The
// program name, the subcommand, GROK_HOME and GROK_DISABLE_AUTOUPDATER come
// from xAI's public documentation, not from a measurement.
package grok

import (
	"path/filepath"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/internal/acp"
)

// Name is the program run when LaunchSpec.Binary is empty.
const Name = "grok"

// ProtocolVersion is the ACP version asked for in initialize.
const ProtocolVersion = acp.ProtocolVersion

// Driver is the grok driver. The zero value is ready to use.
type Driver struct{}

var _ cliruntime.Driver = Driver{}

// New returns the grok driver.
func New() Driver { return Driver{} }

// agent is `grok agent stdio` for both launch and resume: the session is
// loaded in the protocol. Grok's home (config, auth, sessions) goes under the
// profile home, and its self-updater is off: a supervised binary must not
// change under a live run. A profile may turn the updater back on.
var agent = acp.Agent{
	Tool: cliruntime.KindGrok,
	Name: Name,
	Command: cliruntime.ProtocolCommand{
		Name: Name,
		Args: []string{"agent", "stdio"},
		Vars: func(home string) []cliruntime.EnvVar {
			return []cliruntime.EnvVar{
				{Key: "GROK_HOME", Value: filepath.Join(home, ".grok")},
				{Key: "GROK_DISABLE_AUTOUPDATER", Value: "1", Overridable: true},
			}
		},
		CheckID: cliruntime.CheckOpaqueID,
	},
}

func (Driver) Kind() cliruntime.Kind { return agent.Kind() }

// LaunchTransport is stdio (R-TR-2, R-TR-4).
func (Driver) LaunchTransport() cliruntime.LaunchTransport { return agent.LaunchTransport() }

// Launch starts a new session.
func (Driver) Launch(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return agent.Launch(spec)
}

// Resume starts the same command line on a stored session id.
func (Driver) Resume(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return agent.Resume(spec)
}

// CheckInput takes text (R-IN-2).
func (Driver) CheckInput(in cliruntime.Input) error { return agent.CheckInput(in) }

// NewSession returns the protocol state of one agent process.
func (Driver) NewSession(spec cliruntime.LaunchSpec) cliruntime.Session {
	return agent.NewSession(spec)
}
