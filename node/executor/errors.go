package executor

import "errors"

// Errors returned by executors. They are wrapped with context: test with
// errors.Is.
var (
	// ErrInvalidSpec is returned by Start for a job id that cannot name a
	// directory, an empty command (Process), or a non-positive runtime
	// (Simulated).
	ErrInvalidSpec = errors.New("invalid job spec")

	// ErrAlreadyStarted is returned by Start for a job id this executor (or,
	// for Process, an earlier node on the same data directory) has started
	// before. A job never runs twice.
	ErrAlreadyStarted = errors.New("job already started")

	// ErrStartFailed is returned by Start when the job's command could not be
	// started: no such program, an unusable working directory, a supervisor
	// that did not come up.
	ErrStartFailed = errors.New("job could not be started")

	// ErrUnknownJob is returned by Kill for a job the executor is not
	// tracking (never started, or already reported), and by Reattach for a
	// job that was never started (Process: no supervisor claimed its
	// directory).
	ErrUnknownJob = errors.New("unknown job")

	// ErrAlreadyRunning is returned by a second call to Run.
	ErrAlreadyRunning = errors.New("executor is already running")
)
