package node

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"google.golang.org/grpc/grpclog"

	"github.com/fedsched/fedsched/node/config"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// NewLogger returns the logger a node writes to w with: text or JSON lines
// at the configured lowest level. cfg must be valid (config.Validate).
func NewLogger(cfg config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.Level)); err != nil {
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// GRPCLogger adapts l to gRPC's logger so that what gRPC itself logs goes
// to the node's log in its format (with component=grpc) instead of plain
// lines on stderr. gRPC's INFO chatter is logged at debug level. Install it
// with grpclog.SetLoggerV2 before any gRPC call.
func GRPCLogger(l *slog.Logger) grpclog.LoggerV2 {
	return grpcLogger{l.With("component", "grpc")}
}

type grpcLogger struct{ l *slog.Logger }

func (g grpcLogger) Info(args ...any)                    { g.l.Debug(fmt.Sprint(args...)) }
func (g grpcLogger) Infoln(args ...any)                  { g.l.Debug(strings.TrimSpace(fmt.Sprintln(args...))) }
func (g grpcLogger) Infof(format string, args ...any)    { g.l.Debug(fmt.Sprintf(format, args...)) }
func (g grpcLogger) Warning(args ...any)                 { g.l.Warn(fmt.Sprint(args...)) }
func (g grpcLogger) Warningln(args ...any)               { g.l.Warn(strings.TrimSpace(fmt.Sprintln(args...))) }
func (g grpcLogger) Warningf(format string, args ...any) { g.l.Warn(fmt.Sprintf(format, args...)) }
func (g grpcLogger) Error(args ...any)                   { g.l.Error(fmt.Sprint(args...)) }
func (g grpcLogger) Errorln(args ...any)                 { g.l.Error(strings.TrimSpace(fmt.Sprintln(args...))) }
func (g grpcLogger) Errorf(format string, args ...any)   { g.l.Error(fmt.Sprintf(format, args...)) }
func (g grpcLogger) Fatal(args ...any)                   { g.l.Error(fmt.Sprint(args...)); os.Exit(1) }
func (g grpcLogger) Fatalln(args ...any) {
	g.l.Error(strings.TrimSpace(fmt.Sprintln(args...)))
	os.Exit(1)
}
func (g grpcLogger) Fatalf(format string, args ...any) {
	g.l.Error(fmt.Sprintf(format, args...))
	os.Exit(1)
}

// V reports whether gRPC's verbosity level l is logged: only level 0, and
// only when the node logs at debug level.
func (g grpcLogger) V(l int) bool {
	return l == 0 && g.l.Enabled(context.Background(), slog.LevelDebug)
}

// observeTransition counts a job's state change in the metrics and writes
// one log line for it: every decision the site takes on a job (accepted,
// queued, rejected, started, ended, delegated) carries the job id (and the
// site, from n.log).
func (n *Node) observeTransition(j *fedschedv1.Job, prev fedschedv1.JobState) {
	n.metrics.transition(n.cfg.Site, j, prev, n.agreedPrice(j, prev))
	if s := j.GetState(); terminal(s) || s == fedschedv1.JobState_JOB_STATE_DELEGATED {
		n.remember(j)
	}
	if !n.log.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	from := "NEW"
	if prev != fedschedv1.JobState_JOB_STATE_UNSPECIFIED {
		from = stateName(prev)
	}
	n.log.Info("job "+strings.ToLower(stateName(j.GetState())), "job", j.GetId(), "from", from,
		"reason", strings.ToLower(strings.TrimPrefix(j.GetReason().String(), "REASON_")), "message", j.GetMessage())
}
