package executor

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ReadyFDEnv names the environment variable through which the executor
// tells the supervisor which file descriptor to report readiness on.
const ReadyFDEnv = "FEDSCHED_SUPERVISOR_READY_FD"

// RunSupervisor is the body of the hidden `fedsched supervise <job dir>`
// subcommand, which the Process executor runs once per job. It returns the
// process's exit status: 0 once the job has ended and exit.json is written
// (whatever the job's own status), 1 if the job could not be started, 2 for
// bad arguments.
//
// The supervisor reads <job dir>/spec.json, starts the job's command in a
// new process group with its output in <job dir>/stdout and stderr, records
// its own pid and the group in supervisor.json, and tells the executor over
// the file descriptor named by FEDSCHED_SUPERVISOR_READY_FD (if set) that
// the job runs. It then waits. At the spec's deadline, or when it receives
// SIGTERM, SIGINT or SIGHUP, it sends SIGTERM to the job's process group and
// SIGKILL after the kill grace. When the job's first process ends it kills
// what is left of the group, writes exit.json atomically and returns.
//
// It logs to its standard error; the Process executor points that at
// <job dir>/supervisor.log.
func RunSupervisor(args []string) int {
	return RunSupervisorSteps(args, nil)
}

// SupervisorStep names a point of the supervisor's start, in the order the
// supervisor reaches them. What a job directory holds tells which point an
// interrupted start had passed (see Process.Started).
type SupervisorStep string

// The steps of a supervisor's start.
const (
	// StepBeforeClaim: nothing done; another supervisor may still claim
	// the job.
	StepBeforeClaim SupervisorStep = "before-claim"
	// StepClaimed: the claim file (with this supervisor's pid) is durable;
	// the job's process has not started.
	StepClaimed SupervisorStep = "claimed"
	// StepJobStarted: the job's process runs; supervisor.json is not
	// written yet.
	StepJobStarted SupervisorStep = "job-started"
	// StepRecorded: supervisor.json is durable; the executor has not been
	// told yet.
	StepRecorded SupervisorStep = "recorded"
)

// RunSupervisorSteps is RunSupervisor, calling step (if not nil) at each
// SupervisorStep with the job directory. Tests pause the supervisor there
// (package supervisortest).
func RunSupervisorSteps(args []string, step func(dir string, s SupervisorStep)) int {
	if step == nil {
		step = func(string, SupervisorStep) {}
	}
	// The job's process dies with the thread that forked it
	// (dieWithParent): this one, kept until the job has ended.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if len(args) != 1 || args[0] == "" {
		log.Error("usage: fedsched supervise <job dir>")
		return 2
	}
	dir := args[0]
	log = log.With("dir", dir)
	ready := readyFile()
	report := func(msg string) {
		if ready != nil {
			io.WriteString(ready, msg+"\n")
			ready.Close()
			ready = nil
		}
	}
	failStart := func(err error) int {
		log.Error("cannot start job", "err", err)
		if werr := writeJSON(filepath.Join(dir, exitFile), exitState{ExitCode: ExitStartFailed, StartError: err.Error(), At: time.Now()}); werr != nil {
			log.Error("cannot write exit file", "err", werr)
		}
		report("error " + err.Error())
		return 1
	}

	// Termination requests are caught from the first moment: one that
	// comes before the job's process starts means it never starts, and
	// the directory says so (see terminated). A signal reaches sigs a
	// moment after it was sent: one that misses a check ends the job in
	// the wait loop, at once, and is recorded like any kill.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(sigs)
	terminated := func() (os.Signal, bool) {
		select {
		case s := <-sigs:
			return s, true
		default:
			return nil, false
		}
	}

	// Claim the job before touching anything in its directory: a second
	// supervisor (the node died and asked again) leaves it to the first.
	step(dir, StepBeforeClaim)
	if s, ok := terminated(); ok {
		// Nothing on disk: the job is not claimed, a later Start runs it.
		log.Info("supervisor got signal before claiming the job; leaving it", "signal", s)
		report("error terminated (" + s.String() + ") before claiming the job")
		return 1
	}
	switch ok, err := claimJob(dir); {
	case err != nil:
		log.Error("cannot claim job", "err", err)
		report("error claim: " + err.Error())
		return 1
	case !ok:
		log.Info("job claimed by another supervisor; leaving it")
		report(claimedReport)
		return 1
	}
	step(dir, StepClaimed)
	var spec jobSpecFile
	if err := readJSON(filepath.Join(dir, specFile), &spec); err != nil {
		return failStart(fmt.Errorf("read spec: %w", err))
	}
	cmd, err := jobCommand(dir, spec)
	if err != nil {
		return failStart(err)
	}
	if s, ok := terminated(); ok {
		// Claimed, and killed before the job's process started: it never
		// runs, and its end is recorded like any kill's.
		closeFiles(cmd)
		log.Info("supervisor got signal before starting the job; not starting it", "signal", s)
		ex := exitState{ExitCode: -1, Killed: true, Cause: CauseRequest, StartError: "terminated before the job started", At: time.Now()}
		if err := writeJSON(filepath.Join(dir, exitFile), ex); err != nil {
			log.Error("cannot write exit file", "err", err)
		}
		report("error terminated (" + s.String() + ") before the job started")
		return 1
	}
	if err := cmd.Start(); err != nil {
		return failStart(err)
	}
	closeFiles(cmd)
	pgid := cmd.Process.Pid
	step(dir, StepJobStarted)
	state := supervisorState{PID: os.Getpid(), PGID: pgid, StartedAt: time.Now()}
	if ticks, err := procStartTicks(state.PID); err == nil {
		state.PIDStart = ticks
	}
	if err := writeJSON(filepath.Join(dir, supervisorFile), state); err != nil {
		// Without supervisor.json no later node could find the job: do not
		// let it run unaccounted.
		syscall.Kill(-pgid, syscall.SIGKILL)
		cmd.Wait()
		return failStart(fmt.Errorf("write %s: %w", supervisorFile, err))
	}
	if spec.Limit > 0 && !spec.Deadline.IsZero() && state.StartedAt.Add(spec.Limit).After(spec.Deadline) {
		spec.Deadline = state.StartedAt.Add(spec.Limit)
	}
	log.Info("job started", "job", spec.JobID, "pgid", pgid, "deadline", spec.Deadline)
	step(dir, StepRecorded)
	report("ok")

	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()

	var deadline <-chan time.Time
	if !spec.Deadline.IsZero() {
		t := time.NewTimer(time.Until(spec.Deadline))
		defer t.Stop()
		deadline = t.C
	}
	var grace <-chan time.Time
	ex := exitState{}
	terminate := func(cause KillCause) {
		if ex.Killed {
			return
		}
		ex.Killed, ex.Cause = true, cause
		log.Info("terminating job", "cause", cause, "grace", spec.KillGrace)
		signalGroup(log, pgid, syscall.SIGTERM)
		t := time.NewTimer(spec.KillGrace)
		grace = t.C
	}
	for {
		select {
		case err := <-done:
			ex.At = time.Now()
			var ee *exec.ExitError
			if err != nil && !errors.As(err, &ee) {
				log.Error("wait for job", "err", err)
			}
			ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
			if ws.Signaled() {
				ex.Signaled, ex.Signal = true, int(ws.Signal())
				ex.ExitCode = 128 + ex.Signal
			} else {
				ex.ExitCode = ws.ExitStatus()
			}
			// The group leader is gone; what it left behind goes too.
			if err := syscall.Kill(-pgid, syscall.SIGKILL); err == nil {
				log.Info("killed processes left in the job's group")
			}
			if err := writeJSON(filepath.Join(dir, exitFile), ex); err != nil {
				log.Error("cannot write exit file", "err", err)
				return 1
			}
			log.Info("job ended", "exit_code", ex.ExitCode, "signaled", ex.Signaled, "killed", ex.Killed, "cause", ex.Cause)
			return 0
		case <-deadline:
			terminate(CauseDeadline)
		case s := <-sigs:
			log.Info("supervisor got signal", "signal", s)
			terminate(CauseRequest)
		case <-grace:
			log.Info("grace over, killing job")
			signalGroup(log, pgid, syscall.SIGKILL)
			grace = nil
		}
	}
}

func signalGroup(log *slog.Logger, pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		log.Error("signal job's process group", "signal", sig, "err", err)
	}
}

// readyFile returns the readiness pipe named by ReadyFDEnv, or nil.
func readyFile() *os.File {
	fd, err := strconv.Atoi(os.Getenv(ReadyFDEnv))
	if err != nil || fd < 3 {
		return nil
	}
	// The descriptor was inherited without close-on-exec; the job must not
	// inherit it in turn, or the executor would wait for the job's end to
	// see the pipe close.
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "ready")
}

// jobCommand builds the job's command from its spec. Its stdout and stderr
// are open files that closeFiles closes once the command has started.
func jobCommand(dir string, spec jobSpecFile) (*exec.Cmd, error) {
	if len(spec.Argv) == 0 {
		return nil, errors.New("empty command")
	}
	env := make([]string, 0, len(spec.Env)+2)
	path := DefaultPath
	for k, v := range spec.Env {
		if k == "PATH" {
			path = v
		}
		env = append(env, k+"="+v)
	}
	if _, ok := spec.Env["PATH"]; !ok {
		env = append(env, "PATH="+DefaultPath)
	}
	if _, ok := spec.Env["FEDSCHED_JOB_ID"]; !ok {
		env = append(env, "FEDSCHED_JOB_ID="+spec.JobID)
	}
	workdir := spec.Workdir
	if workdir == "" {
		workdir = dir
	}
	prog, err := lookPath(spec.Argv[0], path, workdir)
	if err != nil {
		return nil, err
	}
	// Output is the job user's alone: when the job runs as another
	// account, the files are opened with that account's rights (a path the
	// user names must be one the user may write), and are its own.
	outPath, errPath := OutputPaths(dir, Spec{Stdout: spec.Stdout, Stderr: spec.Stderr})
	stdout, err := openOutput(outPath, spec.RunAs)
	if err != nil {
		return nil, err
	}
	stderr := stdout
	if errPath != outPath {
		if stderr, err = openOutput(errPath, spec.RunAs); err != nil {
			stdout.Close()
			return nil, err
		}
	}
	attr := &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(attr)
	if r := spec.RunAs; r != nil {
		// The kernel switches the job to its user's uid, gid and groups
		// before exec: the job never holds the supervisor's root.
		attr.Credential = &syscall.Credential{Uid: r.UID, Gid: r.GID, Groups: r.Groups}
	}
	return &exec.Cmd{
		Path:        prog,
		Args:        spec.Argv,
		Env:         env,
		Dir:         workdir,
		Stdout:      stdout,
		Stderr:      stderr,
		SysProcAttr: attr,
	}, nil
}

func closeFiles(cmd *exec.Cmd) {
	for _, w := range []io.Writer{cmd.Stdout, cmd.Stderr} {
		if f, ok := w.(*os.File); ok {
			f.Close()
		}
	}
}

// lookPath finds a program the way a shell does, in the job's PATH rather
// than the supervisor's. A name with a slash is used as is (relative to the
// working directory).
func lookPath(name, path, workdir string) (string, error) {
	if strings.Contains(name, "/") {
		p := name
		if !filepath.IsAbs(p) {
			p = filepath.Join(workdir, p)
		}
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		return p, nil
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(workdir, d)
		}
		p := filepath.Join(d, name)
		if executable(p) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: not found in PATH %s", name, path)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}
