package config

import (
	"fmt"
	"time"
)

// Duration is a time.Duration written in config files as a string such as
// "30s", "10m" or "1h30m" (time.ParseDuration). A bare number is an error:
// `timeout = 30` does not say whether it means seconds or minutes.
type Duration struct {
	time.Duration
}

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		return fmt.Errorf("bad duration %q: want a number with a unit, such as \"30s\" or \"10m\"", text)
	}
	d.Duration = v
	return nil
}

// MarshalText implements encoding.TextMarshaler; the output parses back to
// the same duration (10m is written "10m0s").
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.Duration.String()), nil
}
