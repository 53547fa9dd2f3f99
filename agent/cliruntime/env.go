package cliruntime

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/olivares-dev/olivares/shared/apitypes"
)

// DefaultPath is the child's PATH when the profile's Env sets none. It is a
// constant, never the agent's own PATH (R-DRV-5).
const DefaultPath = "/usr/local/bin:/usr/bin:/bin"

// EnvVar is a variable a driver adds to the base environment.
type EnvVar struct {
	Key, Value string
	// Overridable lets LaunchSpec.Env replace the value (a default such as
	// GROK_DISABLE_AUTOUPDATER). When false the variable is derived from the
	// profile home and LaunchSpec.Env may not set it (ErrReservedEnv).
	Overridable bool
}

// CheckSpec validates the parts of a spec every driver needs: an absolute
// Home and Workdir.
func CheckSpec(spec LaunchSpec) error {
	if spec.Home == "" || !filepath.IsAbs(spec.Home) {
		return fmt.Errorf("%w: %q", ErrBadHome, spec.Home)
	}
	if spec.Workdir == "" || !filepath.IsAbs(spec.Workdir) {
		return fmt.Errorf("%w: %q", ErrBadWorkdir, spec.Workdir)
	}
	return nil
}

// BuildEnv returns a child's complete environment, built from scratch (never
// from the agent's environment), in a fixed order:
//
//	PATH=DefaultPath HOME=<Home> TERM=dumb LANG=C.UTF-8
//	XDG_CONFIG_HOME=<Home>/.config XDG_DATA_HOME=<Home>/.local/share
//	XDG_STATE_HOME=<Home>/.local/state XDG_CACHE_HOME=<Home>/.cache
//	<tool...> <spec.Env...>
//
// This is the layout real-clis.md §0.2 and §6.2 ran every tool in. An entry
// of spec.Env replaces an overridable variable in place (the last one wins)
// and is appended otherwise; setting a reserved one is ErrReservedEnv.
func BuildEnv(spec LaunchSpec, tool ...EnvVar) ([]string, error) {
	if err := CheckSpec(spec); err != nil {
		return nil, err
	}
	h := spec.Home
	vars := []EnvVar{
		{Key: "PATH", Value: DefaultPath, Overridable: true},
		{Key: "HOME", Value: h},
		{Key: "TERM", Value: "dumb", Overridable: true},
		{Key: "LANG", Value: "C.UTF-8", Overridable: true},
		{Key: "XDG_CONFIG_HOME", Value: filepath.Join(h, ".config")},
		{Key: "XDG_DATA_HOME", Value: filepath.Join(h, ".local", "share")},
		{Key: "XDG_STATE_HOME", Value: filepath.Join(h, ".local", "state")},
		{Key: "XDG_CACHE_HOME", Value: filepath.Join(h, ".cache")},
	}
	vars = append(vars, tool...)
	index := make(map[string]int, len(vars))
	for i, v := range vars {
		index[v.Key] = i
	}
	for _, kv := range spec.Env {
		k, val, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsAny(k, "\x00") || strings.ContainsRune(val, 0) {
			return nil, fmt.Errorf("%w: %q", ErrBadEnv, kv)
		}
		i, known := index[k]
		switch {
		case !known:
			index[k] = len(vars)
			vars = append(vars, EnvVar{Key: k, Value: val, Overridable: true})
		case !vars[i].Overridable:
			return nil, fmt.Errorf("%w: %s", ErrReservedEnv, k)
		default:
			vars[i].Value = val
		}
	}
	env := make([]string, len(vars))
	for i, v := range vars {
		env[i] = v.Key + "=" + v.Value
	}
	return env, nil
}

// IsUUID reports whether s is a UUID in its 8-4-4-4-12 hex text form, the
// form of Claude session ids and Codex thread ids (real-clis.md §1.4, §2.2).
func IsUUID(s string) bool { return apitypes.IsUUID(s) }

// CheckOpaqueID accepts an id the tool issued in JSON (an ACP sessionId):
// non-empty, at most 256 bytes, no control characters, not starting with '-'.
func CheckOpaqueID(id string) error {
	if id == "" {
		return ErrNoConversation
	}
	if len(id) > 256 || strings.HasPrefix(id, "-") {
		return fmt.Errorf("%w: %q", ErrBadConversationID, id)
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %q", ErrBadConversationID, id)
		}
	}
	return nil
}

// CheckUUIDID accepts a conversation id that must be a UUID.
func CheckUUIDID(id string) error {
	if id == "" {
		return ErrNoConversation
	}
	if !IsUUID(id) {
		return fmt.Errorf("%w: %q is not a UUID", ErrBadConversationID, id)
	}
	return nil
}
