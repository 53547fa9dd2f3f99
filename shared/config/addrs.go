package config

import (
	"fmt"
	"net"
	"strings"
)

// Addrs is one host:port or a list of them, written in config files as
// `key = "h:p"` or `key = ["h1:p", "h2:p"]`: an agent told about several
// coordinator replicas (issue 24). The zero value is no address.
type Addrs []string

// UnmarshalTOML implements toml.Unmarshaler.
func (a *Addrs) UnmarshalTOML(v any) error {
	var out Addrs
	switch v := v.(type) {
	case string:
		out = Addrs{v}
	case []any:
		for _, e := range v {
			s, ok := e.(string)
			if !ok {
				return fmt.Errorf("want a host:port string or a list of them, got a list holding %T", e)
			}
			out = append(out, s)
		}
	default:
		return fmt.Errorf("want a host:port string or a list of them, got %T", v)
	}
	if err := out.Check(); err != nil {
		return err
	}
	*a = out
	return nil
}

// Check says which entry is not a host:port, or that one repeats.
func (a Addrs) Check() error {
	seen := map[string]bool{}
	for _, s := range a {
		if _, _, err := net.SplitHostPort(s); err != nil {
			return fmt.Errorf("%q is not a host:port", s)
		}
		if seen[s] {
			return fmt.Errorf("%q is listed twice", s)
		}
		seen[s] = true
	}
	return nil
}

// String joins the addresses with ", ".
func (a Addrs) String() string { return strings.Join(a, ", ") }
