package executor

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fedsched/fedsched/node/clock"
)

// SimulatedConfig configures a Simulated executor.
type SimulatedConfig struct {
	// Clock is the executor's time; a clock.Scaled one makes jobs "run"
	// faster than real time. nil means clock.Real().
	Clock clock.Clock
	// Logger receives the executor's messages. nil discards them.
	Logger *slog.Logger
}

// Simulated is an executor whose jobs only pretend to run: a job ends with
// exit code 0 after Spec.Runtime (or Spec.Estimate) of the executor's clock,
// or is killed at its Spec.Deadline if that comes first. A job killed at its
// deadline or by Kill is reported as if SIGTERM ended it (Signaled, Signal
// 15, ExitCode 143). Nothing survives the executor: Reattach reports a job
// it does not track as Lost. Make one with NewSimulated.
type Simulated struct {
	clk     clock.Clock
	log     *slog.Logger
	exits   chan Exit
	wake    chan struct{} // buffer 1: tells Run the job set changed
	running atomic.Bool

	mu   sync.Mutex
	jobs map[string]*simJob
}

type simJob struct {
	id       string
	end      time.Time // when it exits by itself
	deadline time.Time // when it is killed; zero: never
	killAt   time.Time // when Kill was called; zero: not called
	lost     bool      // re-attached: report as lost
}

var _ Executor = (*Simulated)(nil)

// NewSimulated returns a Simulated executor. It starts nothing.
func NewSimulated(cfg SimulatedConfig) *Simulated {
	clk := cfg.Clock
	if clk == nil {
		clk = clock.Real()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Simulated{
		clk:   clk,
		log:   log.With("executor", "simulated"),
		exits: make(chan Exit, 64),
		wake:  make(chan struct{}, 1),
		jobs:  map[string]*simJob{},
	}
}

// Exits implements Executor.
func (s *Simulated) Exits() <-chan Exit { return s.exits }

func (s *Simulated) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Start implements Executor. The job starts at the clock's current time.
func (s *Simulated) Start(ctx context.Context, spec Spec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkJobID(spec.JobID); err != nil {
		return err
	}
	runtime := spec.Runtime
	if runtime == 0 {
		runtime = spec.Estimate
	}
	if runtime <= 0 {
		return fmt.Errorf("job %s: no positive runtime or estimate: %w", spec.JobID, ErrInvalidSpec)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.jobs[spec.JobID]; ok {
		return fmt.Errorf("job %s: %w", spec.JobID, ErrAlreadyStarted)
	}
	start := s.clk.Now()
	if !spec.Started.IsZero() && spec.Started.Before(start) {
		start = spec.Started
	}
	s.jobs[spec.JobID] = &simJob{id: spec.JobID, end: start.Add(runtime), deadline: spec.Deadline}
	s.log.Debug("job started", "job", spec.JobID, "runtime", runtime, "deadline", spec.Deadline)
	s.poke()
	return nil
}

// Kill implements Executor; the job ends at once.
func (s *Simulated) Kill(jobID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	j, ok := s.jobs[jobID]
	if !ok {
		return fmt.Errorf("kill job %s: %w", jobID, ErrUnknownJob)
	}
	if j.killAt.IsZero() {
		j.killAt = s.clk.Now()
	}
	s.poke()
	return nil
}

// Reattach implements Executor: a job this executor does not track is
// reported as Lost.
func (s *Simulated) Reattach(jobID string) error {
	if err := checkJobID(jobID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.jobs[jobID]; !ok {
		s.jobs[jobID] = &simJob{id: jobID, lost: true}
		s.poke()
	}
	return nil
}

// Run implements Executor.
func (s *Simulated) Run(ctx context.Context) error {
	if s.running.Swap(true) {
		return ErrAlreadyRunning
	}
	for {
		due, next := s.due()
		for _, e := range due {
			select {
			case s.exits <- e:
			case <-ctx.Done():
				return nil
			}
			s.log.Debug("job ended", "exit", e.String())
		}
		if len(due) > 0 {
			continue // the clock moved while we reported
		}
		var timer clock.Timer
		var fire <-chan time.Time
		if !next.IsZero() {
			timer = s.clk.NewTimer(next.Sub(s.clk.Now()))
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return nil
		case <-s.wake:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
	}
}

// due removes and returns the jobs that have ended by now, ordered by end
// time then id, and returns the next time a job will end (zero: none).
func (s *Simulated) due() ([]Exit, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clk.Now()
	var (
		out  []Exit
		next time.Time
	)
	for id, j := range s.jobs {
		e, at := j.outcome()
		if !at.After(now) {
			if e.Lost {
				e.At = now
			}
			out = append(out, e)
			delete(s.jobs, id)
			continue
		}
		if next.IsZero() || at.Before(next) {
			next = at
		}
	}
	slices.SortFunc(out, func(a, b Exit) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		return strings.Compare(a.JobID, b.JobID)
	})
	return out, next
}

// outcome returns how the job ends and when, if nothing else happens.
func (j *simJob) outcome() (Exit, time.Time) {
	term := int(syscall.SIGTERM)
	switch {
	case j.lost:
		return Exit{JobID: j.id, ExitCode: -1, Lost: true, At: time.Time{}}, time.Time{}
	case !j.killAt.IsZero():
		return Exit{JobID: j.id, ExitCode: 128 + term, Signaled: true, Signal: term, Killed: true, Cause: CauseRequest, At: j.killAt}, j.killAt
	case !j.deadline.IsZero() && j.deadline.Before(j.end):
		return Exit{JobID: j.id, ExitCode: 128 + term, Signaled: true, Signal: term, Killed: true, Cause: CauseDeadline, At: j.deadline}, j.deadline
	}
	return Exit{JobID: j.id, At: j.end}, j.end
}
