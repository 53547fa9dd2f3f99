package proto

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Run ops. Coordinator→agent unless noted. Every one carries the run's ref
// in wire.Header.RunRef where it has one, and answers with a wire.Error
// whose HTTP status the coordinator passes through (R-API-4).
const (
	OpProfileCreate   = "profile.create"      // ProfileCreate → apitypes.Profile
	OpProfileUpdate   = "profile.update"      // ProfileUpdate → apitypes.Profile
	OpWorkspaceCreate = "workspace.create"    // WorkspaceCreate → apitypes.Workspace
	OpProfileDelete   = "profile.delete"      // RecordDelete → nothing (409 in_use while a run needs it)
	OpWorkspaceDelete = "workspace.delete"    // RecordDelete → nothing (409 in_use while a run needs it)
	OpRunLaunch       = "run.launch"          // RunLaunch → apitypes.Run
	OpRunGet          = "run.get"             // → apitypes.Run
	OpRunEvents       = "run.events"          // RunEvents → apitypes.EventList
	OpRunAttach       = "run.attach"          // RunAttach → RunAttachReply, then attach frames
	OpRunInput        = "run.input"           // RunInput → apitypes.Accepted
	OpRunInterrupt    = "run.interrupt"       // → apitypes.Accepted
	OpRunStop         = "run.stop"            // → apitypes.Run once the exit is observed
	OpRunResume       = "run.resume"          // → apitypes.Run (new generation)
	OpRunRelease      = "run.release"         // RunRelease → apitypes.Run (released)
	OpRunApprove      = "run.approve"         // → apitypes.Run (the held launch or resume goes on)
	OpRunMove         = "run.move"            // RunMove → apitypes.Run (re-attached, nothing started)
	OpRunDiff         = "run.diff"            // → apitypes.Diff
	OpHandoffPreview  = "run.handoff_preview" // → apitypes.HandoffPreview
	OpRunActivity     = "run.activity"        // → apitypes.Activity (JSON passed through)
	OpRunSubAgent     = "run.activity_agent"  // RunSubAgent → apitypes.SubAgentTurns
	OpRunMessages     = "run.messages"        // RunMessages → apitypes.MessagesPage or MessageRead
	OpHandoff         = "run.handoff"         // RunHandoff → apitypes.HandoffResponse
	OpRunDiffFile     = "run.diff_file"       // RunDiffFile → apitypes.FileDiff
	OpRunUncommitted  = "run.uncommitted"     // → apitypes.UncommittedDiff
	OpRunRequests     = "run.requests"        // → apitypes.RequestList
	OpRunAnswer       = "run.answer"          // RunAnswer → apitypes.RunRequest (settled)

	// OpProjectConfig scans a workspace's repository-carried agent
	// configuration (R-PCS-10).
	OpProjectConfig = "workspace.project_config" // ProjectConfigScan → apitypes.ProjectConfig (without approval)
	OpRunDelete     = "run.delete"               // → nothing; the run's record, ring and ledger are gone

	// OpRunsPush is agent→coordinator: run rows for the index. The agent
	// sends every row once per session (Full) and then each change.
	OpRunsPush = "runs.push" // RunsPush → nothing
)

// ProfileCreate asks the agent to store a profile the coordinator named.
type ProfileCreate struct {
	Ref    string            `json:"ref"`
	Tenant string            `json:"tenant"`
	Tool   string            `json:"tool"`
	Name   string            `json:"name"`
	Home   string            `json:"home,omitempty"`
	Env    map[string]string `json:"env,omitempty"`

	Inactive               bool     `json:"inactive,omitempty"`
	LaunchRequiresApproval bool     `json:"launch_requires_approval,omitempty"`
	AllowedWorkspaces      []string `json:"allowed_workspaces,omitempty"`
	EngineHooks            bool     `json:"engine_hooks,omitempty"`
	DeniedTools            []string `json:"denied_tools,omitempty"`
	// The approval policy (R-REQ-10..12); the agent fills the defaults.
	Approvals       string                  `json:"approvals,omitempty"`
	ApprovalRules   []apitypes.ApprovalRule `json:"approval_rules,omitempty"`
	AskTimeout      string                  `json:"ask_timeout,omitempty"`
	StallAfter      string                  `json:"stall_after,omitempty"`
	ResumeAfterLoss bool                    `json:"resume_after_loss,omitempty"`
	// Isolation and Network (R-TR-7).
	Isolation string `json:"isolation,omitempty"`
	Network   string `json:"network,omitempty"`
}

// ProfileUpdate asks the agent to change a profile's policy.
type ProfileUpdate struct {
	Ref    string `json:"ref"`
	Tenant string `json:"tenant"`
	apitypes.ProfileUpdate
}

// RecordDelete names the profile or workspace to delete.
type RecordDelete struct {
	Ref    string `json:"ref"`
	Tenant string `json:"tenant"`
}

// WorkspaceCreate asks the agent to register a directory with its file
// rules (apitypes.Workspace).
type WorkspaceCreate struct {
	Ref             string   `json:"ref"`
	Tenant          string   `json:"tenant"`
	Name            string   `json:"name"`
	Path            string   `json:"path"`
	ReadOnly        bool     `json:"read_only,omitempty"`
	AllowedSubpaths []string `json:"allowed_subpaths,omitempty"`
	MaxReadBytes    int64    `json:"max_read_bytes,omitempty"`
	DLP             string   `json:"dlp,omitempty"`
}

// RunLaunch asks the agent to create and start a run.
//
// It is a copy of apitypes.LaunchRequest on purpose, one of three hops a
// launch takes (docs/architecture.md, "A launch"): the public body names
// what a person asks for (refs, secret refs, a name, no_setup), this one
// what the node needs to start it, which only the coordinator knows (the
// run ref it made, the caller's tenant, the grants opened from the vault
// with their values, the setup verdict, the approved project-config hash).
// It is the contract between two daemons that may run different releases,
// so a field of the public API reaches it only when the agent needs it.
// The agent turns it into supervisor.LaunchParams (agentd's
// supervisorLaunch, held field for field by TestLaunchCopyKeepsEveryField).
type RunLaunch struct {
	RunRef       string  `json:"run_ref"`
	Tenant       string  `json:"tenant"`
	ProfileRef   string  `json:"profile_ref"`
	WorkspaceRef string  `json:"workspace_ref"`
	Isolation    string  `json:"isolation"`
	TemplateRef  string  `json:"template_ref,omitempty"`
	Grants       []Grant `json:"grants,omitempty"`
	// Worktree launches (R-WT-*, R-WTF-*): the agent validates them and
	// creates the worktree.
	Worktree     bool   `json:"worktree,omitempty"`
	WorktreeFrom string `json:"worktree_from,omitempty"`
	// SetupRefusal, when set, is the 409 of a worktree launch whose setup
	// command has no matching approval (R-SETUP-8): the agent answers it
	// after its own 422 checks and before it creates anything.
	SetupRefusal string `json:"setup_refusal,omitempty"`
	// SetupCommand is the workspace's setup command when it is approved
	// for its exact text and the launch did not skip it (R-SETUP-2): a
	// sandboxed worktree launch runs it before its tool. An agent of an
	// older release ignores it (and never ran one).
	SetupCommand string `json:"setup_command,omitempty"`
	Gate
}

// Gate is what the coordinator knows that a start's project-config gate
// needs (R-PCS-12): the hash of the workspace's last approval ("" when
// none). The agent scans the directory the process will start in.
type Gate struct {
	ProjectConfigApproved string `json:"project_config_approved,omitempty"`
}

// Grant is a granted credential with its value, on its way to the node
// inside the mTLS tunnel. The agent never stores or logs Value.
type Grant struct {
	Kind   string `json:"kind"`
	Env    string `json:"env"`
	AsFile bool   `json:"as_file,omitempty"`
	Value  []byte `json:"value"`
}

// RunResume carries the run's grants again for the new generation.
type RunResume struct {
	Grants []Grant `json:"grants,omitempty"`
	Gate
}

// ProjectConfigScan names the workspace to scan.
type ProjectConfigScan struct {
	WorkspaceRef string `json:"workspace_ref"`
	Tenant       string `json:"tenant"`
}

// RunHandoff asks the source run's node to hand it off (R-HOF-*): the new
// run's ref, the target profile, the reviewed summary, the setup verdict of
// a worktree source (no skip, R-HOF-16) and the gate.
type RunHandoff struct {
	NewRunRef    string  `json:"new_run_ref"`
	Tenant       string  `json:"tenant"`
	ProfileRef   string  `json:"profile_ref"`
	Summary      *string `json:"summary,omitempty"`
	SetupRefusal string  `json:"setup_refusal,omitempty"`
	// Grants are the new run's: its profile's API key (R-ACCT-7).
	Grants []Grant `json:"grants,omitempty"`
	Gate
}

// RunInput is OpRunInput's params: the input and who sent it, which the
// node records in the run's output (R-ATT-11). By and Name are empty when
// Olivares itself sent it (a scheduled continue).
type RunInput struct {
	By   string `json:"by,omitempty"`
	Name string `json:"name,omitempty"`
	apitypes.InputRequest
}

// RunAnswer is a person's answer to one of a run's requests (R-REQ-2): By
// is their principal id, which the request keeps.
type RunAnswer struct {
	ID   string `json:"id"`
	By   string `json:"by"`
	Name string `json:"name,omitempty"`
	apitypes.RequestAnswer
}

// RunSubAgent names the sub-agent of GET /runs/{ref}/activity/agents/{agent}.
type RunSubAgent struct {
	Agent string `json:"agent"`
}

// RunMessages carries GET /runs/{ref}/messages's query string as the
// caller sent it; the node checks it (R-MSG-16).
type RunMessages struct {
	Query string `json:"query"`
}

// RunDiffFile names the path of GET /runs/{ref}/diff/file.
type RunDiffFile struct {
	Path string `json:"path"`
}

// RunMove names the profile a Claude Code run moves to (R-MOVE-*).
type RunMove struct {
	ProfileRef string `json:"profile_ref"`
}

// RunRelease is POST /runs/{ref}/cleanup's confirmation: only an explicit
// JSON true confirms (R-CLN-2).
type RunRelease struct {
	DiscardWorktree bool `json:"discard_worktree,omitempty"`
}

// RunEvents pages the lifecycle ledger: rows after After, at most Limit.
type RunEvents struct {
	After uint64 `json:"after,omitempty"`
	Limit int    `json:"limit,omitempty"`
}

// RunAttach opens an output stream from seq From (0: the oldest retained).
type RunAttach struct {
	From uint64 `json:"from"`
}

// RunAttachReply precedes the frames.
type RunAttachReply struct {
	Live       bool   `json:"live"`
	Generation uint32 `json:"generation"`
}

// RunsPush carries index rows to the coordinator.
type RunsPush struct {
	Full bool           `json:"full,omitempty"`
	Runs []apitypes.Run `json:"runs"`
	// Usage are per-turn usage rows not yet acknowledged (R-USE-6); a
	// push answered ok acknowledges them all. The coordinator stores a
	// (run_ref, seq) once and takes tenant and node from the tunnel.
	Usage []apitypes.UsageTurn `json:"usage,omitempty"`
	// Signins are the ended sign-in attempts the coordinator has not taken
	// (R-ACCT-10): it audits each once, keeps the env_keys one named, and
	// answers the ids taken (RunsPushReply); the others come again.
	Signins []apitypes.SigninAttempt `json:"signins,omitempty"`
}

// RunsPushReply answers a RunsPush: the sign-in attempts the coordinator
// took (R-ACCT-10). A coordinator from before it answers nothing, and the
// agent keeps reporting them.
type RunsPushReply struct {
	SigninsTaken []string `json:"signins_taken,omitempty"`
}

// Attach frames: after RunAttachReply the agent writes wire frames, each
// one byte of type and a body. Output is binary so no byte of the hot path
// is JSON (ARCHITECTURE, the tunnel); the rare kinds carry JSON.
//
//	AttachOutput: seq u64 | generation u32 | stream u8 | at unix-nanos i64 | data
//	AttachLag:    apitypes.Lag JSON
//	AttachNotice: apitypes.Notice JSON; the stream then ends
//	AttachEnd:    apitypes.End JSON; the stream then ends
const (
	AttachOutput byte = 1
	AttachLag    byte = 2
	AttachNotice byte = 3
	AttachEnd    byte = 4
)

const outputHeader = 1 + 8 + 4 + 1 + 8

// Stream tags of AttachOutput (R-TR-9), as the ring numbers them.
var streamNames = [...]string{1: "stdout", 2: "stderr", 3: "pty", 4: "notice", 5: "request", 6: "input", 7: "setup"}

// StreamNotice is the stream number of the agent's own notices in the
// output (an olivares_notice event, R-HW-3).
const StreamNotice byte = 4

// StreamRequest is the stream number of a run's requests and their
// settlements in the output (R-REQ-4): data is an apitypes.RunRequest.
const StreamRequest byte = 5

// StreamInput is the stream number of the inputs people sent, at their
// place in the output (R-ATT-11): an output event of stream "input" whose
// data is an apitypes.InputFrame.
const StreamInput byte = 6

// StreamName returns the tag of a stream number, "" when unknown.
func StreamName(s byte) string {
	if int(s) < len(streamNames) {
		return streamNames[s]
	}
	return ""
}

// AppendOutput appends an AttachOutput frame body to b.
func AppendOutput(b []byte, seq uint64, gen uint32, stream byte, at time.Time, data []byte) []byte {
	b = append(b, AttachOutput)
	b = binary.BigEndian.AppendUint64(b, seq)
	b = binary.BigEndian.AppendUint32(b, gen)
	b = append(b, stream)
	b = binary.BigEndian.AppendUint64(b, uint64(at.UnixNano()))
	return append(b, data...)
}

// AttachFrame is one decoded attach frame.
type AttachFrame struct {
	Type       byte
	Seq        uint64
	Generation uint32
	Stream     byte
	At         time.Time
	Data       []byte // Output data (aliases the input), or the JSON body
}

// ErrBadFrame: an attach frame that does not parse.
var ErrBadFrame = errors.New("proto: bad attach frame")

// ParseAttachFrame decodes p; Data aliases p.
func ParseAttachFrame(p []byte) (AttachFrame, error) {
	if len(p) == 0 {
		return AttachFrame{}, ErrBadFrame
	}
	f := AttachFrame{Type: p[0]}
	switch f.Type {
	case AttachOutput:
		if len(p) < outputHeader {
			return AttachFrame{}, fmt.Errorf("%w: output frame of %d bytes", ErrBadFrame, len(p))
		}
		f.Seq = binary.BigEndian.Uint64(p[1:9])
		f.Generation = binary.BigEndian.Uint32(p[9:13])
		f.Stream = p[13]
		f.At = time.Unix(0, int64(binary.BigEndian.Uint64(p[14:22]))).UTC()
		f.Data = p[outputHeader:]
	case AttachLag, AttachNotice, AttachEnd:
		if !json.Valid(p[1:]) {
			return AttachFrame{}, fmt.Errorf("%w: type %d body is not JSON", ErrBadFrame, f.Type)
		}
		f.Data = p[1:]
	default:
		return AttachFrame{}, fmt.Errorf("%w: type %d", ErrBadFrame, f.Type)
	}
	return f, nil
}

// AppendJSONFrame appends a frame of type t with v as JSON.
func AppendJSONFrame(b []byte, t byte, v any) []byte {
	j, _ := json.Marshal(v)
	return append(append(b, t), j...)
}
