package worktree

import (
	"slices"
	"strings"
	"testing"
)

// R-WTF-1..7: what worktree_from accepts and what it refuses, with git's
// answer on a real repository.
func TestResolveFrom(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	c1 := head(t, dir)
	c2 := commitFiles(t, dir, map[string]string{"a.txt": "a\n"})
	gitT(t, dir, "branch", "feature", c1)
	gitT(t, dir, "branch", "nested/feature", c1)
	tree := gitT(t, dir, "rev-parse", "HEAD^{tree}")
	dangling := gitT(t, dir, "commit-tree", "-p", c2, "-m", "dangling", tree)
	tagOnly := gitT(t, dir, "commit-tree", "-p", c2, "-m", "tagged", tree)
	gitT(t, dir, "tag", "v1", tagOnly)
	remoteOnly := gitT(t, dir, "commit-tree", "-p", c2, "-m", "remote", tree)
	gitT(t, dir, "update-ref", "refs/remotes/origin/x", remoteOnly)
	blob := gitT(t, dir, "rev-parse", "HEAD:a.txt")

	cases := []struct {
		from string
		want string // the resolved id when ok
		err  *Error
	}{
		{"", c2, nil},                        // R-WTF-5: the workspace's current commit
		{"feature", c1, nil},                 // a local branch
		{"nested/feature", c1, nil},          // a local branch with a slash
		{c1, c1, nil},                        // a full id held by main
		{tagOnly, tagOnly, nil},              // held by a tag only
		{remoteOnly, remoteOnly, nil},        // held by a remote-tracking branch only
		{"HEAD~1", "", ErrFromInvalid},       // a revision expression (J05)
		{"HEAD", "", ErrFromInvalid},         // HEAD is not a branch
		{"@", "", ErrFromInvalid},            // --branch expands @ to HEAD
		{"main^", "", ErrFromInvalid},        // parent expression
		{"main~2", "", ErrFromInvalid},       // ancestor expression
		{c1 + ".." + c2, "", ErrFromInvalid}, // a range
		{"main...feature", "", ErrFromInvalid},
		{"main:README", "", ErrFromInvalid}, // a tree path
		{"main@{1}", "", ErrFromInvalid},    // a reflog expression
		{"@{-1}", "", ErrFromInvalid},       // the previous branch
		{"-b", "", ErrFromInvalid},          // an option
		{"--output=/tmp/x", "", ErrFromInvalid},
		{"ma*", "", ErrFromInvalid},
		{"ma?n", "", ErrFromInvalid},
		{"ma[in]", "", ErrFromInvalid},
		{`ma\in`, "", ErrFromInvalid},
		{"ma in", "", ErrFromInvalid},
		{"main\t", "", ErrFromInvalid},
		{"main\n", "", ErrFromInvalid},
		{"feature.lock", "", ErrFromInvalid}, // check-ref-format refuses
		{"a/.b", "", ErrFromInvalid},
		{"a//b", "", ErrFromInvalid},
		{"trailing/", "", ErrFromInvalid},
		{strings.Repeat("a", 2000), "", ErrFromInvalid},
		{dangling, "", ErrFromUnreachable}, // R-WTF-4: exists, held by no ref (J05)
		{strings.Repeat("0", 40), "", ErrFromUnknown},
		{strings.Repeat("a", 64), "", ErrFromUnknown}, // a sha256-length id in a sha1 repository
		{blob, "", ErrFromUnknown},                    // an object that is not a commit
		{strings.ToUpper(c1), "", ErrFromUnknown},     // not lowercase: a branch name, which does not exist
		{c1[:12], "", ErrFromUnknown},                 // abbreviated: a branch name, which does not exist
		{"nope", "", ErrFromUnknown},                  // an unknown branch (J05)
		{"v1", "", ErrFromUnknown},                    // a tag is not a local branch
		{"origin/x", "", ErrFromUnknown},              // a remote-tracking branch is not a local branch
	}
	r := Repo{Dir: dir}
	for _, tc := range cases {
		got, err := r.ResolveFrom(tctx(t), tc.from)
		if tc.err != nil {
			wantCode(t, err, tc.err)
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ResolveFrom(%q): got %q, %v, want %q", tc.from, got, err, tc.want)
		}
	}
	// Nothing moved (R-WTF-2).
	if got := head(t, dir); got != c2 {
		t.Fatalf("workspace HEAD: got %s, want %s", got, c2)
	}
	if got := gitT(t, dir, "rev-parse", "refs/heads/feature"); got != c1 {
		t.Fatalf("feature: got %s, want %s", got, c1)
	}
}

// R-WTF-7: the value never reaches git as a bare argument. Refused values
// never reach git at all; a branch reaches it only as refs/heads/<value>.
func TestResolveFromArgv(t *testing.T) {
	t.Parallel()
	dir := newRepo(t)
	gitT(t, dir, "branch", "feature")
	log := newArgvLog(t)
	r := Repo{Dir: dir, Git: log.script}
	for _, from := range []string{"-b", "--upload-pack=touch x", "HEAD~1", "a..b", "main@{0}", "x:y"} {
		_, err := r.ResolveFrom(tctx(t), from)
		wantCode(t, err, ErrFromInvalid)
	}
	if calls := log.calls(t); len(calls) != 0 {
		t.Fatalf("refused values ran git: got %q, want no call", calls)
	}
	for _, from := range []string{"feature", "nope"} {
		_, _ = r.ResolveFrom(tctx(t), from)
	}
	sawRef := false
	for _, argv := range log.calls(t) {
		for _, a := range argv {
			if a == "feature" || a == "nope" {
				t.Fatalf("git got the bare value %q in %q", a, argv)
			}
			sawRef = sawRef || a == "refs/heads/feature"
		}
		if !slices.Contains(argv, "core.hooksPath=/dev/null") {
			t.Fatalf("git call without core.hooksPath=/dev/null: %q", argv)
		}
	}
	if !sawRef {
		t.Fatal("got no refs/heads/feature argument, want the fully qualified ref")
	}
}

// R-WTF-7: the syntax refusals, without git.
func TestCheckFromSyntax(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"main", "feature/x", "v1.2", "a-b_c", "é"} {
		if err := checkFromSyntax(ok); err != nil {
			t.Errorf("checkFromSyntax(%q): got %v, want nil", ok, err)
		}
	}
	for _, bad := range []string{"-x", "a..b", "a^", "a~", "a:b", "a@{1}", "a?", "a*", "a[", `a\`, "a b", "a\x00", "a\x7f", "HEAD", "@", "\xff"} {
		if err := checkFromSyntax(bad); err == nil {
			t.Errorf("checkFromSyntax(%q): got nil, want worktree_from_invalid", bad)
		}
	}
}
