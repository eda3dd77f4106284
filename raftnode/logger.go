package raftnode

import (
	"context"
	"io"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// raftLogger gives hashicorp/raft (and its transport and snapshot store) a
// logger that writes to the node's slog.Logger, so their lines come out in
// the same format (text or JSON) and place as the node's own. Lines below
// level ("TRACE" … "ERROR"; WARN if it does not parse) are dropped.
func raftLogger(l *slog.Logger, level string) hclog.Logger {
	min := hclog.LevelFromString(level)
	if min == hclog.NoLevel {
		min = hclog.Warn
	}
	// The intercept logger's own output is off; the sink receives every
	// line and passes on those at or above min.
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: "raft", Level: hclog.Off, Output: io.Discard})
	il.RegisterSink(&slogSink{l: l, min: min})
	return il
}

// slogSink passes hclog lines on to slog.
type slogSink struct {
	l   *slog.Logger
	min hclog.Level
}

func (s *slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	if level < s.min || level == hclog.Off {
		return
	}
	lvl := slog.LevelError
	switch {
	case level <= hclog.Debug:
		lvl = slog.LevelDebug
	case level == hclog.Info:
		lvl = slog.LevelInfo
	case level == hclog.Warn:
		lvl = slog.LevelWarn
	}
	s.l.Log(context.Background(), lvl, msg, append(args, "logger", name)...)
}
