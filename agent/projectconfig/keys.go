package projectconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

// format says how a listed file is read and which keys it flags.
type format int

const (
	formatClaudeSettings format = iota // .claude/settings*.json
	formatMCP                          // .mcp.json
	formatCodex                        // .codex/config.toml
	formatGemini                       // .gemini/settings.json
	formatEnv                          // .gemini/.env, .env
)

// flagged is one flagged key with its raw (decoded, unmasked) value.
type flagged struct {
	path  string
	value any
}

// readFormat decodes a file's bytes and returns its flagged keys, or the
// Reason and a detail when it cannot be read in its format (R-PCS-5).
func readFormat(f format, data []byte) ([]flagged, Reason, string) {
	switch f {
	case formatEnv:
		if !utf8.Valid(data) {
			return nil, ReasonInvalidEnv, "not valid UTF-8"
		}
		entries, err := parseDotenv(data)
		if err != nil {
			return nil, ReasonInvalidEnv, err.Error()
		}
		return envKeys(entries), "", ""
	case formatCodex:
		doc, reason, detail := decodeTOML(data)
		if reason != "" {
			return nil, reason, detail
		}
		return codexKeys(doc), "", ""
	}
	doc, reason, detail := decodeJSON(data)
	if reason != "" {
		return nil, reason, detail
	}
	switch f {
	case formatClaudeSettings:
		return claudeKeys(doc), "", ""
	case formatMCP:
		var out []flagged
		addKey(&out, doc, "mcpServers")
		return out, "", ""
	}
	return geminiKeys(doc), "", ""
}

// decodeJSON checks UTF-8 and depth on the raw bytes, then decodes.
func decodeJSON(data []byte) (map[string]any, Reason, string) {
	if !utf8.Valid(data) {
		return nil, ReasonInvalidJSON, "not valid UTF-8"
	}
	if _, err := jsonDepth(data); err != nil {
		if errors.Is(err, errTooDeep) {
			return nil, ReasonTooDeep, err.Error()
		}
		return nil, ReasonInvalidJSON, err.Error()
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, ReasonInvalidJSON, err.Error()
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, ReasonInvalidJSON, "text after the top-level value"
	}
	doc, ok := v.(map[string]any)
	if !ok {
		return nil, ReasonInvalidJSON, "the top level is not an object"
	}
	return doc, "", ""
}

// decodeTOML checks UTF-8 and depth on the raw bytes, then decodes.
func decodeTOML(data []byte) (map[string]any, Reason, string) {
	if !utf8.Valid(data) {
		return nil, ReasonInvalidTOML, "not valid UTF-8"
	}
	if _, err := tomlDepth(data); err != nil {
		if errors.Is(err, errTooDeep) {
			return nil, ReasonTooDeep, err.Error()
		}
		return nil, ReasonInvalidTOML, err.Error()
	}
	doc := map[string]any{}
	if _, err := toml.Decode(string(data), &doc); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, ReasonInvalidTOML, fmt.Sprintf("line %d: %s", pe.Position.Line, pe.Message)
		}
		return nil, ReasonInvalidTOML, err.Error()
	}
	return doc, "", ""
}

// addKey flags t[name] at prefix.name unless it is absent or empty.
func addKey(out *[]flagged, t map[string]any, name string, prefix ...string) {
	if v, ok := t[name]; ok && !empty(v) {
		*out = append(*out, flagged{path: keyPath(append(prefix, name)...), value: v})
	}
}

// addEnv flags the listed entries of t[name] (an object of variables).
func addEnv(out *[]flagged, t map[string]any, name string, prefix ...string) {
	vars, _ := t[name].(map[string]any)
	for k, v := range vars {
		if EnvListed(k) && !empty(v) {
			*out = append(*out, flagged{path: keyPath(append(prefix, name, k)...), value: v})
		}
	}
}

// claudeKeys: R-PCS-3, Claude Code settings files.
func claudeKeys(doc map[string]any) []flagged {
	var out []flagged
	for _, k := range []string{"hooks", "apiKeyHelper", "statusLine", "mcpServers",
		"enableAllProjectMcpServers", "enabledMcpjsonServers", "awsAuthRefresh",
		"awsCredentialExport", "otelHeadersHelper", "fileSuggestion", "enabledPlugins",
		"extraKnownMarketplaces"} {
		addKey(&out, doc, k)
	}
	addEnv(&out, doc, "env")
	return out
}

// geminiKeys: R-PCS-3, .gemini/settings.json.
func geminiKeys(doc map[string]any) []flagged {
	var out []flagged
	for _, k := range []string{"hooks", "mcpServers", "toolDiscoveryCommand", "toolCallCommand", "proxy"} {
		addKey(&out, doc, k)
	}
	for _, k := range []string{"tools.discoveryCommand", "tools.callCommand", "mcp.serverCommand", "telemetry.otlpEndpoint"} {
		parent, child, _ := strings.Cut(k, ".")
		if t, ok := doc[parent].(map[string]any); ok {
			addKey(&out, t, child, parent)
		}
	}
	return out
}

// codexKeys: R-PCS-3, .codex/config.toml, at the top level and under every
// profiles.<name>.
func codexKeys(doc map[string]any) []flagged {
	var out []flagged
	codexTable(&out, doc)
	profiles, _ := doc["profiles"].(map[string]any)
	for name, p := range profiles {
		if t, ok := p.(map[string]any); ok {
			codexTable(&out, t, "profiles", name)
		}
	}
	return out
}

func codexTable(out *[]flagged, t map[string]any, prefix ...string) {
	for _, k := range []string{"hooks", "notify", "mcp_servers", "model_providers", "otel"} {
		addKey(out, t, k, prefix...)
	}
	for k := range t {
		if strings.HasSuffix(k, "_base_url") {
			addKey(out, t, k, prefix...)
		}
	}
	if sep, ok := t["shell_environment_policy"].(map[string]any); ok {
		addEnv(out, sep, "set", append(prefix, "shell_environment_policy")...)
	}
}

// envKeys: R-PCS-3, .env files.
func envKeys(entries []envEntry) []flagged {
	var out []flagged
	for _, e := range entries {
		if EnvListed(e.name) && e.value != "" {
			out = append(out, flagged{path: keyPath(e.name), value: e.value})
		}
	}
	return out
}
