package projectconfig

import (
	"errors"
	"reflect"
	"testing"
)

// TestParseDotenv: R-PCS-24 syntax, value by value.
func TestParseDotenv(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []envEntry
	}{
		{"", nil},
		{"\n\n  \n", nil},
		{"# comment\n   # indented comment", nil},
		{"A=1", []envEntry{{"A", "1"}}},
		{"A=1\r\nB=2\r\n", []envEntry{{"A", "1"}, {"B", "2"}}},
		{"export A=1", []envEntry{{"A", "1"}}},
		{"export\tA=1", []envEntry{{"A", "1"}}},
		{"export=1", []envEntry{{"export", "1"}}},
		{"exportA=1", []envEntry{{"exportA", "1"}}},
		{"  A = spaced value  ", []envEntry{{"A", "spaced value"}}},
		{"A=", []envEntry{{"A", ""}}},
		{"A=#comment only", []envEntry{{"A", ""}}},
		{"A=x # comment", []envEntry{{"A", "x"}}},
		{"A=x#y", []envEntry{{"A", "x"}}},
		{"A='single # not a comment'", []envEntry{{"A", "single # not a comment"}}},
		{`A='no \n escape'`, []envEntry{{"A", `no \n escape`}}},
		{`A="line\nbreak\r"`, []envEntry{{"A", "line\nbreak\r"}}},
		{`A="keeps \" and \t"`, []envEntry{{"A", `keeps \" and \t`}}},
		{`A="x" # comment`, []envEntry{{"A", "x"}}},
		{`A=""`, []envEntry{{"A", ""}}},
		{"a.b-c_d=1", []envEntry{{"a.b-c_d", "1"}}},
		{"A=1\nA=2\nB=3", []envEntry{{"A", "2"}, {"B", "3"}}},
		{"A=$OTHER", []envEntry{{"A", "$OTHER"}}},
	}
	for _, tt := range tests {
		got, err := parseDotenv([]byte(tt.in))
		if err != nil {
			t.Errorf("%q: got error %v, want nil", tt.in, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%q: got %v, want %v", tt.in, got, tt.want)
		}
	}
}

// TestParseDotenvUnreadable: any line that cannot be parsed fails the
// whole file (R-PCS-24).
func TestParseDotenvUnreadable(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		"A",
		"export A",
		"=1",
		"A:1",
		"A B=1",
		"A='open",
		`A="open`,
		`A="escaped close\"`,
		"A='x' y",
		`A="x"y`,
		"A=1\nnot an assignment\n",
		"A=\"multi\nline\"",
		"\xef\xbb\xbfA=1",
	} {
		if _, err := parseDotenv([]byte(in)); !errors.Is(err, errSyntax) {
			t.Errorf("%q: got %v, want a syntax error", in, err)
		}
	}
}
