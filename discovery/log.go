package discovery

import (
	"bytes"
	"context"
	"io"
	"log"
	"log/slog"
)

// discardLogger returns l, or a logger that discards everything if l is nil.
func discardLogger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}

// memberlistLogger returns a *log.Logger, the kind memberlist takes, whose
// lines go to l with component=memberlist. memberlist starts each line with
// a level tag ("[DEBUG] memberlist: ...", "[INFO]", "[WARN]", "[ERR]"); the
// tag chooses the slog level and is cut from the message. A line without a
// tag is logged at debug level.
func memberlistLogger(l *slog.Logger) *log.Logger {
	return log.New(slogWriter{l: l}, "", 0)
}

// slogWriter turns each Write, one log line, into one slog record.
type slogWriter struct{ l *slog.Logger }

var levelTags = []struct {
	tag   []byte
	level slog.Level
}{
	{[]byte("[DEBUG]"), slog.LevelDebug},
	{[]byte("[INFO]"), slog.LevelInfo},
	{[]byte("[WARN]"), slog.LevelWarn},
	{[]byte("[ERR]"), slog.LevelError},
	{[]byte("[ERROR]"), slog.LevelError},
}

func (w slogWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelDebug
	for _, t := range levelTags {
		if rest, ok := bytes.CutPrefix(line, t.tag); ok {
			level, line = t.level, bytes.TrimSpace(rest)
			break
		}
	}
	ctx := context.Background()
	if w.l.Enabled(ctx, level) {
		line = bytes.TrimPrefix(line, []byte("memberlist: "))
		w.l.Log(ctx, level, string(line), "component", "memberlist")
	}
	return len(p), nil
}

var _ io.Writer = slogWriter{}
