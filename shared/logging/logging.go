// Package logging builds the daemons' structured loggers (log/slog): the
// level and format a config or flag names, the attribute names every
// package uses, the request id carried in a context, and adapters that
// route other libraries' line loggers (yamux, net/http, echo) into slog.
//
// logging never writes a secret: callers log ids, never tokens or bodies
// (R-OBS-3), and nothing here adds request data on its own.
package logging

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strings"
	"time"
)

// Attribute names. Every package names the same thing the same way, so that
// one search finds a run's, a node's or a request's lines (R-OBS-2).
const (
	KeyRunRef    = "run_ref"
	KeyNodeID    = "node_id"
	KeyTenant    = "tenant"
	KeyOp        = "op"
	KeyRequestID = "request_id"
	KeyPrincipal = "principal"
	KeyReplica   = "replica"
	// KeyComponent names the subsystem a line comes from (fleet, link,
	// supervisor, ...).
	KeyComponent = "component"
	KeyErr       = "err"
)

// Formats.
const (
	FormatJSON = "json"
	FormatText = "text"
)

// Config is a daemon's [log] table.
type Config struct {
	// Level is the least severe level written: debug, info, warn or
	// error. When empty, info.
	Level string `toml:"level"`
	// Format is json (one object per line) or text (key=value). When
	// empty, the command's default: json for serve and run, text for dev.
	Format string `toml:"format"`
}

// CheckAndSetDefaults fills the defaults (format def) and names a bad key.
func (c *Config) CheckAndSetDefaults(def string) error {
	if c.Level == "" {
		c.Level = "info"
	}
	if _, err := ParseLevel(c.Level); err != nil {
		return fmt.Errorf("config: log.level: %w", err)
	}
	if c.Format == "" {
		c.Format = def
	}
	switch c.Format {
	case FormatJSON, FormatText:
	default:
		return fmt.Errorf("config: log.format %q: use json or text", c.Format)
	}
	return nil
}

// ParseLevel reads debug, info, warn (or warning) and error.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "", "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("level %q: use debug, info, warn or error", s)
}

// New returns a logger writing c's format at c's level to w. Lines logged
// with a context that carries a request id get its request_id attribute.
// c must have passed CheckAndSetDefaults (an unknown level is info).
func New(w io.Writer, c Config) *slog.Logger {
	lvl, _ := ParseLevel(c.Level)
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	if c.Format == FormatText {
		h = slog.NewTextHandler(w, opts)
	} else {
		h = slog.NewJSONHandler(w, opts)
	}
	return slog.New(contextHandler{h})
}

// Discard is a logger that writes nothing.
func Discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// OrDiscard is l, or Discard when l is nil: what an Options field's zero
// value means.
func OrDiscard(l *slog.Logger) *slog.Logger {
	if l == nil {
		return Discard()
	}
	return l
}

type ctxKey struct{}

// WithRequestID returns ctx carrying the request id id: every line logged
// with it (InfoContext, ...) through a logger of New names it.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, ctxKey{}, id)
}

// RequestID is the request id ctx carries, "" when none.
func RequestID(ctx context.Context) string {
	if ctx == nil {
		return ""
	}
	id, _ := ctx.Value(ctxKey{}).(string)
	return id
}

// contextHandler adds the context's request id to each record.
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if id := RequestID(ctx); id != "" {
		r.AddAttrs(slog.String(KeyRequestID, id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(as)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}

// Err is the attribute of an error; none (an empty attribute, which
// handlers skip) when err is nil.
func Err(err error) slog.Attr {
	if err == nil {
		return slog.Attr{}
	}
	return slog.String(KeyErr, err.Error())
}

// StdLogger is a standard library logger whose lines go to l at a level
// read from the line's prefix ("[ERR]", "[WARN]", "[DEBUG]", "[INFO]", as
// yamux writes them), else def. net/http's ErrorLog and yamux's Logger
// take it.
func StdLogger(l *slog.Logger, def slog.Level) *log.Logger {
	return log.New(lineWriter{l: l, def: def}, "", 0)
}

type lineWriter struct {
	l   *slog.Logger
	def slog.Level
}

var prefixes = []struct {
	p   string
	lvl slog.Level
}{
	{"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError}, {"[WARN]", slog.LevelWarn},
	{"[INFO]", slog.LevelInfo}, {"[DEBUG]", slog.LevelDebug}, {"[TRACE]", slog.LevelDebug},
}

func (w lineWriter) Write(p []byte) (int, error) {
	n := len(p)
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		s := strings.TrimSpace(string(line))
		if s == "" {
			continue
		}
		lvl := w.def
		for _, x := range prefixes {
			if rest, ok := strings.CutPrefix(s, x.p); ok {
				lvl, s = x.lvl, strings.TrimSpace(rest)
				break
			}
		}
		w.l.Log(context.Background(), lvl, s)
	}
	return n, nil
}

// Duration is the attribute of a duration, in milliseconds (duration_ms),
// which reads the same in JSON and in text.
func Duration(d time.Duration) slog.Attr {
	return slog.Float64("duration_ms", float64(d.Microseconds())/1000)
}
