package executor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/clock"
)

func TestSimulatedScaledClock(t *testing.T) {
	origin := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.Scaled(origin, 1000) // 1000 virtual seconds per wall second
	s := NewSimulated(SimulatedConfig{Clock: clk})
	run(t, s)
	ctx := context.Background()
	wallStart := time.Now()
	start := clk.Now()
	// Runs its estimate: 100 s, i.e. 0.1 s of wall time.
	if err := s.Start(ctx, Spec{JobID: "a", Estimate: 100 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// Would run 1000 s but its reservation ends after 200 s.
	if err := s.Start(ctx, Spec{JobID: "b", Estimate: 300 * time.Second, Runtime: 1000 * time.Second, Deadline: start.Add(200 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	// Runs less than its estimate.
	if err := s.Start(ctx, Spec{JobID: "c", Estimate: 3600 * time.Second, Runtime: 50 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// Each job started between start and started.
	skew := clk.Now().Sub(start)

	want := []struct {
		id     string
		killed bool
		after  time.Duration // virtual time from start
	}{{"c", false, 50 * time.Second}, {"a", false, 100 * time.Second}, {"b", true, 200 * time.Second}}
	for _, w := range want {
		x := waitExit(t, s)
		if x.JobID != w.id || x.Killed != w.killed {
			t.Fatalf("exit = %+v, want job %s killed=%v", x, w.id, w.killed)
		}
		// Exits carry the planned virtual end, give or take the start skew.
		if d := x.At.Sub(start) - w.after; d < 0 || d > skew {
			t.Errorf("job %s ended at start+%v, want start+%v", w.id, x.At.Sub(start), w.after)
		}
		if w.killed && (x.Cause != CauseDeadline || x.ExitCode != 143) {
			t.Errorf("job %s: %+v, want killed at deadline with 143", w.id, x)
		}
		if !w.killed && x.ExitCode != 0 {
			t.Errorf("job %s: exit code %d", w.id, x.ExitCode)
		}
	}
	if d := time.Since(wallStart); d > 5*time.Second {
		t.Errorf("200 virtual seconds at x1000 took %v of wall time", d)
	}
}

func TestSimulatedManualClock(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clock.NewManual(t0)
	s := NewSimulated(SimulatedConfig{Clock: clk})
	run(t, s)
	ctx := context.Background()
	if err := s.Start(ctx, Spec{JobID: "a", Estimate: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, Spec{JobID: "a", Estimate: time.Hour}); !errors.Is(err, ErrAlreadyStarted) {
		t.Fatalf("second Start = %v", err)
	}
	if err := s.Start(ctx, Spec{JobID: "z"}); !errors.Is(err, ErrInvalidSpec) {
		t.Fatalf("Start without runtime = %v", err)
	}
	if err := s.Start(ctx, Spec{JobID: "k", Estimate: time.Hour}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return clk.Waiters() > 0 })
	if err := s.Kill("k"); err != nil {
		t.Fatal(err)
	}
	if x := waitExit(t, s); x.JobID != "k" || !x.Killed || x.Cause != CauseRequest || !x.At.Equal(t0) {
		t.Fatalf("exit = %+v, want k killed at t0", x)
	}
	if err := s.Kill("k"); !errors.Is(err, ErrUnknownJob) {
		t.Fatalf("Kill after exit = %v", err)
	}
	select {
	case x := <-s.Exits():
		t.Fatalf("job ended before its time: %+v", x)
	case <-time.After(20 * time.Millisecond):
	}
	clk.Advance(time.Hour)
	if x := waitExit(t, s); x.JobID != "a" || x.ExitCode != 0 || !x.At.Equal(t0.Add(time.Hour)) {
		t.Fatalf("exit = %+v, want a at t0+1h", x)
	}

	// Nothing survives a Simulated executor: a job it never ran is lost.
	if err := s.Reattach("before-restart"); err != nil {
		t.Fatal(err)
	}
	if x := waitExit(t, s); x.JobID != "before-restart" || !x.Lost {
		t.Fatalf("exit = %+v, want lost", x)
	}
}

func TestRunTwice(t *testing.T) {
	s := NewSimulated(SimulatedConfig{})
	run(t, s)
	waitFor(t, func() bool { return s.running.Load() })
	if err := s.Run(context.Background()); !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second Run = %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met in time")
}

// TestSimulatedRuntimeFromStarted: a job's runtime counts from the
// second the node recorded as its start, not from the late call.
func TestSimulatedRuntimeFromStarted(t *testing.T) {
	origin := time.Unix(1_000_000, 0)
	clk := clock.NewManual(origin.Add(1500 * time.Millisecond))
	s := NewSimulated(SimulatedConfig{Clock: clk})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx) //nolint:errcheck // ends with ctx
	if err := s.Start(ctx, Spec{JobID: "j", Runtime: 10 * time.Second, Started: origin}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(8500 * time.Millisecond) // origin + 10 s
	select {
	case e := <-s.Exits():
		if !e.At.Equal(origin.Add(10 * time.Second)) {
			t.Errorf("exit at %v, want %v", e.At, origin.Add(10*time.Second))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no exit 10 s after the recorded start")
	}
}
