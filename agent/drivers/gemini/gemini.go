// Package gemini is the launch driver of Gemini CLI's ACP agent,
// `gemini --acp` (Q-36: optional, held to the contract drivers'
// conformance): JSON-RPC 2.0 over stdio, as agent/drivers/internal/acp
// speaks it. A handoff can read its sessions (R-HOF-1, R-HOF-6) and a resume
// withholds what it replays (R-HW-1..4).
//
// What is Gemini CLI's own, measured on 0.61.0 (real-clis.md §3 and the
// notes below):
//
//   - Everything lives under the profile home: GEMINI_CLI_HOME is the home
//     (Gemini's default, made explicit so a profile cannot point it
//     elsewhere), so chat logs are <home>/.gemini/tmp/<project>/chats.
//   - session/new needs no authenticate call: with GOOGLE_GEMINI_BASE_URL
//     the agent picks its "gateway" auth, with only GEMINI_API_KEY its
//     "gemini-api-key" auth. session/load is stricter: unless settings.json
//     selected an auth type or GOOGLE_GEMINI_BASE_URL is set, it answers
//     -32000 "Authentication required". So a resume of a profile with a
//     GEMINI_API_KEY authenticates with "gemini-api-key" then and loads
//     again; Gemini CLI records that choice in the profile's settings.json,
//     as its own UI does.
//   - session/load answers after the first replayed message and streams the
//     rest of the history after its response, then sends
//     available_commands_update: that update, not the response, ends the
//     replay (R-HW-4), and input waits for it.
//   - An interrupt is session/cancel; the prompt then ends "cancelled". The
//     npm launcher is a Node process that relaunches itself as a child, so
//     only SIGTERM to the process group stops it (exit 0), which is what
//     the runners send.
package gemini

import (
	"strings"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/drivers/internal/acp"
)

// Name is the program run when LaunchSpec.Binary is empty.
const Name = "gemini"

// APIKeyAuth is the authenticate method of an API key (initialize's
// authMethods lists it as "gemini-api-key").
const APIKeyAuth = "gemini-api-key"

// Driver is the gemini driver. The zero value is ready to use.
type Driver struct{}

var _ cliruntime.Driver = Driver{}

// New returns the gemini driver.
func New() Driver { return Driver{} }

var agent = acp.Agent{
	Tool: cliruntime.KindGemini,
	Name: Name,
	Command: cliruntime.ProtocolCommand{
		Name: Name,
		Args: []string{"--acp"},
		Vars: func(home string) []cliruntime.EnvVar {
			return []cliruntime.EnvVar{
				// The root of ~/.gemini (settings, OAuth credentials, chat
				// logs); reserved, like HOME.
				{Key: "GEMINI_CLI_HOME", Value: home},
				// Telemetry is the one switch Gemini CLI reads from the
				// environment; its usage statistics and its updater are
				// settings.json keys only (privacy.usageStatisticsEnabled,
				// general.enableAutoUpdate), and the updater runs in the
				// interactive UI, not in --acp.
				{Key: "GEMINI_TELEMETRY_ENABLED", Value: "false", Overridable: true},
			}
		},
		CheckID: cliruntime.CheckOpaqueID,
	},
	AuthMethod:     apiKeyAuth,
	ReplayEndsWith: "available_commands_update",
}

// apiKeyAuth authenticates a resume with the profile's API key when
// session/load asks for it; a profile without one has nothing to offer.
func apiKeyAuth(spec cliruntime.LaunchSpec) string {
	for _, kv := range spec.Env {
		if v, ok := strings.CutPrefix(kv, "GEMINI_API_KEY="); ok && v != "" {
			return APIKeyAuth
		}
	}
	return ""
}

func (Driver) Kind() cliruntime.Kind { return agent.Kind() }

// LaunchTransport is stdio: ACP over pipes (R-TR-1).
func (Driver) LaunchTransport() cliruntime.LaunchTransport { return agent.LaunchTransport() }

// Launch starts a new session: `gemini --acp`, then session/new.
func (Driver) Launch(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return agent.Launch(spec)
}

// Resume starts the same command line and loads spec.ConversationID, an
// opaque session id (Gemini's are UUIDs, but the driver only needs it to be
// safe to send).
func (Driver) Resume(spec cliruntime.LaunchSpec) (cliruntime.Command, error) {
	return agent.Resume(spec)
}

// CheckInput takes text (R-IN-2).
func (Driver) CheckInput(in cliruntime.Input) error { return agent.CheckInput(in) }

// NewSession returns the protocol state of one agent process.
func (Driver) NewSession(spec cliruntime.LaunchSpec) cliruntime.Session {
	return agent.NewSession(spec)
}
