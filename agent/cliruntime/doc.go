// Package cliruntime is the driver contract (R-DRV-1, R-ARCH-6): the one Go
// interface every vendor-CLI driver implements, and the types it speaks. The
// drivers themselves live under agent/drivers; the agent's supervisor owns the
// process (agent/sessions) and feeds a driver's Session with the child's stdout
// lines.
//
// A driver is pure protocol: it builds command lines and the child's
// environment from scratch, encodes input, and reads facts out of output. It
// never starts a process, never touches the file system and never reads the
// agent's own environment, so a driver's behaviour is a function of its
// LaunchSpec and the lines it is given (golden-testable byte for byte).
//
// # Shape, and why it differs from R-DRV-6's list
//
//   - Command(spec) is split into Launch and Resume so that a resume can never
//     be mistaken for a launch: Resume refuses an empty ConversationID
//     (R-RES-1/2) instead of silently starting a new conversation.
//   - Handshake, EncodeInput, Interrupt and Observe are methods of a per-process
//     Session. Each returns a Step: the lines to write to the child's stdin and
//     the events learned. A protocol handshake (Codex initialize → thread/start,
//     ACP initialize → session/new) is a chain of request/response pairs, so
//     Observe must be able to answer a line with writes; returning writes rather
//     than writing keeps a Session free of I/O and deadlines.
//   - Encode returns events too: an ACP turn has no "turn started"
//     notification, it starts when our session/prompt request goes out.
//   - Interrupt reports whether a turn was active, because an idle interrupt is
//     an accepted no-op (R-INT-2) that the ledger records with noop=true, and
//     a pending interrupt (Codex before the turn id is known) writes nothing
//     yet is not a no-op.
//   - Driver.CheckInput validates an input without a live Session, because the
//     API answers 400 (validation) before 409 (not live) (R-API-3, R-IN-2).
//   - LocateConversation(home) is not part of the contract yet: a resume of a
//     missing conversation is refused by the tool itself and reported as
//     EventConversationUnavailable (R-RES-2).
//
// # What a driver must never do
//
//   - inherit the agent's environment: Command.Env is complete (R-DRV-5);
//   - fall back to a new conversation on resume (R-RES-2);
//   - choose a PTY for Claude Code's --print form (R-TR-3).
package cliruntime
