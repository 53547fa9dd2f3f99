package worktree

import (
	"context"
	"fmt"
	"strings"
	"unicode"
)

// maxFromLen bounds a worktree_from value; a longer one is refused unread.
const maxFromLen = 1024

// ResolveFrom turns a launch's worktree_from into the full id of the commit
// the new worktree starts at (R-WTF-1..7). Empty means the workspace's
// current HEAD commit (R-WTF-5). A value of 40 or 64 lowercase hex digits
// must be a commit of this repository that refs/heads, refs/tags or
// refs/remotes keeps reachable (R-WTF-4); anything else must be a valid
// branch name that exists as refs/heads/<value>. Options, revision
// expressions and ranges are refused before git sees them. Every refusal is
// a 422 *Error and nothing is created or moved: only the returned id is
// used afterwards, so neither the branch nor the workspace checkout moves
// (R-WTF-2, R-WTF-3).
//
// The value never reaches git as a bare argument: git sees the resolved id
// or refs/heads/<value>. R-WTF-7's "git check-ref-format --branch" is run as
// its exact equivalent, git check-ref-format refs/heads/<value> plus the two
// refusals --branch adds (a leading '-' and HEAD, with "@" that it would
// expand to HEAD).
func (r Repo) ResolveFrom(ctx context.Context, from string) (string, error) {
	if from != "" {
		if err := checkFromSyntax(from); err != nil {
			return "", err
		}
	}
	info, err := r.info(ctx)
	if err != nil {
		return "", err
	}
	if from == "" {
		return r.headCommit(ctx)
	}
	if isFullHex(from) {
		return r.resolveCommit(ctx, info, from)
	}
	return r.resolveBranch(ctx, from)
}

// checkFromSyntax refuses what R-WTF-7 lists before any git call: a leading
// '-', "..", '^', '~', ':', "@{", '?', '*', '[', '\\', whitespace, control
// characters, HEAD and "@".
func checkFromSyntax(from string) error {
	bad := func(why string) error {
		return refuse(ErrFromInvalid, "worktree_from %q is refused: %s; give a full commit id (40 or 64 lowercase hex digits) or the name of a local branch", clip(from), why)
	}
	switch {
	case len(from) > maxFromLen:
		return bad(fmt.Sprintf("it is longer than %d bytes", maxFromLen))
	case strings.HasPrefix(from, "-"):
		return bad("it looks like an option")
	case strings.Contains(from, ".."):
		return bad("it contains \"..\" (a range)")
	case strings.Contains(from, "@{"):
		return bad("it contains \"@{\" (a reflog expression)")
	case from == "HEAD" || from == "@":
		return bad("it names HEAD, not a branch")
	}
	for _, c := range from {
		switch {
		case strings.ContainsRune("^~:?*[\\", c):
			return bad(fmt.Sprintf("it contains %q (a revision expression or pattern)", c))
		case unicode.IsSpace(c) || unicode.IsControl(c) || c == unicode.ReplacementChar:
			return bad("it contains whitespace or a control character")
		}
	}
	return nil
}

// isFullHex reports whether s is 40 or 64 lowercase hex digits.
func isFullHex(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// resolveCommit checks that id is a commit of the repository that some
// branch, tag or remote-tracking branch keeps reachable (R-WTF-4).
func (r Repo) resolveCommit(ctx context.Context, info repoInfo, id string) (string, error) {
	if len(id) != info.objectLen {
		return "", refuse(ErrFromUnknown, "worktree_from %s is not a commit of this repository, whose ids have %d hex digits", id, info.objectLen)
	}
	typ, err := r.objectType(ctx, id)
	if err != nil {
		return "", err
	}
	if typ != "commit" {
		if typ == "" {
			return "", refuse(ErrFromUnknown, "worktree_from %s: the repository has no such commit; fetch it first or give a commit it has", id)
		}
		return "", refuse(ErrFromUnknown, "worktree_from %s is a %s, not a commit", id, typ)
	}
	out, err := r.run(ctx, call{args: []string{"for-each-ref", "--count=1", "--contains", id,
		"--format=%(refname)", "refs/heads", "refs/tags", "refs/remotes"}})
	if err != nil {
		return "", err
	}
	if len(out) == 0 {
		return "", refuse(ErrFromUnreachable, "worktree_from %s is a commit no branch, tag or remote-tracking branch holds; put a branch or tag on it first", id)
	}
	return id, nil
}

// resolveBranch resolves a local branch name to its commit id.
func (r Repo) resolveBranch(ctx context.Context, name string) (string, error) {
	ref := "refs/heads/" + name
	if _, err := r.run(ctx, call{args: []string{"check-ref-format", ref}}); err != nil {
		if exitCode(err) == 1 {
			return "", refuse(ErrFromInvalid, "worktree_from %q is not a valid branch name; give a full commit id or the name of a local branch", clip(name))
		}
		return "", err
	}
	id, err := r.refCommit(ctx, ref)
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", refuse(ErrFromUnknown, "worktree_from %q: the repository has no local branch of that name (refs/heads/%s); create it or give a commit id", clip(name), clip(name))
	}
	return id, nil
}

// objectType is git's type of the object with full id id, or "" when the
// repository lacks it.
func (r Repo) objectType(ctx context.Context, id string) (string, error) {
	out, err := r.run(ctx, call{args: []string{"cat-file", "-t", id}})
	if err != nil {
		if exitCode(err) == 128 {
			return "", nil
		}
		return "", err
	}
	return firstLine(out), nil
}

// refCommit is the commit id a fully qualified ref points at, or "" when
// the ref does not exist or does not point at a commit.
func (r Repo) refCommit(ctx context.Context, ref string) (string, error) {
	out, err := r.run(ctx, call{args: []string{"show-ref", "--verify", "--", ref}})
	if err != nil {
		if exitCode(err) == 128 || exitCode(err) == 1 {
			return "", nil
		}
		return "", err
	}
	id, name, ok := strings.Cut(firstLine(out), " ")
	if !ok || name != ref || !isFullHex(id) {
		return "", &GitError{Command: "show-ref", Stderr: "unexpected output: " + firstLine(out)}
	}
	typ, err := r.objectType(ctx, id)
	if err != nil {
		return "", err
	}
	if typ != "commit" {
		return "", nil
	}
	return id, nil
}

// clip shortens a caller's value for a message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
