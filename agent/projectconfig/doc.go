// Package projectconfig reads the agent configuration a cloned repository
// carries (Claude Code, Codex and Gemini CLI settings, .mcp.json, .env) and
// reports the keys that run a program or redirect traffic, with the sha256 a
// person approves before a tool that reads them may start (R-PCS-1..25).
//
// It must never execute anything it reads, never follow a symlink at a
// listed path, and never hold more than MaxFileSize+1 bytes of a file: it
// only opens, reads and decodes. It keeps no state (no HTTP, no bbolt); the
// agent calls Scan at launch, resume and for GET
// /workspaces/{ref}/project-config, and the coordinator stores approvals.
//
// # Files and keys
//
// Scan looks at the seven paths of R-PCS-3 under one directory, in this
// fixed order, which is also the order of the hash stream:
//
//	.claude/settings.json        claude  hooks, apiKeyHelper, statusLine, mcpServers, …, env.<listed name>
//	.claude/settings.local.json  claude  (same keys)
//	.mcp.json                    claude  mcpServers
//	.codex/config.toml           codex   hooks, notify, mcp_servers, model_providers, otel, *_base_url,
//	                                     shell_environment_policy.set.<listed name>, and the same under profiles.<name>
//	.gemini/settings.json        gemini  hooks, mcpServers, toolDiscoveryCommand, toolCallCommand, proxy,
//	                                     tools.discoveryCommand, tools.callCommand, mcp.serverCommand, telemetry.otlpEndpoint
//	.gemini/.env                 gemini  <listed name>
//	.env                         gemini  <listed name>
//
// A listed name is one of R-PCS-4, compared in ASCII case-insensitively
// (R-PCS-22); NO_PROXY is never listed. A key whose value is {}, [], "",
// false or null is not flagged (R-PCS-2). A parent that is not an object or
// table (say "env": "x") holds no entry and flags nothing: the tool cannot
// take an entry from it either.
//
// # Unreadable files
//
// A path that exists but cannot be read in its format is flagged whole with
// a Reason (R-PCS-5, R-PCS-23): not valid UTF-8 or not valid JSON, TOML or
// .env (R-PCS-24); a JSON settings document whose top level is not an
// object; larger than MaxFileSize; nested deeper than MaxDepth, measured on
// the token stream before any decoder runs (R-PCS-20); or, by lstat, a
// symlink, directory, FIFO, device or socket. A symlinked parent folder
// (.claude, .codex, .gemini) flags the files below it the same way, since
// the tool would read them through the link. A listed file that exists but
// cannot be opened or read (permissions, I/O) is flagged as ReasonReadError.
//
// Files are opened relative to an open directory descriptor with
// O_NOFOLLOW|O_NONBLOCK, so neither a symlink swapped in after lstat nor a
// FIFO can redirect or block the scan. At most MaxFileSize+1 bytes are kept;
// a larger file is never parsed, only streamed once through sha256 in
// constant memory, at every scan (R-PCS-8). The directory passed to Scan is
// the operator's (a registered workspace or a worktree) and may itself be
// reached through a symlink; only the paths below it are repository content.
//
// # Hash
//
// Report.SHA256 is the lowercase hex sha256 of this stream (R-PCS-21), ""
// when nothing is flagged (R-PCS-9). For each flagged file in the order
// above:
//
//	read file:        for each flagged key, sorted by its path (bytewise):
//	                  <file> NUL <key path> NUL <canonical value> LF
//	unreadable file:  <file> NUL "!unreadable" NUL <reason> NUL <hex sha256> LF
//
// where <hex sha256> is that of the whole file (streamed when oversized), of
// the link target text for a symlink (of the parent's link for a symlinked
// parent), and of no bytes for a directory, FIFO, device, socket or a file
// that could not be read. <reason> is the Reason code, never the Detail.
//
// A key path joins its segments with "."; a segment made only of
// A-Z a-z 0-9 _ - is written bare, any other is written as a JSON string,
// so profiles."a.b".notify and profiles.a.b.notify stay distinct and no path
// can be "!unreadable".
//
// The canonical value is JSON with no insignificant space, object keys
// sorted bytewise, strings escaped only where JSON requires it (\" \\ \n \r
// \t, other controls as \u00XX, everything else literal UTF-8), JSON numbers
// as written in the file, TOML integers in decimal and TOML floats in the
// shortest form that round-trips, always with a "." or exponent so 1 and
// 1.0 differ. The TOML values JSON cannot hold are written bare, never
// quoted, so they cannot collide with a string: nan, +inf, -inf, and
// date-times in RFC 3339 form (1979-05-27T07:32:00Z, 1979-05-27T07:32:00,
// 1979-05-27, 07:32:00). The stream is over raw values: a password masked in
// the output still changes the hash (R-PCS-25, Q-31). Spelling variants of
// one value ("\u0061" and "a", 0x10 and 16, reordered object keys) hash
// alike; any change of the value itself does not (R-PCS-13).
//
// Key.Value in the output is the same JSON with every URL password in a
// string value replaced by *** (R-PCS-25) and the bare TOML tokens above
// written as JSON strings.
package projectconfig
