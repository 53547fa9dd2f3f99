// Package drivers holds the vendor-CLI drivers of the cliruntime contract, one
// package each (claude, codex, grok, and the optional ACP drivers gemini and
// opencode of Q-36, which share internal/acp with grok), the in-process fake,
// and the conformance suite that runs every driver against a local peer
// (integration/peers/fakecli) on both runners, and against the fake
// (R-DRV-2, R-DRV-7).
//
// A driver never starts a process; the agent's supervisor does, with the
// runner the driver's LaunchTransport names (R-TR-1).
package drivers
