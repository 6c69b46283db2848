package node

import (
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/store"
)

// startManualNode runs a conservative node of procs processors on a
// memory store and a clock that stays at t0 until the test ends.
func startManualNode(tb testing.TB, t0 time.Time, procs int) *Node {
	tb.Helper()
	cfg := config.Default()
	cfg.Site, cfg.DataDir, cfg.Procs, cfg.Executor, cfg.Policy = "t", tb.TempDir(), procs, "simulated", "conservative"
	cfg.Limits.MaxPendingJobs, cfg.Limits.MaxIdempotencyKeys = 1<<30, 1<<30
	n, stop := startOnClock(tb, cfg, store.NewMemStore(), clock.NewManual(t0))
	tb.Cleanup(stop)
	return n
}
