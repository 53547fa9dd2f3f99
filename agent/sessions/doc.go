// Package sessions holds the runners that start a vendor CLI as a child in its
// own process group, observe its exit from wait(), and stop it by signalling the
// whole group (R-STOP-1..3, R-EXIT-1..3).
//
// A runner never lets the child inherit the agent's environment: Spec.Env is the
// complete environment, built from scratch by the caller (nil means empty). A
// runner never synthesizes an exit code: a signal death has a nil Code and the
// signal's name (R-EXIT-3).
//
// # Ownership
//
//   - The caller reads Stdout and Stderr until EOF. EOF arrives once every
//     holder of the child's end has gone (the child and any grandchild that
//     kept it), so output written just before exit is never lost: the runner
//     does not close the read ends before they are drained. A read end releases
//     its descriptor itself at EOF; a caller that abandons a stream early may
//     close it through io.Closer, which both readers implement.
//   - The caller owns Stdin and may close it at any time (on the proc runner
//     that is the child's EOF). The runner closes it too once the child has
//     been reaped, because nothing can read it any more.
//   - Wait never touches the streams, so it does not race with reads.
//   - The context given to Start bounds only the start itself. Cancelling it
//     later does NOT kill the child: the child's lifetime is owned by the
//     supervisor, which ends it with Stop.
//
// # Caveats
//
//   - A grandchild that leaves the group (setsid, setpgid) escapes Stop, and if
//     it holds stdout or stderr, EOF waits for it.
//   - Group signals after the leader has been reaped (Stop's sweep of
//     stragglers) address a process-group id that the kernel keeps only while
//     a member lives; the sweep stops at the first sign that the group is gone.
//   - Orphaned grandchildren are reparented to init. Where init does not reap
//     (some containers), they stay zombies; the sweep counts them as gone.
package sessions
