package worktree

import (
	"bufio"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// fastImport builds a repository whose main branch holds n files, with git
// fast-import (much faster than writing and adding n files).
func fastImport(b *testing.B, n int) string {
	b.Helper()
	dir := filepath.Join(b.TempDir(), "ws")
	gitT(b, "", "init", "-q", "-b", "main", dir)
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = dir
	cmd.Env = testEnv
	in, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(in)
	fmt.Fprintf(w, "commit refs/heads/main\ncommitter T <t@x> 1700000000 +0000\ndata 4\nbulk\n")
	for i := range n {
		body := fmt.Sprintf("file %d\n", i)
		fmt.Fprintf(w, "M 100644 inline d%02d/f%05d.txt\ndata %d\n%s\n", i%100, i, len(body), body)
	}
	w.Flush()
	in.Close()
	if err := cmd.Wait(); err != nil {
		b.Fatal(err)
	}
	return dir
}

// revParseMedian is the baseline: the median time of a plain
// git rev-parse HEAD in dir, measured in the same run.
func revParseMedian(b *testing.B, dir string, n int) time.Duration {
	b.Helper()
	times := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		cmd := exec.Command("git", "rev-parse", "HEAD")
		cmd.Dir = dir
		cmd.Env = testEnv
		if err := cmd.Run(); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
	}
	return median(times)
}

// benchCtx bounds a benchmark: a checkout of 10,000 files can take seconds
// per iteration on a slow disk.
func benchCtx(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	b.Cleanup(cancel)
	return ctx
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkCreate10kFiles: worktree creation (resolve HEAD, create with
// checkout) on a repository of 10,000 files. Reports the median and its
// ratios to a plain git rev-parse HEAD and to a plain git worktree add of
// the same commit, both measured in the same run.
func BenchmarkCreate10kFiles(b *testing.B) {
	dir := fastImport(b, 10000)
	r := Repo{Dir: dir}
	root := filepath.Join(b.TempDir(), "wt")
	ctx := benchCtx(b)
	var times, plain []time.Duration
	b.ResetTimer()
	for i := range b.N {
		wt, err := Plan(root, "t", fmt.Sprintf("run_bench%06d", i))
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		id, err := r.ResolveFrom(ctx, "")
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Create(ctx, wt, id); err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
		b.StopTimer()
		if _, err := r.Release(ctx, wt, true); err != nil {
			b.Fatal(err)
		}
		// Second baseline, interleaved: the same checkout by plain git.
		plainPath := filepath.Join(root, "plain", fmt.Sprint(i))
		start = time.Now()
		gitT(b, dir, "worktree", "add", "-q", "-b", fmt.Sprint("plain", i), plainPath, id)
		plain = append(plain, time.Since(start))
		gitT(b, dir, "worktree", "remove", "--force", plainPath)
		b.StartTimer()
	}
	b.StopTimer()
	base := revParseMedian(b, dir, 21)
	m := median(times)
	b.ReportMetric(float64(m.Microseconds())/1000, "median-ms")
	b.ReportMetric(float64(m)/float64(base), "x-rev-parse")
	b.ReportMetric(float64(m)/float64(median(plain)), "x-plain-worktree-add")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkDiff200Files: Diff of a branch that changed 200 files. Reports
// the p50 and its ratio to a plain git rev-parse HEAD in the same run.
func BenchmarkDiff200Files(b *testing.B) {
	dir := fastImport(b, 1000)
	r := Repo{Dir: dir}
	ctx := benchCtx(b)
	wt, err := Plan(filepath.Join(b.TempDir(), "wt"), "t", "run_benchdiff")
	if err != nil {
		b.Fatal(err)
	}
	id, err := r.ResolveFrom(ctx, "")
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Create(ctx, wt, id); err != nil {
		b.Fatal(err)
	}
	files := map[string]string{}
	for i := range 200 {
		files[fmt.Sprintf("d%02d/f%05d.txt", i%100, i*5)] = fmt.Sprintf("changed %d\n", i)
	}
	commitFiles(b, wt.Path, files)
	var times []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		d, err := r.Diff(ctx, wt, ReadOptions{})
		if err != nil {
			b.Fatal(err)
		}
		times = append(times, time.Since(start))
		if len(d.Files) != 200 || d.Truncated {
			b.Fatalf("got %d files truncated=%v, want 200", len(d.Files), d.Truncated)
		}
	}
	b.StopTimer()
	base := revParseMedian(b, dir, 21)
	m := median(times)
	b.ReportMetric(float64(m.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(m)/float64(base), "x-rev-parse")
	b.ReportMetric(0, "ns/op")
}
