package cliruntime

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Set lists the fields of in that are set, in the order line, message, text.
func (in Input) Set() []InputField {
	var f []InputField
	if in.Line != nil {
		f = append(f, FieldLine)
	}
	if in.Message != nil {
		f = append(f, FieldMessage)
	}
	if in.Text != "" {
		f = append(f, FieldText)
	}
	return f
}

// CheckStreamJSONInput is CheckInput for stream-json drivers (claude): exactly
// one of line or message (R-IN-2).
func CheckStreamJSONInput(in Input) error {
	if in.Text != "" {
		return fmt.Errorf("%w: %q; this driver takes %q or %q", ErrWrongInputField, FieldText, FieldLine, FieldMessage)
	}
	switch {
	case in.Line != nil && in.Message != nil:
		return fmt.Errorf("%w: give exactly one of %q and %q", ErrInvalidInput, FieldLine, FieldMessage)
	case in.Line != nil:
		return checkLine(in.Line)
	case in.Message != nil:
		return checkMessage(in.Message)
	default:
		return fmt.Errorf("%w: give %q or %q", ErrInvalidInput, FieldLine, FieldMessage)
	}
}

// CheckTextInput is CheckInput for drivers that take plain text (codex, grok).
func CheckTextInput(in Input) error {
	for _, f := range in.Set() {
		if f != FieldText {
			return fmt.Errorf("%w: %q; this driver takes %q", ErrWrongInputField, f, FieldText)
		}
	}
	if in.Text == "" {
		return fmt.Errorf("%w: %q is empty", ErrInvalidInput, FieldText)
	}
	return nil
}

// checkLine: one JSON object, no CR or LF anywhere (a JSON string cannot hold
// a raw line break, so a valid line has none except as whitespace, which
// would split it on the tool's side).
func checkLine(line []byte) error {
	if bytes.ContainsAny(line, "\r\n") {
		return fmt.Errorf("%w: %q holds a line break", ErrInvalidInput, FieldLine)
	}
	if t := bytes.TrimLeft(line, " \t"); len(t) == 0 || t[0] != '{' || !json.Valid(line) {
		return fmt.Errorf("%w: %q must be one JSON object", ErrInvalidInput, FieldLine)
	}
	return nil
}

// checkMessage: a JSON string or an array (of content blocks).
func checkMessage(m []byte) error {
	t := bytes.TrimLeft(m, " \t\r\n")
	if len(t) == 0 || (t[0] != '"' && t[0] != '[') || !json.Valid(m) {
		return fmt.Errorf("%w: %q must be a JSON string or an array of content blocks", ErrInvalidInput, FieldMessage)
	}
	return nil
}
