// Package claudesup is the node side of Claude Code supervision
// (docs/rules/claude-supervision.md): the catalog of the Claude Code
// conversations stored under the node's Claude profile homes and its
// configured user homes, their transcript pages (read by agent/runread,
// never a second reader), and continue: a supervised run that resumes the
// exact conversation in its working directory, under a per-conversation
// lease so that two runs never resume one. A conversation a live claude
// process still runs is refused with the reason.
//
// Nothing of it runs unless the node's own config enables it
// (R-CL-PERM-1).
//
// Buckets (owned here): claudesup_leases.
package claudesup

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/olivares-dev/olivares/agent/cliruntime"
	"github.com/olivares-dev/olivares/agent/refusal"
	"github.com/olivares-dev/olivares/agent/registry"
	"github.com/olivares-dev/olivares/agent/supervisor"
	"github.com/olivares-dev/olivares/agent/transcript"
	"github.com/olivares-dev/olivares/shared/apitypes"
	"github.com/olivares-dev/olivares/shared/logging"
	"github.com/olivares-dev/olivares/shared/proto"
)

// The refusals of Claude Code supervision; agentd maps them to wire
// statuses.
var (
	// ErrUnavailable: supervision is not enabled on this node.
	ErrUnavailable = errors.New("claudesup: claude supervision is not enabled on this node")
	// ErrBadSessionID: not a Claude Code session id.
	ErrBadSessionID = errors.New("claudesup: not a Claude Code session id")
	// ErrBadCursor: the cursor is not one this host issued.
	ErrBadCursor = errors.New("claudesup: bad cursor")
	// ErrBadLimit: the limit is out of range.
	ErrBadLimit = errors.New("claudesup: bad limit")
	// ErrSessionNotFound: no listed home holds the conversation.
	ErrSessionNotFound = errors.New("claudesup: session not found")
	// ErrSessionLeased: a run holds the conversation's lease.
	ErrSessionLeased = errors.New("claudesup: session leased")
	// ErrSessionRunning: a live claude process runs the conversation.
	ErrSessionRunning = errors.New("claudesup: session running")
	// ErrWorkdirMissing: the conversation's directory is gone.
	ErrWorkdirMissing = errors.New("claudesup: workdir missing")
)

// Limits.
const (
	// DefaultLimit and MaxLimit bound rows per host (as R-CX-SRCH-4).
	DefaultLimit, MaxLimit = 50, 100
	// maxTitle bounds a row's title (runes), so that "claude: TITLE" is
	// a run name (R-NAME-3: at most 200).
	maxTitle = 192
	// userProfilePrefix names the profiles continue creates for user homes.
	userProfilePrefix = "prof_claudeuser"
)

// Config is the agent config's [claude_supervision] table. Each node
// consents locally (R-CL-PERM-1): nothing of it runs unless Enabled.
type Config struct {
	// Enabled turns supervision on for this node. Default false.
	Enabled bool `toml:"enabled"`
	// UserHomes are the homes (absolute) whose ~/.claude/projects are
	// listed besides the Claude profiles' homes. When empty, the agent
	// user's own home.
	UserHomes []string `toml:"user_homes"`
	// Env is added to the environment of runs continued from a user home
	// (a provider key or base URL). It may not set HOME or
	// CLAUDE_CONFIG_DIR.
	Env map[string]string `toml:"env"`
}

// CheckAndSetDefaults validates c and fills its defaults.
func (c *Config) CheckAndSetDefaults() error {
	if len(c.UserHomes) == 0 && c.Enabled {
		if h, err := os.UserHomeDir(); err == nil {
			c.UserHomes = []string{h}
		}
	}
	for i, h := range c.UserHomes {
		if !filepath.IsAbs(h) {
			return fmt.Errorf("config: claude_supervision.user_homes %q must be an absolute path", h)
		}
		c.UserHomes[i] = filepath.Clean(h)
	}
	for k := range c.Env {
		if k == "HOME" || k == "CLAUDE_CONFIG_DIR" || !registry.ValidEnvName(k) {
			return fmt.Errorf("config: claude_supervision.env may not set %q", k)
		}
	}
	return nil
}

// Runs is what supervision needs of the node's run runtime.
type Runs interface {
	Launch(context.Context, supervisor.LaunchParams) (apitypes.Run, error)
	Get(ref string) (apitypes.Run, error)
	List() []apitypes.Run
}

// Reads reads a stored conversation's messages (agent/runread).
type Reads interface {
	SourceMessages(src transcript.Source, query url.Values) (any, error)
}

// Options configure a Service.
type Options struct {
	Config   Config
	DB       *bbolt.DB
	Registry *registry.Registry
	Runs     Runs
	Reads    Reads
	// Tenant is the node's tenant: the tenant of the profiles listed.
	Tenant string
	Log    *slog.Logger
}

// Service is a node's Claude Code supervision.
type Service struct {
	o      Options
	mu     sync.Mutex // serialises continue: one lease per conversation
	sumsMu sync.Mutex
	sums   map[string]summary // by transcript path
}

var bucketLeases = []byte("claudesup_leases")

// Open opens the lease bucket. It reads nothing until the first call.
func Open(o Options) (*Service, error) {
	if o.DB == nil || o.Registry == nil || o.Runs == nil || o.Reads == nil {
		return nil, errors.New("claudesup: DB, Registry, Runs and Reads are required")
	}
	o.Log = logging.OrDiscard(o.Log).With(logging.KeyComponent, "claudesup")
	if err := o.DB.Update(func(tx *bbolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(bucketLeases)
		return err
	}); err != nil {
		return nil, err
	}
	return &Service{o: o, sums: map[string]summary{}}, nil
}

// Capability is what the node advertises: nil unless enabled.
func (s *Service) Capability() *proto.ClaudeSupervision {
	if !s.o.Config.Enabled {
		return nil
	}
	return &proto.ClaudeSupervision{Homes: len(s.homes())}
}

func (s *Service) available() error {
	if !s.o.Config.Enabled {
		return refusal.New(ErrUnavailable, "claude supervision is not enabled on this node; set [claude_supervision] enabled = true in its agent config")
	}
	return nil
}

// home is one directory whose .claude/projects is listed.
type home struct {
	dir     string
	profile string // the profile whose home it is; "" for a user home
}

// homes are the configured user homes, then the homes of the tenant's
// Claude profiles (the ones continue made for user homes are those user
// homes). A home is listed once.
func (s *Service) homes() []home {
	var out []home
	seen := map[string]bool{}
	for _, h := range s.o.Config.UserHomes {
		if !seen[h] {
			seen[h] = true
			out = append(out, home{dir: h})
		}
	}
	refs, _, err := s.o.Registry.Refs()
	if err != nil {
		s.o.Log.Warn("claude supervision: profiles unreadable", "err", err)
		return out
	}
	for _, ref := range refs {
		p, ok, err := s.o.Registry.Profile(ref)
		if err != nil || !ok || p.Tool != string(cliruntime.KindClaude) || p.Tenant != s.o.Tenant ||
			strings.HasPrefix(p.Ref, userProfilePrefix) || seen[filepath.Clean(p.Home)] {
			continue
		}
		seen[filepath.Clean(p.Home)] = true
		out = append(out, home{dir: filepath.Clean(p.Home), profile: p.Ref})
	}
	return out
}

// session is one stored conversation found on disk.
type session struct {
	id, path string
	home     home
	size     int64
	mtime    time.Time
	summary
}

// scan lists every stored conversation of every home; a conversation
// stored in two homes (a moved one) is listed once, from the newer file.
func (s *Service) scan() []session {
	byID := map[string]session{}
	for _, h := range s.homes() {
		files, _ := filepath.Glob(filepath.Join(h.dir, ".claude", "projects", "*", "*.jsonl"))
		for _, f := range files {
			id := strings.TrimSuffix(filepath.Base(f), ".jsonl")
			if !cliruntime.IsUUID(id) {
				continue
			}
			fi, err := os.Stat(f)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			if old, ok := byID[id]; ok && !fi.ModTime().After(old.mtime) {
				continue
			}
			byID[id] = session{id: id, path: f, home: h, size: fi.Size(), mtime: fi.ModTime()}
		}
	}
	out := make([]session, 0, len(byID))
	for _, ss := range byID {
		ss.summary = s.summaryOf(ss.path, ss.size, ss.mtime)
		out = append(out, ss)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].mtime.Equal(out[j].mtime) {
			return out[i].mtime.After(out[j].mtime)
		}
		return out[i].id < out[j].id
	})
	return out
}

// summaryOf reads a transcript's summary once per size and mtime.
func (s *Service) summaryOf(path string, size int64, mtime time.Time) summary {
	s.sumsMu.Lock()
	sum, ok := s.sums[path]
	s.sumsMu.Unlock()
	if ok && sum.size == size && sum.mtime.Equal(mtime) {
		return sum
	}
	sum = readSummary(path)
	sum.size, sum.mtime = size, mtime
	s.sumsMu.Lock()
	if len(s.sums) > 10000 {
		s.sums = map[string]summary{}
	}
	s.sums[path] = sum
	s.sumsMu.Unlock()
	return sum
}

// find is one conversation of the node.
func (s *Service) find(id string) (session, error) {
	if !cliruntime.IsUUID(id) {
		return session{}, refusal.New(ErrBadSessionID, "%q is not a Claude Code session id", id)
	}
	for _, ss := range s.scan() {
		if ss.id == id {
			return ss, nil
		}
	}
	return session{}, refusal.New(ErrSessionNotFound, "no Claude Code conversation %s is stored in this node's listed homes", id)
}

// Sessions is one catalog page of the node: newest first, search on titles
// and directories ignoring case.
func (s *Service) Sessions(p proto.ClaudeSessionsList) (apitypes.ClaudeHost, error) {
	if err := s.available(); err != nil {
		return apitypes.ClaudeHost{}, err
	}
	if p.Limit == 0 {
		p.Limit = DefaultLimit
	}
	if p.Limit < 1 || p.Limit > MaxLimit {
		return apitypes.ClaudeHost{}, refusal.New(ErrBadLimit, "limit must be 1 to %d rows per host", MaxLimit)
	}
	off := 0
	if p.Cursor != "" {
		n, err := strconv.Atoi(p.Cursor)
		if err != nil || n < 0 {
			return apitypes.ClaudeHost{}, refusal.New(ErrBadCursor, "the cursor is not one this host issued")
		}
		off = n
	}
	q := strings.ToLower(p.Search)
	all := s.scan()
	holders := s.holders()
	running := map[string]int{}
	for _, h := range s.homes() {
		for id, pid := range runningSessions(h.dir) {
			running[id] = pid
		}
	}
	out := apitypes.ClaudeHost{Rows: []apitypes.ClaudeSession{}}
	matched := 0
	for _, ss := range all {
		if q != "" && !strings.Contains(strings.ToLower(ss.title), q) && !strings.Contains(strings.ToLower(ss.cwd), q) {
			continue
		}
		matched++
		if matched <= off {
			continue
		}
		if len(out.Rows) == p.Limit {
			out.NextCursor = strconv.Itoa(off + p.Limit)
			break
		}
		out.Rows = append(out.Rows, row(ss, holders, running))
	}
	return out, nil
}

func row(ss session, holders map[string]string, running map[string]int) apitypes.ClaudeSession {
	r := apitypes.ClaudeSession{SessionID: ss.id, Cwd: ss.cwd, UpdatedAt: ss.mtime.UTC(), SizeBytes: ss.size,
		ProfileRef: ss.home.profile, RunningPID: running[ss.id], LeaseHolder: holders[ss.id]}
	if ss.title != "" {
		t := ss.title
		r.Title = &t
	}
	return r
}

// Messages is one transcript page of a stored conversation, through the
// run read side's reader (R-CL-TRN-1).
func (s *Service) Messages(p proto.ClaudeSessionRef) (any, error) {
	if err := s.available(); err != nil {
		return nil, err
	}
	ss, err := s.find(p.SessionID)
	if err != nil {
		return nil, err
	}
	q, err := url.ParseQuery(p.Query)
	if err != nil {
		return nil, refusal.New(transcript.ErrInvalidParameter, "the query string does not parse: %v", err)
	}
	return s.o.Reads.SourceMessages(transcript.Source{Tool: string(cliruntime.KindClaude), Home: ss.home.dir,
		ConversationID: ss.id, Cwd: ss.cwd}, q)
}

// Continue makes a supervised run that resumes the conversation, with
// --resume, in its working directory (R-CL-CONT-1), once: the run takes
// the conversation's lease, and a conversation another run holds or a live
// claude process runs is refused (R-CL-LEASE-1, R-CL-RUN-2).
func (s *Service) Continue(ctx context.Context, p proto.ClaudeSessionRef) (apitypes.Run, string, error) {
	if err := s.available(); err != nil {
		return apitypes.Run{}, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, err := s.find(p.SessionID)
	if err != nil {
		return apitypes.Run{}, "", err
	}
	if h := s.holders()[ss.id]; h != "" {
		return apitypes.Run{}, "", refusal.New(ErrSessionLeased, "run %s already continues conversation %s; open that run (resume it when it has ended)", h, ss.id)
	}
	if pid := runningSessions(ss.home.dir)[ss.id]; pid != 0 {
		return apitypes.Run{}, "", refusal.New(ErrSessionRunning, "a claude process (pid %d) still runs conversation %s in %s; end it there, then continue", pid, ss.id, ss.cwd)
	}
	if fi, err := os.Stat(ss.cwd); ss.cwd == "" || !filepath.IsAbs(ss.cwd) || err != nil || !fi.IsDir() {
		return apitypes.Run{}, "", refusal.New(ErrWorkdirMissing, "the directory %q conversation %s worked in is not on this node any more", ss.cwd, ss.id)
	}
	prof := ss.home.profile
	if prof == "" {
		if prof, err = s.userProfile(ss.home.dir); err != nil {
			return apitypes.Run{}, "", err
		}
	}
	if err := s.putLease(ss.id, p.RunRef); err != nil {
		return apitypes.Run{}, "", err
	}
	r, err := s.o.Runs.Launch(context.WithoutCancel(ctx), supervisor.LaunchParams{RunRef: p.RunRef, Tenant: p.Tenant,
		ProfileRef: prof, Workdir: ss.cwd, ConversationID: ss.id})
	if err != nil {
		s.dropLease(ss.id, p.RunRef)
		return apitypes.Run{}, "", err
	}
	return r, ss.title, nil
}

// userProfile is the profile runs continued from a user home run under:
// its home is that user home, its environment the configured one. It is
// made on the first continue.
func (s *Service) userProfile(dir string) (string, error) {
	sum := sha256.Sum256([]byte(dir))
	ref := userProfilePrefix + hex.EncodeToString(sum[:4])
	if _, ok, err := s.o.Registry.Profile(ref); err != nil || ok {
		return ref, err
	}
	_, err := s.o.Registry.CreateProfile(registry.ProfileParams{Ref: ref, Tenant: s.o.Tenant, Tool: string(cliruntime.KindClaude),
		Name: "claude-user-" + hex.EncodeToString(sum[:4]), Home: dir, Env: s.o.Config.Env})
	if err != nil && !errors.Is(err, registry.ErrExists) {
		return "", err
	}
	return ref, nil
}

// holders maps each held conversation to the run that holds it
// (R-CL-LEASE-1): the run its lease names while that run exists, else any
// run of the node whose conversation it is (an ordinary run of a profile
// home).
func (s *Service) holders() map[string]string {
	out := map[string]string{}
	for _, r := range s.o.Runs.List() {
		if r.ConversationID != "" {
			out[r.ConversationID] = r.RunRef
		}
	}
	_ = s.o.DB.View(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketLeases).ForEach(func(k, v []byte) error {
			if _, err := s.o.Runs.Get(string(v)); err == nil {
				out[string(k)] = string(v)
			}
			return nil
		})
	})
	return out
}

func (s *Service) putLease(id, ref string) error {
	return s.o.DB.Update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketLeases).Put([]byte(id), []byte(ref)) })
}

func (s *Service) dropLease(id, ref string) {
	_ = s.o.DB.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketLeases)
		if string(b.Get([]byte(id))) == ref {
			return b.Delete([]byte(id))
		}
		return nil
	})
}
