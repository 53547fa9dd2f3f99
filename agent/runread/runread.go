// Package runread answers the read-only questions about a run, from the
// records on its node: its activity and sub-agents and its messages (the
// tool's own transcript), the diff of its worktree, and the preview of a
// handoff (its conversation read without a model). It starts no process
// and changes no run: what it needs of the runtime is a small lookup
// (Runs), and the registry for profiles and workspaces.
package runread

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/handoff"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/taint"
	"github.com/olivares-dev/olivares/agent/transcript"
	"github.com/olivares-dev/olivares/agent/worktree"
	"github.com/olivares-dev/olivares/shared/apitypes"
)

// Refusals of a read.
var (
	// ErrUnsupportedTool: the run's tool has no native record Olivares
	// reads (R-ACT-8, R-MSG-11), or the read is of a Codex child transcript
	// (R-AGT-4).
	ErrUnsupportedTool = errors.New("runread: unsupported tool")
	// ErrProfileGone: the run's profile is no longer registered.
	ErrProfileGone = errors.New("runread: profile gone")
	// ErrNoWorktree: the run has no worktree to diff (R-DIFF-6).
	ErrNoWorktree = errors.New("runread: no worktree")
	// ErrWorkspaceGone: the run's workspace is no longer registered.
	ErrWorkspaceGone = errors.New("runread: workspace gone")
	// ErrHandoffUnsupportedTool: a handoff reads Claude Code, Codex,
	// Gemini CLI and OpenCode conversations only (R-HOF-1).
	ErrHandoffUnsupportedTool = errors.New("runread: handoff unsupported tool")
	// ErrNotStarted: no generation named a conversation yet (R-STATE-4).
	ErrNotStarted = errors.New("runread: not started")
	// ErrConversationUnavailable: the source's profile is gone, so its
	// stored conversation cannot be found.
	ErrConversationUnavailable = errors.New("runread: conversation unavailable")
)

// Run is what the read side needs to know of a run.
type Run struct {
	Ref, Tenant, Driver, ProfileRef string
	WorkspaceRef, Workdir           string
	WorktreeBranch                  string
	ConversationID                  string
	TemplateRef                     string
	Generation                      uint32
	Live, PendingApproval           bool
	Taint                           taint.Kinds
	// Observer is the run's live observer of its stdout (window report,
	// task progress, plans); nil for a run without one.
	Observer *transcript.Live
}

// Runs is the run lookup the read side needs of the runtime.
type Runs interface {
	// ReadRun returns the run, or the runtime's not-found refusal.
	ReadRun(ref string) (Run, error)
	// ChildEnv is the environment the run's tool starts with (an OpenCode
	// export runs under it, R-HOF-6).
	ChildEnv(ref string) []string
}

// Options configure a Reader.
type Options struct {
	Runs     Runs
	Registry *registry.Registry
}

// Reader answers reads.
type Reader struct {
	o Options
	// cache indexes the native transcripts activity and messages read.
	cache *transcript.Cache
}

// New returns a Reader.
func New(o Options) *Reader { return &Reader{o: o, cache: transcript.NewCache(0, 0)} }

// readsTranscript reports whether a driver's runs have a native record
// Olivares reads for activity and messages (R-ACT-2, R-MSG-1).
func readsTranscript(driver string) bool {
	return driver == string(cliruntime.KindClaude) || driver == string(cliruntime.KindCodex)
}

// transcriptSource checks a read of the run's native record: a tool without
// a reader is 422 (R-ACT-8, R-MSG-11), then taint 409 (docs/rules/taint-audit.md).
func (rd *Reader) transcriptSource(ref string, surface taint.Surface) (Run, transcript.Source, error) {
	r, err := rd.o.Runs.ReadRun(ref)
	if err != nil {
		return Run{}, transcript.Source{}, err
	}
	if !readsTranscript(r.Driver) {
		return Run{}, transcript.Source{}, refusal.New(ErrUnsupportedTool, "%s runs have no native record Olivares reads; activity and messages are for Claude Code and Codex runs", r.Driver)
	}
	if err := r.Taint.Refusal(ref, r.Live, r.Generation, surface); err != nil {
		return Run{}, transcript.Source{}, err
	}
	prof, ok, err := rd.o.Registry.Profile(r.ProfileRef)
	if err != nil {
		return Run{}, transcript.Source{}, err
	}
	if !ok {
		return Run{}, transcript.Source{}, refusal.New(ErrProfileGone, "the profile %s of run %s is gone", r.ProfileRef, ref)
	}
	return r, transcript.Source{Tool: r.Driver, Home: prof.Home, ConversationID: r.ConversationID, Cwd: r.Workdir, Live: r.Live}, nil
}

// Activity is GET /runs/{ref}/activity (R-ACT-1..9, R-WF-*): read fresh from
// the tool's own record at every request, never by starting a tool.
func (rd *Reader) Activity(ctx context.Context, ref string) (apitypes.Activity, error) {
	r, src, err := rd.transcriptSource(ref, taint.SurfaceActivity)
	if err != nil {
		return apitypes.Activity{}, err
	}
	var snap transcript.LiveSnapshot
	var window *transcript.WindowReport
	if r.Observer != nil {
		snap, window = r.Observer.Snapshot(), r.Observer.Window()
	}
	return rd.cache.Activity(src, &snap, window)
}

// SubAgent is GET /runs/{ref}/activity/agents/{agent} (R-AGT-1..5): Codex
// children are only reported in the root activity (R-AGT-4).
func (rd *Reader) SubAgent(ctx context.Context, ref, agent string) (apitypes.SubAgentTurns, error) {
	r, err := rd.o.Runs.ReadRun(ref)
	if err != nil {
		return apitypes.SubAgentTurns{}, err
	}
	if r.Driver == string(cliruntime.KindCodex) {
		return apitypes.SubAgentTurns{}, refusal.New(ErrUnsupportedTool, "Codex child agents are reported in the run's activity; their transcripts are not offered") // R-AGT-4
	}
	_, src, err := rd.transcriptSource(ref, taint.SurfaceActivity)
	if err != nil {
		return apitypes.SubAgentTurns{}, err
	}
	return rd.cache.SubAgent(src, agent)
}

// Messages is GET /runs/{ref}/messages (R-MSG-1..17): the query is checked
// first (400), then the tool (422) and the taint (409).
func (rd *Reader) Messages(ctx context.Context, ref string, query url.Values) (any, error) {
	q, err := transcript.ParseMessagesQuery(query)
	if err != nil {
		return nil, err
	}
	_, src, err := rd.transcriptSource(ref, taint.SurfaceMessages)
	if err != nil {
		return nil, err
	}
	return rd.messages(src, q)
}

// SourceMessages answers a messages query on a stored conversation that
// is no run's: a native Claude Code session of agent/claudesup's catalog.
func (rd *Reader) SourceMessages(src transcript.Source, query url.Values) (any, error) {
	q, err := transcript.ParseMessagesQuery(query)
	if err != nil {
		return nil, err
	}
	return rd.messages(src, q)
}

func (rd *Reader) messages(src transcript.Source, q transcript.MessagesQuery) (any, error) {
	if q.ID > 0 {
		return rd.cache.Message(src, q.ID)
	}
	return rd.cache.Messages(src, q)
}

// worktreeTimeout bounds each git step of a diff.
const worktreeTimeout = 2 * time.Minute

// Worktree returns the run's worktree and the repository of its workspace,
// or ErrNoWorktree (R-DIFF-6).
func (rd *Reader) Worktree(r Run) (worktree.Repo, worktree.Worktree, registry.Workspace, error) {
	if r.WorktreeBranch == "" {
		return worktree.Repo{}, worktree.Worktree{}, registry.Workspace{}, refusal.New(ErrNoWorktree, "run %s has no worktree", r.Ref)
	}
	w, ok, err := rd.o.Registry.Workspace(r.WorkspaceRef)
	if err != nil {
		return worktree.Repo{}, worktree.Worktree{}, registry.Workspace{}, err
	}
	if !ok {
		return worktree.Repo{}, worktree.Worktree{}, registry.Workspace{}, refusal.New(ErrWorkspaceGone, "the workspace %s of run %s is no longer registered", r.WorkspaceRef, r.Ref)
	}
	return worktree.Repo{Dir: w.Path}, worktree.Worktree{Path: r.Workdir, Branch: r.WorktreeBranch}, w, nil
}

func readOptions(w registry.Workspace) worktree.ReadOptions {
	return worktree.ReadOptions{AllowedSubpaths: w.AllowedSubpaths, MaxReadBytes: w.MaxReadBytes, DenyReads: w.DLP == apitypes.DLPDeny}
}

// Diff is GET /runs/{ref}/diff (R-DIFF-1..8): the paths the worktree's
// branch changed since it left the workspace's commit, committed objects
// only.
func (rd *Reader) Diff(ctx context.Context, ref string) (apitypes.Diff, error) {
	r, err := rd.o.Runs.ReadRun(ref)
	if err != nil {
		return apitypes.Diff{}, err
	}
	repo, wt, w, err := rd.Worktree(r)
	if err != nil {
		return apitypes.Diff{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, worktreeTimeout)
	defer cancel()
	d, err := repo.Diff(ctx, wt, readOptions(w))
	if err != nil {
		return apitypes.Diff{}, err
	}
	out := apitypes.Diff{Branch: d.Branch, Base: d.Base, Head: d.Head, Truncated: d.Truncated, Files: []apitypes.DiffEntry{}, Uncommitted: d.Uncommitted}
	for _, f := range d.Files {
		out.Files = append(out.Files, apitypes.DiffEntry{Path: f.Path, Status: f.Status, OldPath: f.OldPath})
	}
	return out, nil
}

// DiffFile is GET /runs/{ref}/diff/file?path= (R-DIFF-3, R-DIFF-5,
// R-DIFF-7, R-DIFF-8).
func (rd *Reader) DiffFile(ctx context.Context, ref, path string) (apitypes.FileDiff, error) {
	r, err := rd.o.Runs.ReadRun(ref)
	if err != nil {
		return apitypes.FileDiff{}, err
	}
	repo, wt, w, err := rd.Worktree(r)
	if err != nil {
		return apitypes.FileDiff{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, worktreeTimeout)
	defer cancel()
	fd, err := repo.DiffFile(ctx, wt, path, readOptions(w))
	if err != nil {
		return apitypes.FileDiff{}, err
	}
	return apitypes.FileDiff{Path: fd.Path, Original: fd.Original, Modified: fd.Modified,
		OriginalTruncated: fd.OriginalTruncated, ModifiedTruncated: fd.ModifiedTruncated, Binary: fd.Binary}, nil
}

// Uncommitted is GET /runs/{ref}/diff/uncommitted (R-DIFF-10): the edits
// in the run's worktree, or in its workspace folder when it has none, that
// the folder's HEAD commit does not hold.
func (rd *Reader) Uncommitted(ctx context.Context, ref string) (apitypes.UncommittedDiff, error) {
	r, err := rd.o.Runs.ReadRun(ref)
	if err != nil {
		return apitypes.UncommittedDiff{}, err
	}
	if r.WorkspaceRef == "" {
		return apitypes.UncommittedDiff{}, refusal.New(ErrNoWorktree, "run %s works in its profile's home, not in a workspace: there is no repository to compare", r.Ref)
	}
	w, ok, err := rd.o.Registry.Workspace(r.WorkspaceRef)
	if err != nil {
		return apitypes.UncommittedDiff{}, err
	}
	if !ok {
		return apitypes.UncommittedDiff{}, refusal.New(ErrWorkspaceGone, "the workspace %s of run %s is no longer registered", r.WorkspaceRef, r.Ref)
	}
	dir := w.Path
	if r.WorktreeBranch != "" {
		dir = r.Workdir
	}
	ctx, cancel := context.WithTimeout(ctx, worktreeTimeout)
	defer cancel()
	d, err := worktree.Repo{Dir: w.Path}.Working(ctx, dir, readOptions(w))
	if err != nil {
		return apitypes.UncommittedDiff{}, err
	}
	out := apitypes.UncommittedDiff{Head: d.Head, Files: []apitypes.DiffEntry{}, Truncated: d.Truncated, Patch: d.Patch, TooLarge: d.TooLarge, PatchLimit: d.PatchLimit}
	for _, f := range d.Files {
		out.Files = append(out.Files, apitypes.DiffEntry{Path: f.Path, Status: f.Status})
	}
	return out, nil
}

// handoffTools are the tools whose stored conversation a handoff reads
// (R-HOF-1, R-HOF-6).
var handoffTools = []string{handoff.ToolClaude, handoff.ToolCodex, handoff.ToolGemini, handoff.ToolOpenCode}

// HandoffSource checks what a handoff or its preview needs of the source
// run before anything is read or stopped (R-HOF-14, R-HOF-1, R-HOF-2), in
// R-HOF-18's order after the target: taint 409, an unsupported tool 422,
// not started 409.
func (rd *Reader) HandoffSource(ref string) (Run, registry.Profile, error) {
	r, err := rd.o.Runs.ReadRun(ref)
	if err != nil {
		return Run{}, registry.Profile{}, err
	}
	if err := r.Taint.Refusal(ref, r.Live, r.Generation, taint.SurfaceHandoff); err != nil {
		return r, registry.Profile{}, err
	}
	prof, ok, err := rd.o.Registry.Profile(r.ProfileRef)
	if err != nil {
		return r, registry.Profile{}, err
	}
	if !ok {
		return r, registry.Profile{}, refusal.New(ErrConversationUnavailable, "the profile %s of run %s is gone", r.ProfileRef, ref)
	}
	if !slices.Contains(handoffTools, prof.Tool) {
		return r, prof, refusal.New(ErrHandoffUnsupportedTool, "a %s session cannot be handed off: handoff reads Claude Code, Codex, Gemini CLI and OpenCode conversations", prof.Tool) // R-HOF-1
	}
	if r.ConversationID == "" || r.PendingApproval {
		return r, prof, refusal.New(ErrNotStarted, "run %s has not started a conversation yet; there is nothing to hand off", ref)
	}
	return r, prof, nil
}

// HandoffRead reads the source's stored conversation as it is (R-HOF-3,
// R-HOF-6), OpenCode's through its own `opencode export`, once, offline,
// under the session's profile environment, and the generated summary with
// the worktree's branch and tip a recipient can pass as worktree_from
// (R-HOF-17).
func (rd *Reader) HandoffRead(ctx context.Context, r Run, prof registry.Profile) (handoff.Conversation, string, error) {
	src := handoff.Source{Tool: prof.Tool, Home: prof.Home, ConversationID: r.ConversationID, Cwd: r.Workdir}
	if prof.Tool == handoff.ToolOpenCode {
		src.Env = rd.o.Runs.ChildEnv(r.Ref)
		for _, kv := range src.Env {
			if path, ok := strings.CutPrefix(kv, "PATH="); ok {
				if bin, err := lookPathIn("opencode", path); err == nil {
					src.OpenCodeBin = bin
				}
			}
		}
	}
	c, err := handoff.Read(ctx, src)
	if err != nil {
		return c, "", err
	}
	sum := handoff.Summary(c)
	if r.WorktreeBranch != "" {
		if _, wt, _, err := rd.Worktree(r); err == nil {
			sum += fmt.Sprintf("\nThe work is on git branch %s (worktree %s).\n", wt.Branch, wt.Path)
		}
	}
	return c, sum, nil
}

func lookPathIn(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", exec.ErrNotFound
}

// HandoffPreview is GET /runs/{ref}/handoff (R-HOP-1, R-HOP-2, R-HOF-20):
// read-only, a running session is read as it is.
func (rd *Reader) HandoffPreview(ctx context.Context, ref string) (apitypes.HandoffPreview, error) {
	r, prof, err := rd.HandoffSource(ref)
	if err != nil {
		return apitypes.HandoffPreview{}, err
	}
	c, sum, err := rd.HandoffRead(ctx, r, prof)
	if err != nil {
		return apitypes.HandoffPreview{}, err
	}
	return apitypes.HandoffPreview{Summary: sum, SourceDriver: prof.Tool, Turns: c.Turns, TranscriptBytes: handoff.TranscriptBytes(c)}, nil
}
