package executor

import (
	"context"
	"fmt"
	"time"
)

// Executor starts jobs, kills them and reports how they end.
type Executor interface {
	// Start starts a job and returns once it runs (or failed to start, with
	// an error wrapping ErrStartFailed; then no Exit follows). ctx bounds
	// only the starting, not the job. If ctx ends first, the error wraps
	// ctx's; with an executor whose jobs outlive the node (a StartRecorder)
	// the job may still start, exactly once: its Started, or a later
	// Start's ErrAlreadyStarted, tells.
	Start(ctx context.Context, spec Spec) error

	// Kill ends a running job: the executor asks it to stop (SIGTERM to its
	// process group) and forces it (SIGKILL) after the kill grace. The Exit
	// that follows has Killed set and Cause CauseRequest. Kill returns
	// ErrUnknownJob for a job the executor is not tracking.
	Kill(jobID string) error

	// Reattach makes the executor track a job started by an earlier
	// executor (an earlier node) on the same data directory, so that its
	// Exit is reported and Kill works on it. A job that already ended is
	// reported at once; one whose outcome cannot be known is reported as
	// Lost. Reattaching a tracked job does nothing.
	Reattach(jobID string) error

	// Exits returns the channel on which Run reports ended jobs, one Exit
	// per job. It is never closed; stop reading when Run has returned.
	// Across a restart delivery is at least once: a job whose Exit was
	// delivered but not yet recorded by the node is reported again after
	// Reattach, so the node ignores an Exit of a job it has already ended.
	Exits() <-chan Exit

	// Run watches the jobs and reports their ends until ctx is cancelled;
	// then it returns nil. Call it once, on a goroutine you own.
	Run(ctx context.Context) error
}

// CapacityReporter is implemented by executors in front of a batch system
// whose processors come and go (Slurm drains, loses and returns nodes).
type CapacityReporter interface {
	// Capacity returns the channel on which Run reports the processors
	// the batch system would start jobs on now, whenever that changes (and
	// once at the start). It is never closed.
	Capacity() <-chan int
}

// JobDirs is implemented by executors that keep a directory per job (the
// default place of its output).
type JobDirs interface {
	// JobDir returns the directory of a job.
	JobDir(jobID string) string
}

// Describer is implemented by executors whose jobs have a name of their
// own elsewhere (Slurm's job id), so that users can find them there.
type Describer interface {
	// Describe names what runs a tracked job ("Slurm job 42"); "" if
	// unknown.
	Describe(jobID string) string
}

// Spec is what an executor needs to run one job.
type Spec struct {
	// JobID names the job; it must be usable as a file name: 1 to 200
	// characters from [A-Za-z0-9._-], not starting with '.'.
	JobID string
	// Argv is the command (Process): Argv[0] is looked up in Env's PATH, or
	// in DefaultPath if Env has none. Required by Process.
	Argv []string
	// Env is the job's complete environment; the node's own is not
	// inherited. The executor adds FEDSCHED_JOB_ID=JobID unless Env sets it
	// (the node sets it to the id the user knows), and PATH=DefaultPath if
	// Env has no PATH.
	Env map[string]string
	// Workdir is the working directory; empty means the job's directory
	// (its work/ subdirectory when the job runs as another user).
	Workdir string
	// Deadline is when the job is killed if it still runs: the end of its
	// reservation. Zero means never. Process: a wall-clock time; Simulated:
	// a time of the executor's clock.
	Deadline time.Time
	// Limit, when not zero, is how long the job may run measured from when
	// its process started: the kill comes at Deadline or at that start
	// plus Limit, whichever is later, so that the executor's own start-up
	// (a busy host forking a supervisor) does not eat into the job's slot.
	// Process honours it; Simulated starts jobs at once and Slurm counts
	// from the submission, so both use Deadline alone.
	Limit time.Duration
	// Estimate is the user's runtime estimate. Simulated uses it when
	// Runtime is zero.
	Estimate time.Duration
	// Runtime is how long a Simulated job really runs; zero means Estimate.
	// Process ignores it.
	Runtime time.Duration
	// Started is when the node counts the job as started (its record's
	// whole second). Simulated measures Runtime from it when it is set and
	// not later than the executor's clock, so that the job's exit and its
	// record agree to the second however late the call came; Process and
	// Slurm ignore it.
	Started time.Time
	// Procs is how many processors the job holds (Slurm: its tasks). The
	// executor adds FEDSCHED_PROCS to the environment. 0 means 1.
	Procs int
	// Script, when set, is run instead of Argv: a batch script (Slurm
	// submits it as is, so it may start with any interpreter line).
	Script []byte
	// Stdout and Stderr are the files the job's output goes to; empty
	// means the job directory's stdout and stderr. They may be equal.
	Stdout, Stderr string
	// User is the job's authenticated user, whose account the job runs as
	// when the node runs as root (Process: see Accounts; Slurm: sbatch
	// --uid/--gid). Empty means the node's own.
	User string
}

// DefaultPath is the PATH a job gets when its environment has none.
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ExitStartFailed is the exit status recorded for a job whose command could
// not be started (the shells' "command not found" status).
const ExitStartFailed = 127

// KillCause says why an executor killed a job.
type KillCause string

// Kill causes.
const (
	// CauseNone: the executor did not kill the job.
	CauseNone KillCause = ""
	// CauseDeadline: the job reached Spec.Deadline, the end of its
	// reservation.
	CauseDeadline KillCause = "deadline"
	// CauseRequest: Kill was called (or someone sent SIGTERM to the
	// job's supervisor).
	CauseRequest KillCause = "request"
)

// Exit reports how a job ended.
type Exit struct {
	// JobID is the job.
	JobID string
	// ExitCode is the command's exit code, or 128 + the signal number when
	// a signal ended it (as a shell reports it); -1 when Lost.
	ExitCode int
	// Signaled is true when a signal ended the command; Signal is its
	// number.
	Signaled bool
	Signal   int
	// Killed is true when the executor ended the job (see Cause). A killed
	// job may still have exited by itself in its grace period, with any
	// ExitCode: decide by Killed and Cause, not by the code.
	Killed bool
	Cause  KillCause
	// Lost is true when the job's outcome cannot be known: its supervisor
	// vanished without recording it, or (Simulated) the executor that ran
	// it is gone. The other fields but JobID and At are then meaningless.
	Lost bool
	// ProviderFailed is true when the site, not the job, failed it: a
	// Slurm node failed under it, or it was cancelled outside fedsched.
	ProviderFailed bool
	// Detail says in a few words what the executor saw (for example the
	// batch system's end state); may be empty.
	Detail string
	// At is when the job ended (when it was found lost, if Lost), by the
	// executor's clock.
	At time.Time
}

// String describes the exit in a few words, for logs.
func (e Exit) String() string {
	switch {
	case e.Lost:
		return fmt.Sprintf("job %s lost", e.JobID)
	case e.Killed:
		return fmt.Sprintf("job %s killed (%s), exit %d", e.JobID, e.Cause, e.ExitCode)
	}
	return fmt.Sprintf("job %s exited %d", e.JobID, e.ExitCode)
}

// ValidJobID reports whether id can name a job's directory: 1 to 200
// characters from [A-Za-z0-9._-], not starting with '.'.
func ValidJobID(id string) bool {
	if id == "" || len(id) > 200 || id[0] == '.' {
		return false
	}
	for _, c := range []byte(id) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}

func checkJobID(id string) error {
	if !ValidJobID(id) {
		return fmt.Errorf("job id %q: %w", id, ErrInvalidSpec)
	}
	return nil
}

// StartRecorder is implemented by executors whose jobs outlive the node
// (Process, Slurm): Started reports whether a job was handed over and
// taken, even by an earlier node on the same data, and when it began and
// will be killed. A node that died right after starting a job, before
// storing that, finds it with Started at restart and records the job as it
// really runs. Executors whose jobs die with the node (Simulated) need not
// implement it.
type StartRecorder interface {
	Started(jobID string) (StartRecord, error)
}

// StartRecord is what an executor knows of a job it was handed.
type StartRecord struct {
	// Started is true once the executor took the job.
	Started bool
	// At is when the job began to run (Slurm: when it was submitted);
	// zero if not recorded yet.
	At time.Time
	// Deadline is the Spec.Deadline the job was started with: when it is
	// killed if it still runs. Zero means never (or not known).
	Deadline time.Time
}
