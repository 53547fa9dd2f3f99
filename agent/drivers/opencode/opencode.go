// Package opencode is the launch driver of OpenCode's ACP agent,
// `opencode acp` (Q-36: optional, held to the contract drivers'
// conformance): JSON-RPC 2.0 over stdio, as agent/drivers/internal/acp
// speaks it. A handoff reads its sessions through `opencode export`
// (R-HOF-6) and a resume withholds what it replays (R-HW-1..4).
//
// What is OpenCode's own, measured on 1.18.33 (real-clis.md §4):
//
//   - Its config, sessions (SQLite), logs and locks follow the XDG
//     directories, which the base environment puts under the profile home.
//   - It fetches the models.dev catalog and updates itself unless told not
//     to: OPENCODE_DISABLE_MODELS_FETCH=1 and OPENCODE_DISABLE_AUTOUPDATE=1
//     are defaults a profile may override. (Its npm metadata requests follow
//     $HOME/.npmrc, which is the profile's.)
//   - session/new needs no authenticate call (providers come from its
//     config); session/load replays the history before it answers, as ACP
//     has it (R-HW-4), and an unknown id gets -32603 "Internal error:
//     OpenCode service failure". Its sessionCapabilities.resume would
//     continue without the replay; load is what a resume uses, so that the
//     history is withheld the same way for every ACP tool.
//   - Session ids are "ses_" and 26 letters and digits.
//   - An interrupt is session/cancel; the prompt then ends "cancelled".
//     SIGTERM kills it (it dies of the signal).
package opencode

import (
	"fmt"
	"strings"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/internal/acp"
)

// Name is the program run when LaunchSpec.Binary is empty.
const Name = "opencode"

// Driver is the opencode driver. The zero value is ready to use.
type Driver struct{}

var _ cliruntime.Driver = Driver{}

// New returns the opencode driver.
func New() Driver { return Driver{} }

var agent = acp.Agent{
	Tool: cliruntime.KindOpenCode,
	Name: Name,
	Command: cliruntime.ProtocolCommand{
		Name: Name,
		Args: []string{"acp"},
		Vars: func(string) []cliruntime.EnvVar {
			// Offline by default: no catalog download, and a supervised
			// binary must not change under a live run.
			return []cliruntime.EnvVar{
				{Key: "OPENCODE_DISABLE_MODELS_FETCH", Value: "1", Overridable: true},
				{Key: "OPENCODE_DISABLE_AUTOUPDATE", Value: "1", Overridable: true},
			}
		},
		CheckID: CheckID,
	},
}

// CheckID accepts an OpenCode session id: "ses_" and then letters and
// digits, at most 128 of them (the form `opencode export` takes too).
func CheckID(id string) error {
	if err := cliruntime.CheckOpaqueID(id); err != nil {
		return err
	}
	rest, ok := strings.CutPrefix(id, "ses_")
	if !ok || rest == "" || len(rest) > 128 {
		return fmt.Errorf("%w: %q is not an OpenCode session id (ses_…)", cliruntime.ErrBadConversationID, id)
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return fmt.Errorf("%w: %q is not an OpenCode session id (ses_…)", cliruntime.ErrBadConversationID, id)
		}
	}
	return nil
}

func (Driver) Kind() cliruntime.Kind { return agent.Kind() }

// LaunchTransport is stdio: ACP over pipes (R-TR-1).
func (Driver) LaunchTransport() cliruntime.LaunchTransport { return agent.LaunchTransport() }

// Launch starts a new session: `opencode acp`, then session/new.
func (Driver) Launch(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return agent.Launch(spec)
}

// Resume starts the same command line and loads spec.ConversationID.
func (Driver) Resume(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return agent.Resume(spec)
}

// CheckInput takes text (R-IN-2).
func (Driver) CheckInput(in cliruntime.Input) error { return agent.CheckInput(in) }

// NewSession returns the protocol state of one agent process.
func (Driver) NewSession(spec cliruntime.LaunchSpec) cliruntime.Session {
	return agent.NewSession(spec)
}
