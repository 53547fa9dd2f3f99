package cliruntime_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/olivares-dev/olivares/agent/cliruntime"
)

// TestBuildEnv: the environment is built from scratch in a fixed order; the
// profile's entries replace overridable ones in place and may not set the
// home-derived ones (R-DRV-5).
func TestBuildEnv(t *testing.T) {
	t.Setenv("OLIVARES_CANARY_LEAK", "x")
	spec := cliruntime.LaunchSpec{Home: "/h", Workdir: "/w", Env: []string{"TERM=xterm", "A=1", "A=2", "B="}}
	got, err := cliruntime.BuildEnv(spec,
		cliruntime.EnvVar{Key: "TOOL_HOME", Value: "/h/.tool"},
		cliruntime.EnvVar{Key: "TOOL_DEFAULT", Value: "on", Overridable: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=" + cliruntime.DefaultPath, "HOME=/h", "TERM=xterm", "LANG=C.UTF-8",
		"XDG_CONFIG_HOME=/h/.config", "XDG_DATA_HOME=/h/.local/share", "XDG_STATE_HOME=/h/.local/state",
		"XDG_CACHE_HOME=/h/.cache", "TOOL_HOME=/h/.tool", "TOOL_DEFAULT=on", "A=2", "B="}
	if !slices.Equal(got, want) {
		t.Errorf("BuildEnv =\n%q\nwant\n%q", got, want)
	}

	for _, tc := range []struct {
		env  []string
		want error
	}{
		{[]string{"HOME=/root"}, cliruntime.ErrReservedEnv},
		{[]string{"TOOL_HOME=/x"}, cliruntime.ErrReservedEnv},
		{[]string{"XDG_CACHE_HOME=/x"}, cliruntime.ErrReservedEnv},
		{[]string{"NOVALUE"}, cliruntime.ErrBadEnv},
		{[]string{"=v"}, cliruntime.ErrBadEnv},
		{[]string{"K=a\x00b"}, cliruntime.ErrBadEnv},
	} {
		spec.Env = tc.env
		if _, err := cliruntime.BuildEnv(spec, cliruntime.EnvVar{Key: "TOOL_HOME", Value: "/h/.tool"}); !errors.Is(err, tc.want) {
			t.Errorf("BuildEnv(env %q) = %v, want %v", tc.env, err, tc.want)
		}
	}
	for _, s := range []cliruntime.LaunchSpec{{Home: "", Workdir: "/w"}, {Home: "h", Workdir: "/w"}, {Home: "/h", Workdir: "w"}} {
		if _, err := cliruntime.BuildEnv(s); err == nil {
			t.Errorf("BuildEnv(%+v) accepted a relative or empty path", s)
		}
	}
}

func TestIDs(t *testing.T) {
	for _, tc := range []struct {
		id   string
		uuid bool
	}{
		{"4aeee0f1-4d4a-4833-a9c8-38e7476616fc", true},
		{"01A23643-8A79-7B72-93B2-655098698F6D", true},
		{"4aeee0f1-4d4a-4833-a9c8-38e7476616f", false},
		{"4aeee0f1x4d4a-4833-a9c8-38e7476616fc", false},
		{"--resume-4833-a9c8-38e7476616fc-0000", false},
		{"", false},
	} {
		if got := cliruntime.IsUUID(tc.id); got != tc.uuid {
			t.Errorf("IsUUID(%q) = %t, want %t", tc.id, got, tc.uuid)
		}
	}
	if err := cliruntime.CheckUUIDID(""); !errors.Is(err, cliruntime.ErrNoConversation) {
		t.Errorf("CheckUUIDID(\"\") = %v, want ErrNoConversation", err)
	}
	for _, id := range []string{"-x", "a\nb", "a\x7fb", string(make([]byte, 257))} {
		if err := cliruntime.CheckOpaqueID(id); !errors.Is(err, cliruntime.ErrBadConversationID) {
			t.Errorf("CheckOpaqueID(%q) = %v, want ErrBadConversationID", id, err)
		}
	}
	if err := cliruntime.CheckOpaqueID("ses_01J9 x"); err != nil {
		t.Errorf("CheckOpaqueID(printable) = %v", err)
	}
}

// TestCheckInput: R-IN-2, including what a golden line cannot hold (line
// breaks inside the raw line).
func TestCheckInput(t *testing.T) {
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	for _, tc := range []struct {
		name   string
		in     cliruntime.Input
		stream error // CheckStreamJSONInput
		text   error // CheckTextInput
	}{
		{"line", cliruntime.Input{Line: raw(`{"type":"user"}`)}, nil, cliruntime.ErrWrongInputField},
		{"line with LF", cliruntime.Input{Line: raw("{\"type\":\n\"user\"}")}, cliruntime.ErrInvalidInput, cliruntime.ErrWrongInputField},
		{"line with CR", cliruntime.Input{Line: raw("{\"type\":\r\"user\"}")}, cliruntime.ErrInvalidInput, cliruntime.ErrWrongInputField},
		{"line null", cliruntime.Input{Line: raw(`null`)}, cliruntime.ErrInvalidInput, cliruntime.ErrWrongInputField},
		{"message string", cliruntime.Input{Message: raw(`"hi"`)}, nil, cliruntime.ErrWrongInputField},
		{"message over lines", cliruntime.Input{Message: raw("[\n{\"type\":\"text\",\"text\":\"hi\"}\n]")}, nil, cliruntime.ErrWrongInputField},
		{"message null", cliruntime.Input{Message: raw(`null`)}, cliruntime.ErrInvalidInput, cliruntime.ErrWrongInputField},
		{"text", cliruntime.Input{Text: "hi"}, cliruntime.ErrWrongInputField, nil},
		{"nothing", cliruntime.Input{}, cliruntime.ErrInvalidInput, cliruntime.ErrInvalidInput},
		{"two", cliruntime.Input{Line: raw(`{}`), Message: raw(`"x"`)}, cliruntime.ErrInvalidInput, cliruntime.ErrWrongInputField},
	} {
		if err := cliruntime.CheckStreamJSONInput(tc.in); !errors.Is(err, tc.stream) {
			t.Errorf("%s: CheckStreamJSONInput = %v, want %v", tc.name, err, tc.stream)
		}
		if err := cliruntime.CheckTextInput(tc.in); !errors.Is(err, tc.text) {
			t.Errorf("%s: CheckTextInput = %v, want %v", tc.name, err, tc.text)
		}
	}
}
