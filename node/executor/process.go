package executor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ProcessConfig configures a Process executor.
type ProcessConfig struct {
	// DataDir is the node's data directory; jobs live in
	// DataDir/jobs/<Epoch>/<id>. Required.
	DataDir string
	// Epoch names the generation of the node's store (see
	// node.StoreEpoch): a store made afresh never finds the directories of
	// an earlier store's jobs under the same ids. "" is the layout of
	// stores made before epochs: DataDir/jobs/<id>.
	Epoch string
	// SupervisorCommand is the command that runs RunSupervisor: the job's
	// directory is appended as its last argument. The node uses its own
	// binary: {os.Executable(), "supervise"}. Required.
	SupervisorCommand []string
	// SupervisorEnv is added to the node's environment for the supervisor
	// (not for the job). Tests use it to turn the test binary into a
	// supervisor. Optional.
	SupervisorEnv []string
	// KillGrace is how long a job has between SIGTERM and SIGKILL. 0 means
	// DefaultKillGrace; it cannot be turned off.
	KillGrace time.Duration
	// PollInterval is how often Run checks the jobs for their end. 0 means
	// DefaultPollInterval. Shorter reports ends sooner at the cost of a few
	// system calls per job and interval.
	PollInterval time.Duration
	// StartTimeout bounds how long Start waits for the supervisor to report
	// that the job runs. 0 means DefaultStartTimeout.
	StartTimeout time.Duration
	// Logger receives the executor's messages. nil discards them.
	Logger *slog.Logger
	// Accounts says whose account jobs run as when the node runs as root.
	Accounts Accounts
}

// Defaults of ProcessConfig.
const (
	DefaultKillGrace    = 10 * time.Second
	DefaultPollInterval = 250 * time.Millisecond
	DefaultStartTimeout = 10 * time.Second
)

// Process runs jobs as local process groups under supervising processes.
// Make one with NewProcess.
type Process struct {
	cfg     ProcessConfig
	log     *slog.Logger
	exits   chan Exit
	running atomic.Bool

	mu    sync.Mutex
	jobs  map[string]*procJob // tracked jobs, by id
	reapQ []int               // pids of our exited-or-exiting children to reap
}

// procJob is a job Process tracks.
type procJob struct {
	id  string
	dir string
	// sup is the supervisor as read from supervisor.json (PID 0 until read).
	sup supervisorState
	// child is true when this executor started the supervisor, which is then
	// its child: it must be reaped, and kill(2) cannot tell a zombie.
	child bool
	// noSupervisorUntil: when a re-attached job has no supervisor.json yet,
	// the supervisor may still be starting; after this time it is lost.
	noSupervisorUntil time.Time
}

var _ Executor = (*Process)(nil)

// NewProcess returns a Process executor. It starts nothing; it removes the
// job directories an earlier node was preparing when it died.
func NewProcess(cfg ProcessConfig) (*Process, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("executor: ProcessConfig.DataDir is required")
	}
	if len(cfg.SupervisorCommand) == 0 || cfg.SupervisorCommand[0] == "" {
		return nil, errors.New("executor: ProcessConfig.SupervisorCommand is required")
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultPollInterval
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	p := &Process{
		cfg:   cfg,
		log:   log.With("executor", "process"),
		exits: make(chan Exit, 64),
		jobs:  map[string]*procJob{},
	}
	if err := removeUnfinishedDirs(p.JobsDir()); err != nil {
		return nil, fmt.Errorf("executor: remove unfinished job directories: %w", err)
	}
	return p, nil
}

// JobDir returns the directory of a job: <data dir>/jobs/<epoch>/<id>, or
// <data dir>/jobs/<id> for a store made before epochs (Epoch "").
func (p *Process) JobDir(jobID string) string {
	return filepath.Join(p.JobsDir(), jobID)
}

// JobsDir returns the directory holding this store's job directories.
func (p *Process) JobsDir() string {
	return filepath.Join(p.cfg.DataDir, "jobs", p.cfg.Epoch)
}

// Exits implements Executor.
func (p *Process) Exits() <-chan Exit { return p.exits }

// Start implements Executor. It writes spec.json, starts the supervisor and
// waits (at most StartTimeout, or until ctx ends) for it to report that the
// job's command runs. A supervisor that does not report in StartTimeout is
// told to end (SIGTERM; the job failed to start, and does not run, or is
// ended and recorded so). When ctx ends first, the supervisor is
// left to go on and Start returns ctx's error: the job's directory then
// says whether the supervisor took the job (Started; a later Start returns
// ErrAlreadyStarted and Reattach follows it) or not yet (a later Start
// runs it, once: only one supervisor claims a job).
func (p *Process) Start(ctx context.Context, spec Spec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkJobID(spec.JobID); err != nil {
		return err
	}
	if len(spec.Script) == 0 && (len(spec.Argv) == 0 || spec.Argv[0] == "") {
		return fmt.Errorf("job %s: empty command: %w", spec.JobID, ErrInvalidSpec)
	}
	p.mu.Lock()
	_, tracked := p.jobs[spec.JobID]
	p.mu.Unlock()
	if tracked {
		return fmt.Errorf("job %s: %w", spec.JobID, ErrAlreadyStarted)
	}
	acc, err := p.cfg.Accounts.resolve(spec.User, os.Getuid())
	if err != nil {
		return fmt.Errorf("job %s: %w: %w", spec.JobID, ErrStartFailed, err)
	}
	dir := p.JobDir(spec.JobID)
	// The directory appears whole (spec.json complete and durable) or not
	// at all, and a job whose supervisor claimed it is never run again,
	// even when a node that died before storing the start asks again.
	argv := spec.Argv
	if len(spec.Script) > 0 {
		argv = scriptArgv(dir, spec.Script, spec.Argv)
	}
	sf := jobSpecFile{JobID: spec.JobID, Argv: argv, Env: spec.Env, Workdir: spec.Workdir,
		Deadline: spec.Deadline, Limit: spec.Limit, KillGrace: p.cfg.KillGrace, Stdout: spec.Stdout, Stderr: spec.Stderr}
	if acc.Switch {
		sf.RunAs = &runAs{User: acc.Name, UID: acc.UID, GID: acc.GID, Groups: acc.Groups}
		if sf.Workdir == "" {
			sf.Workdir = filepath.Join(dir, workDir)
		}
	}
	if err := prepareJobDir(dir, sf); err != nil {
		return fmt.Errorf("job %s: %w", spec.JobID, err)
	}
	if err := openJobDir(dir, acc); err != nil {
		return fmt.Errorf("job %s: prepare its directory for user %s: %w: %w", spec.JobID, acc.Name, ErrStartFailed, err)
	}
	if len(spec.Script) > 0 {
		// Before the supervisor starts; a node that dies here leaves an
		// unclaimed directory, and the job's next Start writes it again.
		if err := writeScript(dir, spec.Script); err != nil {
			return fmt.Errorf("job %s: write script: %w", spec.JobID, err)
		}
	}

	sup, err := p.startSupervisor(ctx, dir)
	if err != nil {
		return fmt.Errorf("job %s: %w", spec.JobID, err)
	}
	p.mu.Lock()
	p.jobs[spec.JobID] = &procJob{id: spec.JobID, dir: dir, sup: sup, child: true}
	p.mu.Unlock()
	p.log.Info("job started", "job", spec.JobID, "supervisor", sup.PID, "pgid", sup.PGID)
	return nil
}

// startSupervisor runs the supervisor for a job directory and waits for its
// readiness report. On success the supervisor is our child, to be reaped by
// Run.
func (p *Process) startSupervisor(ctx context.Context, dir string) (supervisorState, error) {
	logf, err := os.OpenFile(filepath.Join(dir, supervisorLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return supervisorState{}, err
	}
	defer logf.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return supervisorState{}, err
	}
	defer devnull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return supervisorState{}, err
	}
	defer r.Close()

	argv := append(slices.Clone(p.cfg.SupervisorCommand), dir)
	env := mergeEnv(os.Environ(), p.cfg.SupervisorEnv, []string{ReadyFDEnv + "=3"})
	proc, err := os.StartProcess(argv[0], argv, &os.ProcAttr{
		Env:   env,
		Files: []*os.File{devnull, logf, logf, w},
		// Its own session: no signal aimed at the node's process group or
		// terminal reaches the supervisor or the job.
		Sys: &syscall.SysProcAttr{Setsid: true},
	})
	w.Close()
	if err != nil {
		return supervisorState{}, fmt.Errorf("start supervisor: %v: %w", err, ErrStartFailed)
	}
	pid := proc.Pid
	// We reap the supervisor ourselves with wait4(2) (see reap), so the
	// os.Process handle is not needed.
	proc.Release()

	r.SetReadDeadline(time.Now().Add(p.cfg.StartTimeout))
	stop := context.AfterFunc(ctx, func() { r.SetReadDeadline(time.Now()) })
	// One line: "ok", or "error <why>".
	msg, rerr := bufio.NewReader(r).ReadString('\n')
	stop()
	line := strings.TrimSpace(msg)
	switch {
	case line == "ok":
		var st supervisorState
		if err := readJSON(filepath.Join(dir, supervisorFile), &st); err != nil {
			// The supervisor wrote it before saying ok; this cannot happen
			// short of a broken disk. Fall back to what we know.
			st = supervisorState{PID: pid}
		}
		return st, nil
	case line == claimedReport:
		// Another supervisor (started by a node that died) holds the job.
		p.waitChild(pid)
		return supervisorState{}, fmt.Errorf("claimed by an earlier supervisor: %w", ErrAlreadyStarted)
	case strings.HasPrefix(line, "error "):
		p.waitChild(pid)
		return supervisorState{}, fmt.Errorf("%s: %w", strings.TrimPrefix(line, "error "), ErrStartFailed)
	}
	if ctx.Err() != nil && !errors.Is(rerr, io.EOF) {
		// The caller stopped waiting (the node is stopping), not the
		// supervisor: it is left to go on, as it would be had the node
		// died. Killing it could not tell whether the job had started. The
		// job's directory tells it later: claimed, and the job runs (or
		// ran, or was refused) under this supervisor, which records its
		// end; not claimed, and the job has not started, and this
		// supervisor or the next Start's, but only one, claims it.
		p.queueReap(pid)
		p.log.Info("start cut short; the supervisor goes on", "dir", dir, "supervisor", pid)
		return supervisorState{}, fmt.Errorf("start supervisor: %w (supervisor %d goes on: Started or Start again tells whether it took the job)", ctx.Err(), pid)
	}
	if rerr != nil && !errors.Is(rerr, io.EOF) {
		// No report in StartTimeout: the supervisor hangs, or is very
		// slow. It is told to end with SIGTERM, which it catches from its
		// first moment: it then leaves the job unclaimed, or does not
		// start it, or ends it and records that. SIGKILL could leave a job
		// it had started, and not yet recorded, running unwatched.
		syscall.Kill(pid, syscall.SIGTERM)
		p.queueReap(pid)
		return supervisorState{}, fmt.Errorf("start supervisor: no report within %v, supervisor %d told to end (see %s): %w",
			p.cfg.StartTimeout, pid, filepath.Join(dir, supervisorLog), ErrStartFailed)
	}
	// The supervisor exited without a report (or made no sense): whatever
	// it may have started of the job goes too.
	syscall.Kill(-pid, syscall.SIGKILL)
	p.waitChild(pid)
	var st supervisorState
	if readJSON(filepath.Join(dir, supervisorFile), &st) == nil && st.PGID > 0 {
		syscall.Kill(-st.PGID, syscall.SIGKILL)
	}
	return supervisorState{}, fmt.Errorf("start supervisor: no usable report (%q) before it exited; see %s: %w", line, filepath.Join(dir, supervisorLog), ErrStartFailed)
}

// mergeEnv concatenates KEY=VALUE lists; a later entry replaces an earlier
// one with the same key (getenv would otherwise see the first).
func mergeEnv(lists ...[]string) []string {
	var out []string
	index := map[string]int{}
	for _, list := range lists {
		for _, kv := range list {
			k, _, _ := strings.Cut(kv, "=")
			if i, ok := index[k]; ok {
				out[i] = kv
				continue
			}
			index[k] = len(out)
			out = append(out, kv)
		}
	}
	return out
}

// waitChild reaps a child that is exiting or has exited.
func (p *Process) waitChild(pid int) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			return
		}
	}
}

// Kill implements Executor: it sends SIGTERM to the job's supervisor, which
// terminates the job's process group (SIGTERM, then SIGKILL after the kill
// grace) and records the kill. If the supervisor is gone, the job's process
// group gets SIGKILL directly.
func (p *Process) Kill(jobID string) error {
	p.mu.Lock()
	j, ok := p.jobs[jobID]
	var (
		sup supervisorState
		dir string
	)
	if ok {
		sup, dir = j.sup, j.dir
	}
	p.mu.Unlock()
	if !ok {
		return fmt.Errorf("kill job %s: %w", jobID, ErrUnknownJob)
	}
	if sup.PID == 0 {
		// Re-attached while its supervisor was starting it: the
		// supervisor that claimed it takes the request (it then does not
		// start the job, or ends it at once, and records the kill).
		var st supervisorState
		if readJSON(filepath.Join(dir, supervisorFile), &st) == nil {
			sup = st
		} else if pid, ticks, ok := claimant(dir); ok {
			sup = supervisorState{PID: pid, PIDStart: ticks}
		}
	}
	if sup.PID > 0 && alive(sup.PID, sup.PIDStart) {
		if err := syscall.Kill(sup.PID, syscall.SIGTERM); err == nil || errors.Is(err, syscall.ESRCH) {
			p.log.Info("kill requested", "job", jobID, "supervisor", sup.PID)
			return nil
		} else {
			return fmt.Errorf("kill job %s: signal supervisor %d: %w", jobID, sup.PID, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, exitFile)); err == nil {
		// The job ended and its supervisor recorded it (Run reports it):
		// its process group is gone, and its number may be another's now.
		return nil
	}
	if sup.PGID > 0 {
		if err := syscall.Kill(-sup.PGID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill job %s: signal process group %d: %w", jobID, sup.PGID, err)
		}
	}
	// Run reports the job as lost: its supervisor cannot record the end.
	return nil
}

// Started implements StartRecorder: a supervisor claimed the job's
// directory.
func (p *Process) Started(jobID string) (StartRecord, error) {
	if err := checkJobID(jobID); err != nil {
		return StartRecord{}, err
	}
	dir := p.JobDir(jobID)
	if !claimed(dir) {
		return StartRecord{}, nil
	}
	r := StartRecord{Started: true}
	var sup supervisorState
	if readJSON(filepath.Join(dir, supervisorFile), &sup) == nil {
		r.At = sup.StartedAt
	}
	var spec jobSpecFile
	if readJSON(filepath.Join(dir, specFile), &spec) == nil {
		r.Deadline = spec.Deadline
	}
	return r, nil
}

var _ StartRecorder = (*Process)(nil)

// Reattach implements Executor.
func (p *Process) Reattach(jobID string) error {
	if err := checkJobID(jobID); err != nil {
		return err
	}
	dir := p.JobDir(jobID)
	if !claimed(dir) {
		// No supervisor took the job: it never started (a node died while
		// preparing it); Start runs it.
		return fmt.Errorf("reattach job %s: no supervisor claimed %s: %w", jobID, dir, ErrUnknownJob)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.jobs[jobID]; ok {
		return nil
	}
	j := &procJob{id: jobID, dir: dir}
	if err := readJSON(filepath.Join(dir, supervisorFile), &j.sup); err != nil {
		j.sup = supervisorState{}
		j.noSupervisorUntil = time.Now().Add(p.cfg.StartTimeout)
	}
	p.jobs[jobID] = j
	p.log.Info("job re-attached", "job", jobID, "supervisor", j.sup.PID, "pgid", j.sup.PGID)
	return nil
}

// Run implements Executor. It polls every PollInterval: a job has ended when
// its exit.json exists, and is lost when its supervisor is gone without
// writing one.
func (p *Process) Run(ctx context.Context) error {
	if p.running.Swap(true) {
		return ErrAlreadyRunning
	}
	t := time.NewTicker(p.cfg.PollInterval)
	defer t.Stop()
	for {
		p.poll(ctx)
		select {
		case <-ctx.Done():
			p.drainReapQueue()
			return nil
		case <-t.C:
		}
	}
}

// drainReapQueue reaps, for a moment (at most a second), the queued
// supervisors: those whose jobs were reported exit right after writing
// exit.json, and one told to end at its start timeout soon follows. One
// whose start the same stop cut short (it goes on, and may run its job
// for long) is, if queued by then, waited for that second and then left,
// as are the supervisors of jobs still running: they outlive the node.
func (p *Process) drainReapQueue() {
	for deadline := time.Now().Add(time.Second); ; time.Sleep(5 * time.Millisecond) {
		p.reap()
		p.mu.Lock()
		n := len(p.reapQ)
		p.mu.Unlock()
		if n == 0 || time.Now().After(deadline) {
			return
		}
	}
}

// poll checks every tracked job once and reports the ended ones.
func (p *Process) poll(ctx context.Context) {
	p.reap()
	// check works on copies; only the tracked map is shared with Start,
	// Kill and Reattach.
	p.mu.Lock()
	jobs := make([]procJob, 0, len(p.jobs))
	for _, j := range p.jobs {
		jobs = append(jobs, *j)
	}
	p.mu.Unlock()
	slices.SortFunc(jobs, func(a, b procJob) int { return strings.Compare(a.id, b.id) })

	for i := range jobs {
		j := &jobs[i]
		e, done := p.check(j)
		p.mu.Lock()
		tracked, ok := p.jobs[j.id]
		if ok {
			*tracked = *j
			if done {
				// Untracked before the report goes out: once a reader has
				// the Exit, Kill of the job is ErrUnknownJob.
				delete(p.jobs, j.id)
			}
		}
		p.mu.Unlock()
		if !done || !ok {
			continue
		}
		select {
		case p.exits <- e:
		case <-ctx.Done():
			// Not reported: track it again, for the next Run.
			p.mu.Lock()
			p.jobs[j.id] = tracked
			p.mu.Unlock()
			return
		}
		if j.child && j.sup.PID > 0 {
			p.queueReap(j.sup.PID)
		}
		p.log.Info("job ended", "job", j.id, "exit", e.String())
	}
	p.reap()
}

// check looks at one job: done is true when it has ended (or is lost).
func (p *Process) check(j *procJob) (Exit, bool) {
	if e, ok := p.readExit(j); ok {
		return e, true
	}
	if j.sup.PID == 0 {
		// Re-attached before the supervisor wrote supervisor.json: it is
		// starting the job while the supervisor that claimed it lives.
		if err := readJSON(filepath.Join(j.dir, supervisorFile), &j.sup); err == nil {
			return Exit{}, false
		}
		if pid, ticks, ok := claimant(j.dir); ok {
			if alive(pid, ticks) {
				return Exit{}, false
			}
			// Gone; it may have recorded the job just before.
			if e, ok := p.readExit(j); ok {
				return e, true
			}
			if err := readJSON(filepath.Join(j.dir, supervisorFile), &j.sup); err == nil {
				return Exit{}, false // the next poll finds it gone
			}
		} else if time.Now().Before(j.noSupervisorUntil) {
			// A claim without the claimant's start time (being written, or
			// made by an older supervisor): wait a start's time.
			return Exit{}, false
		}
		p.log.Warn("job lost: its supervisor is gone without recording the job's start or end", "job", j.id)
		return Exit{JobID: j.id, ExitCode: -1, Lost: true, At: time.Now()}, true
	}
	if p.supervisorAlive(j) {
		return Exit{}, false
	}
	// The supervisor is gone. It may have written exit.json just before.
	if e, ok := p.readExit(j); ok {
		return e, true
	}
	// It died without recording the end: the outcome is lost. Whatever it
	// left running of the job would be unaccounted for: kill it.
	if j.sup.PGID > 0 {
		if err := syscall.Kill(-j.sup.PGID, syscall.SIGKILL); err == nil {
			p.log.Warn("killed the orphaned process group of a lost job", "job", j.id, "pgid", j.sup.PGID)
		}
	}
	p.log.Warn("job lost: supervisor gone without an exit record", "job", j.id, "supervisor", j.sup.PID)
	return Exit{JobID: j.id, ExitCode: -1, Lost: true, At: time.Now()}, true
}

func (p *Process) supervisorAlive(j *procJob) bool {
	if j.child {
		// Our child: reaping tells for sure (and a zombie would fool kill).
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(j.sup.PID, &ws, syscall.WNOHANG, nil)
		switch {
		case pid == j.sup.PID, errors.Is(err, syscall.ECHILD):
			j.child = false // reaped (by us now, or before)
			j.sup.PID = -1
			return false
		case err != nil:
			return alive(j.sup.PID, j.sup.PIDStart)
		}
		return true
	}
	return alive(j.sup.PID, j.sup.PIDStart)
}

// readExit reads a job's exit.json if it exists.
func (p *Process) readExit(j *procJob) (Exit, bool) {
	var st exitState
	if err := readJSON(filepath.Join(j.dir, exitFile), &st); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			p.log.Error("unreadable exit file", "job", j.id, "err", err)
		}
		return Exit{}, false
	}
	return Exit{
		JobID: j.id, ExitCode: st.ExitCode, Signaled: st.Signaled, Signal: st.Signal,
		Killed: st.Killed, Cause: st.Cause, At: st.At,
	}, true
}

// queueReap queues pid, a supervisor we started, for reap.
func (p *Process) queueReap(pid int) {
	p.mu.Lock()
	p.reapQ = append(p.reapQ, pid)
	p.mu.Unlock()
}

// reap collects the exit statuses of supervisors that were our children, so
// that none stays a zombie.
func (p *Process) reap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	kept := p.reapQ[:0]
	for _, pid := range p.reapQ {
		var ws syscall.WaitStatus
		got, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if got == 0 && err == nil {
			kept = append(kept, pid) // still running (about to exit)
		}
	}
	p.reapQ = kept
}
