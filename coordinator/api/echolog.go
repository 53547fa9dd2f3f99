package api

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"

	"github.com/labstack/gommon/log"
)

// echoLogger routes echo's own logger (c.Logger(), e.Logger) into slog, so
// that the coordinator has one log (R-OBS-1). echo writes to it only from
// middleware that has no slog of its own; our handlers use Server.log.
type echoLogger struct {
	l      *slog.Logger
	prefix string
}

func (e *echoLogger) log(lvl slog.Level, msg string) {
	e.l.Log(context.Background(), lvl, msg)
}

func (e *echoLogger) logj(lvl slog.Level, j log.JSON) {
	b, _ := json.Marshal(j)
	e.l.Log(context.Background(), lvl, string(b))
}

func (e *echoLogger) Output() io.Writer         { return io.Discard }
func (e *echoLogger) SetOutput(io.Writer)       {}
func (e *echoLogger) Prefix() string            { return e.prefix }
func (e *echoLogger) SetPrefix(p string)        { e.prefix = p }
func (e *echoLogger) Level() log.Lvl            { return log.DEBUG }
func (e *echoLogger) SetLevel(log.Lvl)          {}
func (e *echoLogger) SetHeader(string)          {}
func (e *echoLogger) Print(i ...any)            { e.log(slog.LevelInfo, fmt.Sprint(i...)) }
func (e *echoLogger) Printf(f string, a ...any) { e.log(slog.LevelInfo, fmt.Sprintf(f, a...)) }
func (e *echoLogger) Printj(j log.JSON)         { e.logj(slog.LevelInfo, j) }
func (e *echoLogger) Debug(i ...any)            { e.log(slog.LevelDebug, fmt.Sprint(i...)) }
func (e *echoLogger) Debugf(f string, a ...any) { e.log(slog.LevelDebug, fmt.Sprintf(f, a...)) }
func (e *echoLogger) Debugj(j log.JSON)         { e.logj(slog.LevelDebug, j) }
func (e *echoLogger) Info(i ...any)             { e.log(slog.LevelInfo, fmt.Sprint(i...)) }
func (e *echoLogger) Infof(f string, a ...any)  { e.log(slog.LevelInfo, fmt.Sprintf(f, a...)) }
func (e *echoLogger) Infoj(j log.JSON)          { e.logj(slog.LevelInfo, j) }
func (e *echoLogger) Warn(i ...any)             { e.log(slog.LevelWarn, fmt.Sprint(i...)) }
func (e *echoLogger) Warnf(f string, a ...any)  { e.log(slog.LevelWarn, fmt.Sprintf(f, a...)) }
func (e *echoLogger) Warnj(j log.JSON)          { e.logj(slog.LevelWarn, j) }
func (e *echoLogger) Error(i ...any)            { e.log(slog.LevelError, fmt.Sprint(i...)) }
func (e *echoLogger) Errorf(f string, a ...any) { e.log(slog.LevelError, fmt.Sprintf(f, a...)) }
func (e *echoLogger) Errorj(j log.JSON)         { e.logj(slog.LevelError, j) }

// Fatal and Panic are never called by echo's middleware; both panic after
// logging (a request never exits the daemon), and Recover answers 500.
func (e *echoLogger) Fatal(i ...any) {
	e.log(slog.LevelError, fmt.Sprint(i...))
	panic(fmt.Sprint(i...))
}
func (e *echoLogger) Fatalj(j log.JSON) {
	e.logj(slog.LevelError, j)
	panic("fatal")
}
func (e *echoLogger) Fatalf(f string, a ...any) {
	e.log(slog.LevelError, fmt.Sprintf(f, a...))
	panic(fmt.Sprintf(f, a...))
}
func (e *echoLogger) Panic(i ...any) {
	e.log(slog.LevelError, fmt.Sprint(i...))
	panic(fmt.Sprint(i...))
}
func (e *echoLogger) Panicj(j log.JSON) {
	e.logj(slog.LevelError, j)
	panic(j)
}
func (e *echoLogger) Panicf(f string, a ...any) {
	e.log(slog.LevelError, fmt.Sprintf(f, a...))
	panic(fmt.Sprintf(f, a...))
}
