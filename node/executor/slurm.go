package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// SlurmConfig configures a Slurm executor.
type SlurmConfig struct {
	// DataDir is the node's data directory; each job's record of its Slurm
	// job lives in the job's directory there (see Epoch). Required.
	DataDir string
	// Epoch names the generation of the node's store, as
	// ProcessConfig.Epoch: jobs live in DataDir/jobs/<Epoch>/<id>.
	Epoch string
	// Partition is the Slurm partition fedsched owns; empty means the
	// cluster's default partition.
	Partition string
	// PollInterval is how often Run asks Slurm about the jobs: one squeue
	// for all of them. 0 means DefaultSlurmPollInterval, which a busy
	// slurmctld bears easily (Slurm's own guidance is to avoid tight
	// polling loops of many clients; this is one client).
	PollInterval time.Duration
	// CommandTimeout bounds each call of a Slurm command. 0 means 30 s.
	CommandTimeout time.Duration
	// Env is added to the node's environment for the Slurm commands (tests
	// set SLURM_CONF through it). Optional.
	Env []string
	// Logger receives the executor's messages. nil discards them.
	Logger *slog.Logger
	// Accounts says whose account sbatch submits each job for when the
	// node runs as root, by the process executor's rules.
	Accounts Accounts
}

// DefaultSlurmPollInterval is SlurmConfig.PollInterval's default.
const DefaultSlurmPollInterval = 2 * time.Second

// commentPrefix starts the comment of every Slurm job fedsched submits;
// the store's epoch and the fedsched job id follow (see comment).
const commentPrefix = "fedsched:"

// comment is the comment of the Slurm job of a fedsched job:
// "fedsched:<epoch>/<job id>", or "fedsched:<job id>" for a store without
// an epoch. Job ids count from 1 in each store, and Slurm keeps ended jobs
// for MinJobAge: with the epoch, findByName does not take the Slurm job of
// an earlier store of the site (a data directory made afresh) for this
// store's job of the same id.
func (s *Slurm) comment(jobID string) string {
	if s.cfg.Epoch == "" {
		return commentPrefix + jobID
	}
	return commentPrefix + s.cfg.Epoch + "/" + jobID
}

// slurmFile is the record, in the job's directory, of the Slurm job that
// runs it: written (atomically, synced) as soon as sbatch has answered.
const slurmFile = "slurm.json"

type slurmState struct {
	SlurmID   string    `json:"slurm_id"`
	Submitted time.Time `json:"submitted"`
	Deadline  time.Time `json:"deadline,omitzero"`
}

// Slurm runs jobs as Slurm batch jobs through the Slurm client commands
// (sbatch, squeue, scontrol, scancel, sinfo) found on PATH, with the
// environment's SLURM_CONF. Make one with NewSlurm.
//
// Each job becomes one Slurm job named after the fedsched job id, with the
// comment "fedsched:<epoch>/<id>" (see comment), procs tasks, a time
// limit covering its reservation (rounded up to Slurm's minutes; the
// executor itself cancels the job at the reservation's end to the second),
// and its output in the paths the spec names (default: the job directory's
// stdout and stderr).
type Slurm struct {
	cfg     SlurmConfig
	log     *slog.Logger
	exits   chan Exit
	running atomic.Bool
	env     []string

	mu   sync.Mutex
	jobs map[string]*slurmJob // tracked jobs, by fedsched id

	capacity chan int
	lastCap  int // owned by Run; -1 before the first report
}

// slurmJob is a job Slurm tracks for us.
type slurmJob struct {
	id       string
	slurmID  string // empty until known
	deadline time.Time
	// killCause is set once we asked Slurm to cancel the job.
	killCause KillCause
	// missing counts polls in which Slurm did not know the job.
	missing int
}

var (
	_ Executor         = (*Slurm)(nil)
	_ CapacityReporter = (*Slurm)(nil)
	_ StartRecorder    = (*Slurm)(nil)
	_ Describer        = (*Slurm)(nil)
)

// NewSlurm returns a Slurm executor. It starts nothing and does not talk to
// Slurm; call Check for that.
func NewSlurm(cfg SlurmConfig) (*Slurm, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("executor: SlurmConfig.DataDir is required")
	}
	if cfg.PollInterval <= 0 {
		cfg.PollInterval = DefaultSlurmPollInterval
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = 30 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Slurm{cfg: cfg, log: log.With("executor", "slurm"), exits: make(chan Exit, 64),
		env: mergeEnv(os.Environ(), cfg.Env), jobs: map[string]*slurmJob{},
		capacity: make(chan int, 1), lastCap: -1}, nil
}

// CheckAccount implements AccountChecker.
func (s *Slurm) CheckAccount(name string) error {
	_, err := s.cfg.Accounts.resolve(name, os.Geteuid())
	return err
}

// JobDir returns the directory of a job: <data dir>/jobs/<epoch>/<id>.

func (s *Slurm) JobDir(jobID string) string {
	return filepath.Join(s.cfg.DataDir, "jobs", s.cfg.Epoch, jobID)
}

// Exits implements Executor.
func (s *Slurm) Exits() <-chan Exit { return s.exits }

// command runs a Slurm client command and returns its standard output. A
// crash of the node leaves it to finish: sinfo, squeue and scontrol only
// read, and a scancel the node asked for is still wanted.
func (s *Slurm) command(ctx context.Context, env []string, stdin []byte, name string, args ...string) (string, error) {
	return s.run(ctx, env, stdin, false, name, args...)
}

// sbatch runs sbatch, which dies with the node (the parent-death signal):
// a crashed node's sbatch must not queue its job after the next node
// found none by that name and queued it (resubmit); left running, sbatch
// retries a busy slurmctld for a while.
func (s *Slurm) sbatch(ctx context.Context, env []string, args ...string) (string, error) {
	return s.run(ctx, env, nil, true, "sbatch", args...)
}

// run runs a Slurm client command and returns its standard output; with
// dieWithNode, the command is killed if the node dies. The parent-death
// signal follows the thread that forks the command, not the process: that
// goroutine keeps its thread (runtime.LockOSThread) until the command has
// ended, so that the Go runtime cannot end the thread under it. Only
// sbatch pays for a thread of its own.
func (s *Slurm) run(ctx context.Context, env []string, stdin []byte, dieWithNode bool, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.CommandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	if env == nil {
		cmd.Env = s.env
	}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if dieWithNode {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
		dieWithParent(cmd.SysProcAttr)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
	}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(errb.String())
		if msg == "" {
			msg = strings.TrimSpace(out.String())
		}
		return out.String(), fmt.Errorf("%s: %w: %s", name, err, msg)
	}
	return out.String(), nil
}

// Partition returns the partition jobs go to: the configured one, or the
// cluster's default partition.
func (s *Slurm) Partition(ctx context.Context) (string, error) {
	if s.cfg.Partition != "" {
		return s.cfg.Partition, nil
	}
	out, err := s.command(ctx, nil, nil, "sinfo", "-h", "-o", "%P")
	if err != nil {
		return "", err
	}
	for _, l := range strings.Fields(out) {
		if p, ok := strings.CutSuffix(l, "*"); ok {
			s.cfg.Partition = p
			return p, nil
		}
	}
	return "", errors.New("slurm: the cluster has no default partition; set slurm.partition")
}

// SlurmNode is one node of the partition as sinfo reports it.
type SlurmNode struct {
	Name  string
	CPUs  int
	State string // sinfo's compact state, e.g. idle, mix, alloc, drain, down*
}

// Usable reports whether Slurm starts new jobs on the node: not drained,
// draining, down, failing, not responding or powered off.
func (n SlurmNode) Usable() bool {
	st := n.State
	if strings.HasSuffix(st, "*") || strings.HasSuffix(st, "~") || strings.HasSuffix(st, "#") || strings.HasSuffix(st, "!") || strings.HasSuffix(st, "%") {
		return false
	}
	st = strings.TrimRight(st, "$@^-")
	switch st {
	case "idle", "mix", "alloc", "comp", "resv", "plnd":
		return true
	}
	return false
}

// Nodes returns the nodes of the partition, from one sinfo call.
func (s *Slurm) Nodes(ctx context.Context) ([]SlurmNode, error) {
	part, err := s.Partition(ctx)
	if err != nil {
		return nil, err
	}
	out, err := s.command(ctx, nil, nil, "sinfo", "-h", "-N", "-p", part, "-o", "%N|%c|%t")
	if err != nil {
		return nil, err
	}
	nodes, err := ParseSinfoNodes(out)
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("slurm: partition %q has no nodes (does it exist?)", part)
	}
	return nodes, nil
}

// ParseSinfoNodes parses `sinfo -h -N -o '%N|%c|%t'`. A node listed twice
// (it can be, in a multi-partition query) counts once.
func ParseSinfoNodes(out string) ([]SlurmNode, error) {
	var nodes []SlurmNode
	seen := map[string]bool{}
	for l := range strings.Lines(out) {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		f := strings.Split(l, "|")
		if len(f) != 3 {
			return nil, fmt.Errorf("slurm: sinfo line %q: want NAME|CPUS|STATE", l)
		}
		cpus, err := strconv.Atoi(f[1])
		if err != nil || cpus < 0 {
			return nil, fmt.Errorf("slurm: sinfo line %q: bad CPU count", l)
		}
		if seen[f[0]] {
			continue
		}
		seen[f[0]] = true
		nodes = append(nodes, SlurmNode{Name: f[0], CPUs: cpus, State: f[2]})
	}
	return nodes, nil
}

// CPUs returns the processors of the partition: all of them, and those on
// nodes Slurm would start jobs on now.
func (s *Slurm) CPUs(ctx context.Context) (total, usable int, err error) {
	nodes, err := s.Nodes(ctx)
	if err != nil {
		return 0, 0, err
	}
	for _, n := range nodes {
		total += n.CPUs
		if n.Usable() {
			usable += n.CPUs
		}
	}
	return total, usable, nil
}

// Start implements Executor: it records the job in its directory, submits
// it with sbatch and records the Slurm job id (durably) before returning.
// The job may still wait in Slurm's queue for a scheduling cycle. A job an
// earlier start submitted gets ErrAlreadyStarted; one whose earlier start
// was cut short before Slurm queued it is submitted (see resubmit). When
// ctx ends while sbatch runs, sbatch is let finish and its job recorded.
func (s *Slurm) Start(ctx context.Context, spec Spec) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkJobID(spec.JobID); err != nil {
		return err
	}
	if len(spec.Script) == 0 && (len(spec.Argv) == 0 || spec.Argv[0] == "") {
		return fmt.Errorf("job %s: no command and no script: %w", spec.JobID, ErrInvalidSpec)
	}
	s.mu.Lock()
	_, tracked := s.jobs[spec.JobID]
	s.mu.Unlock()
	if tracked {
		return fmt.Errorf("job %s: %w", spec.JobID, ErrAlreadyStarted)
	}
	dir := s.JobDir(spec.JobID)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("job %s: %w", spec.JobID, err)
	}
	// spec.json is created exclusively before sbatch runs. When it exists,
	// an earlier start got that far: the job is submitted only if that
	// start never reached Slurm (see resubmit), so it is never submitted
	// twice, nor left unsubmitted by a start a stop or crash cut short.
	f, err := os.OpenFile(filepath.Join(dir, specFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		err = s.resubmit(ctx, spec.JobID)
	} else if err == nil {
		f.Close()
	}
	if err != nil {
		return fmt.Errorf("job %s: %w", spec.JobID, err)
	}
	sf := jobSpecFile{JobID: spec.JobID, Argv: spec.Argv, Env: spec.Env, Workdir: spec.Workdir, Deadline: spec.Deadline}
	if err := writeJSON(filepath.Join(dir, specFile), sf); err != nil {
		return fmt.Errorf("job %s: write spec: %w", spec.JobID, err)
	}
	args, env, err := s.sbatchArgs(ctx, spec, dir)
	if err != nil {
		return fmt.Errorf("job %s: %v: %w", spec.JobID, err, ErrStartFailed)
	}
	// sbatch is not bound to ctx: a stop of the node (ctx ends) while it
	// runs lets it finish, within CommandTimeout, and the job it queued
	// is recorded below. Killed, it could have queued the job or not, and
	// slurmctld may still act on a request it sent. (A crash of the node
	// kills it: see Slurm.sbatch.)
	out, err := s.sbatch(context.WithoutCancel(ctx), env, args...)
	if err != nil {
		// sbatch refused (bad partition, limits, no account for the
		// user) and nothing was queued, or it timed out after queueing:
		// the start fails, so a job queued anyway must not run.
		if sid, ferr := s.findByName(context.WithoutCancel(ctx), spec.JobID); ferr == nil && sid != "" {
			s.command(context.WithoutCancel(ctx), nil, nil, "scancel", sid) //nolint:errcheck // best effort; the start fails anyway
		}
		return fmt.Errorf("job %s: %v: %w", spec.JobID, err, ErrStartFailed)
	}
	sid, _, _ := strings.Cut(strings.TrimSpace(out), ";")
	if _, err := strconv.ParseUint(sid, 10, 64); err != nil {
		return fmt.Errorf("job %s: sbatch answered %q, not a job id: %w", spec.JobID, out, ErrStartFailed)
	}
	if err := writeJSON(filepath.Join(dir, slurmFile), slurmState{SlurmID: sid, Submitted: time.Now(), Deadline: spec.Deadline}); err != nil {
		// The job is queued but we could not record it: cancel it rather
		// than let it run unaccounted.
		s.command(context.WithoutCancel(ctx), nil, nil, "scancel", sid) //nolint:errcheck // best effort; the start fails anyway
		return fmt.Errorf("job %s: record Slurm job %s: %v: %w", spec.JobID, sid, err, ErrStartFailed)
	}
	s.mu.Lock()
	s.jobs[spec.JobID] = &slurmJob{id: spec.JobID, slurmID: sid, deadline: spec.Deadline}
	s.mu.Unlock()
	s.log.Info("job submitted", "job", spec.JobID, "slurm_job", sid, "procs", spec.Procs)
	if ctx.Err() != nil {
		s.log.Info("the node stopped while sbatch ran; it was let finish and its job recorded", "job", spec.JobID, "slurm_job", sid)
	}
	return nil
}

// resubmit decides the start of a job whose spec.json an earlier start
// wrote (the node stopped or died during that start, and starts the job
// again): it returns ErrAlreadyStarted if that start submitted it (its
// Slurm id is recorded, or Slurm knows a job by its name and comment), for
// the node to re-attach, and nil if Slurm has no such job: the earlier
// start was cut before sbatch, or killed sbatch before slurmctld queued
// the job, and this start submits it.
//
// What remains: a job submitted by a start that died between sbatch's
// answer and slurm.json, which then ended longer ago than Slurm's
// MinJobAge while the node was down, is no longer known by name and would
// be submitted again.
func (s *Slurm) resubmit(ctx context.Context, jobID string) error {
	dir := s.JobDir(jobID)
	if _, err := os.Stat(filepath.Join(dir, slurmFile)); err == nil {
		return fmt.Errorf("%s exists: %w", filepath.Join(dir, slurmFile), ErrAlreadyStarted)
	}
	sid, err := s.findByName(ctx, jobID)
	if err != nil {
		// Not knowing whether it was submitted, do not submit it again.
		return fmt.Errorf("look for the Slurm job of an earlier start: %w", err)
	}
	if sid != "" {
		return fmt.Errorf("an earlier start submitted it as Slurm job %s: %w", sid, ErrAlreadyStarted)
	}
	s.log.Info("submitting a job whose earlier start was cut short before Slurm queued it", "job", jobID)
	return nil
}

// sbatchArgs writes the batch script and returns sbatch's arguments and its
// environment (the job's: with --export=ALL Slurm hands sbatch's
// environment to the job).
func (s *Slurm) sbatchArgs(ctx context.Context, spec Spec, dir string) (args, env []string, err error) {
	part, err := s.Partition(ctx)
	if err != nil {
		return nil, nil, err
	}
	procs := max(spec.Procs, 1)
	workdir := cmpOr(spec.Workdir, dir)
	stdout, stderr := OutputPaths(dir, spec)
	args = []string{"--parsable", "--job-name=" + spec.JobID, "--comment=" + s.comment(spec.JobID),
		"--partition=" + part, "--ntasks=" + strconv.Itoa(procs), "--chdir=" + workdir,
		// Slurm expands %-patterns in file names; ours are expanded already.
		"--output=" + strings.ReplaceAll(stdout, "%", "%%"), "--error=" + strings.ReplaceAll(stderr, "%", "%%"),
		"--export=ALL", "--no-requeue"}
	if !spec.Deadline.IsZero() {
		// Slurm counts time limits in whole minutes: round up, and cancel
		// at the deadline ourselves. The limit is the backstop that holds
		// while the node is down.
		left := max(time.Until(spec.Deadline), time.Second)
		args = append(args, "--time="+strconv.Itoa(int((left+time.Minute-1)/time.Minute)))
	}
	// As root, sbatch submits for whichever account it is told: the same
	// rules as the process executor decide which (never root without the
	// operator's consent, remote users through the service account).
	acc, err := s.cfg.Accounts.resolve(spec.User, os.Geteuid())
	if err != nil {
		return nil, nil, err
	}
	if acc.Switch {
		args = append(args, "--uid="+strconv.FormatUint(uint64(acc.UID), 10), "--gid="+strconv.FormatUint(uint64(acc.GID), 10))
	}
	env = []string{}
	for k, v := range spec.Env {
		env = append(env, k+"="+v)
	}
	if _, ok := spec.Env["PATH"]; !ok {
		env = append(env, "PATH="+DefaultPath)
	}
	if _, ok := spec.Env["FEDSCHED_JOB_ID"]; !ok {
		env = append(env, "FEDSCHED_JOB_ID="+spec.JobID)
	}
	if _, ok := spec.Env["FEDSCHED_PROCS"]; !ok {
		env = append(env, "FEDSCHED_PROCS="+strconv.Itoa(procs))
	}
	// sbatch itself needs to find the controller.
	for _, kv := range s.env {
		if strings.HasPrefix(kv, "SLURM_CONF=") {
			env = append(env, kv)
		}
	}
	slices.Sort(env)
	// sbatch reads the script at submission (slurmctld keeps a copy), so
	// it may live in the node's private job directory. A command becomes a
	// two-line script; a script's Argv are its arguments.
	script, scriptArgs := spec.Script, spec.Argv
	if len(script) == 0 {
		var b strings.Builder
		b.WriteString("#!/bin/sh\n# fedsched job " + spec.JobID + "\nexec")
		for _, a := range spec.Argv {
			b.WriteString(" " + shellQuote(a))
		}
		b.WriteString("\n")
		script, scriptArgs = []byte(b.String()), nil
	} else if !strings.HasPrefix(string(script), "#!") {
		// sbatch insists on an interpreter line.
		script = append([]byte("#!/bin/sh\n"), script...)
	}
	if err := writeScript(dir, script); err != nil {
		return nil, nil, err
	}
	args = append(args, scriptArgv(dir, script, scriptArgs)...)
	return args, env, nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// shellQuote quotes s for sh, in single quotes (a single quote inside
// becomes quote, backslash-quote, quote).
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Kill implements Executor: scancel; the job's end (CANCELLED) is
// reported by Run with Cause CauseRequest.
func (s *Slurm) Kill(jobID string) error {
	return s.cancel(jobID, CauseRequest)
}

func (s *Slurm) cancel(jobID string, cause KillCause) error {
	s.mu.Lock()
	j, ok := s.jobs[jobID]
	var sid string
	if ok {
		sid = j.slurmID
		if j.killCause == CauseNone {
			j.killCause = cause
		}
	}
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("kill job %s: %w", jobID, ErrUnknownJob)
	}
	if sid == "" {
		// Not found in Slurm: Run reports it lost.
		return nil
	}
	if _, err := s.command(context.Background(), nil, nil, "scancel", sid); err != nil {
		return fmt.Errorf("kill job %s (Slurm job %s): %w", jobID, sid, err)
	}
	s.log.Info("cancel requested", "job", jobID, "slurm_job", sid, "cause", cause)
	return nil
}

// Reattach implements Executor: it follows the Slurm job recorded in the
// job's directory, or, if the node stopped before recording it, the one
// whose name and comment carry the job's id. A job Slurm does not know is
// reported lost by Run.
func (s *Slurm) Reattach(jobID string) error {
	if err := checkJobID(jobID); err != nil {
		return err
	}
	dir := s.JobDir(jobID)
	var spec jobSpecFile
	if err := readJSON(filepath.Join(dir, specFile), &spec); err != nil {
		return fmt.Errorf("reattach job %s: %v: %w", jobID, err, ErrUnknownJob)
	}
	s.mu.Lock()
	_, ok := s.jobs[jobID]
	s.mu.Unlock()
	if ok {
		return nil
	}
	j := &slurmJob{id: jobID, deadline: spec.Deadline}
	var st slurmState
	if err := readJSON(filepath.Join(dir, slurmFile), &st); err == nil {
		j.slurmID = st.SlurmID
	} else {
		sid, err := s.findByName(context.Background(), jobID)
		if err != nil {
			return fmt.Errorf("reattach job %s: look it up in Slurm: %w", jobID, err)
		}
		if sid != "" {
			j.slurmID = sid
			if err := writeJSON(filepath.Join(dir, slurmFile), slurmState{SlurmID: sid, Submitted: time.Now(), Deadline: spec.Deadline}); err != nil {
				s.log.Warn("cannot record the Slurm job found by name", "job", jobID, "slurm_job", sid, "err", err)
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.jobs[jobID]; ok {
		return nil
	}
	s.jobs[jobID] = j
	s.log.Info("job re-attached", "job", jobID, "slurm_job", j.slurmID)
	return nil
}

// findByName returns the Slurm job named jobID with this store's comment
// for it, or "" if Slurm knows none.
func (s *Slurm) findByName(ctx context.Context, jobID string) (string, error) {
	out, err := s.command(ctx, nil, nil, "squeue", "-h", "-t", "all", "-n", jobID, "-o", "%i|%k")
	if err != nil {
		return "", err
	}
	for l := range strings.Lines(out) {
		id, comment, ok := strings.Cut(strings.TrimSpace(l), "|")
		if ok && comment == s.comment(jobID) {
			return id, nil
		}
	}
	return "", nil
}

// slurmJobState is one job as squeue and scontrol report it.
type slurmJobState struct {
	SlurmID  string
	Name     string
	State    string
	ExitCode int // of the batch script; with Signal
	Signal   int
	Reason   string
}

// ParseSqueue parses `squeue -h -t all -o '%i|%j|%T|%r'`: id, name, state,
// reason.
func ParseSqueue(out string) (map[string]slurmJobState, error) {
	jobs := map[string]slurmJobState{}
	for l := range strings.Lines(out) {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		f := strings.SplitN(l, "|", 4)
		if len(f) != 4 || f[0] == "" {
			return nil, fmt.Errorf("slurm: squeue line %q: want ID|NAME|STATE|REASON", l)
		}
		jobs[f[0]] = slurmJobState{SlurmID: f[0], Name: f[1], State: f[2], Reason: f[3]}
	}
	return jobs, nil
}

// parseScontrolJob reads JobState, ExitCode and Reason from `scontrol -o
// show job ID`.
func parseScontrolJob(out string) (slurmJobState, error) {
	var st slurmJobState
	for _, kv := range strings.Fields(out) {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		switch k {
		case "JobId":
			st.SlurmID = v
		case "JobName":
			st.Name = v
		case "JobState":
			st.State = v
		case "Reason":
			st.Reason = v
		case "ExitCode":
			code, sig, _ := strings.Cut(v, ":")
			var err1, err2 error
			st.ExitCode, err1 = strconv.Atoi(code)
			st.Signal, err2 = strconv.Atoi(sig)
			if err1 != nil || err2 != nil {
				return st, fmt.Errorf("slurm: ExitCode %q", v)
			}
		}
	}
	if st.State == "" {
		return st, fmt.Errorf("slurm: no JobState in %q", out)
	}
	return st, nil
}

// terminal reports whether a Slurm job state is final.
func terminal(state string) bool {
	switch state {
	case "COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY", "DEADLINE", "PREEMPTED", "SPECIAL_EXIT", "REVOKED":
		return true
	}
	return false
}

// exitOf maps a finished Slurm job to an Exit.
func exitOf(j *slurmJob, st slurmJobState, at time.Time) Exit {
	e := Exit{JobID: j.id, ExitCode: st.ExitCode, At: at, Detail: fmt.Sprintf("Slurm job %s ended %s", j.slurmID, st.State)}
	if st.Signal != 0 {
		e.Signaled, e.Signal = true, st.Signal
		if st.ExitCode == 0 {
			e.ExitCode = 128 + st.Signal
		}
	}
	switch st.State {
	case "COMPLETED", "FAILED", "OUT_OF_MEMORY":
		// The script's own end. (A job we cancelled that finished in its
		// grace period still counts as killed.)
		if j.killCause != CauseNone {
			e.Killed, e.Cause = true, j.killCause
		}
	case "TIMEOUT", "DEADLINE":
		// Slurm's time limit is the reservation's end, rounded up.
		e.Killed, e.Cause = true, CauseDeadline
	case "CANCELLED":
		e.Killed, e.Cause = true, j.killCause
		if j.killCause == CauseNone {
			// Someone cancelled it behind fedsched's back (scancel by an
			// operator or the user): the provider failed the job.
			e.Killed, e.ProviderFailed = false, true
			e.Detail = fmt.Sprintf("Slurm job %s was cancelled outside fedsched", j.slurmID)
		}
	default: // NODE_FAIL, BOOT_FAIL, PREEMPTED, SPECIAL_EXIT, REVOKED
		e.ProviderFailed = true
		if st.State == "NODE_FAIL" || st.State == "BOOT_FAIL" {
			e.Detail = fmt.Sprintf("Slurm job %s ended %s: a Slurm node failed", j.slurmID, st.State)
		}
	}
	return e
}

// Run implements Executor. Every PollInterval it asks squeue once about
// all jobs of the partition, cancels the jobs past their deadline, and
// reports the jobs that ended (with scontrol for the exit code).
func (s *Slurm) Run(ctx context.Context) error {
	if s.running.Swap(true) {
		return ErrAlreadyRunning
	}
	t := time.NewTicker(s.cfg.PollInterval)
	defer t.Stop()
	for {
		s.poll(ctx)
		s.pollCapacity(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// lostAfter is how many polls in a row a job may be missing from squeue
// (and from scontrol) before it is reported lost.
const lostAfter = 2

func (s *Slurm) poll(ctx context.Context) {
	s.mu.Lock()
	if len(s.jobs) == 0 {
		s.mu.Unlock()
		return
	}
	jobs := make([]slurmJob, 0, len(s.jobs))
	for _, j := range s.jobs {
		jobs = append(jobs, *j)
	}
	s.mu.Unlock()
	part, err := s.Partition(ctx)
	if err != nil {
		s.log.Warn("slurm: cannot find the partition", "err", err)
		return
	}
	out, err := s.command(ctx, nil, nil, "squeue", "-h", "-t", "all", "-p", part, "-o", "%i|%j|%T|%r")
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("slurm: squeue failed; will retry", "err", err)
		}
		return
	}
	states, err := ParseSqueue(out)
	if err != nil {
		s.log.Warn("slurm: squeue output unreadable; will retry", "err", err)
		return
	}
	now := time.Now()
	for _, j := range jobs {
		if ctx.Err() != nil {
			return
		}
		if j.slurmID == "" {
			s.report(ctx, Exit{JobID: j.id, Lost: true, ExitCode: -1, At: now,
				Detail: "Slurm has no job named " + j.id + ": the node stopped before it was submitted, or Slurm has forgotten it"})
			continue
		}
		st, ok := states[j.slurmID]
		if ok && st.Name != j.id {
			// The id was reused (slurmctld lost its state and counts
			// again): that is not our job.
			ok = false
		}
		if !ok || terminal(st.State) {
			// squeue has no exit code; scontrol has. A job not in the
			// partition's queue may have moved, or be gone for good.
			ok = false
			// Not in the partition's queue: ask for the job itself (it may
			// have moved partition, or be gone for good).
			out, err := s.command(ctx, nil, nil, "scontrol", "-o", "show", "job", j.slurmID)
			if err == nil {
				if st, err = parseScontrolJob(out); err == nil && st.Name == j.id {
					ok = true
				}
			}
		}
		if !ok {
			if s.bumpMissing(j.id) >= lostAfter {
				s.report(ctx, Exit{JobID: j.id, Lost: true, ExitCode: -1, At: now,
					Detail: fmt.Sprintf("Slurm no longer knows job %s (it ended longer ago than Slurm's MinJobAge while the node was down, or slurmctld lost its state)", j.slurmID)})
			}
			continue
		}
		s.mu.Lock()
		if cur := s.jobs[j.id]; cur != nil {
			// A Kill may have come since the copy: its cause decides how a
			// CANCELLED end reads.
			cur.missing = 0
			j.killCause = cur.killCause
		}
		s.mu.Unlock()
		if terminal(st.State) {
			s.report(ctx, exitOf(&j, st, now))
			continue
		}
		if !j.deadline.IsZero() && !now.Before(j.deadline) && j.killCause == CauseNone {
			if err := s.cancel(j.id, CauseDeadline); err != nil {
				s.log.Warn("slurm: cancel at the deadline failed; will retry", "job", j.id, "err", err)
				s.mu.Lock()
				if jj := s.jobs[j.id]; jj != nil {
					jj.killCause = CauseNone
				}
				s.mu.Unlock()
			}
		}
	}
}

func (s *Slurm) bumpMissing(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobs[id]; j != nil {
		j.missing++
		return j.missing
	}
	return 0
}

// report delivers an Exit and stops tracking the job.
func (s *Slurm) report(ctx context.Context, e Exit) {
	select {
	case s.exits <- e:
	case <-ctx.Done():
		return
	}
	s.mu.Lock()
	delete(s.jobs, e.JobID)
	s.mu.Unlock()
	s.log.Info("job ended", "job", e.JobID, "exit", e.String(), "detail", e.Detail)
}

// Capacity implements CapacityReporter.
func (s *Slurm) Capacity() <-chan int { return s.capacity }

// pollCapacity reports the partition's usable CPUs when they changed. Only
// the latest value matters: an unread older one is replaced.
func (s *Slurm) pollCapacity(ctx context.Context) {
	_, usable, err := s.CPUs(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("slurm: sinfo failed; capacity unchanged", "err", err)
		}
		return
	}
	if usable == s.lastCap {
		return
	}
	if s.lastCap >= 0 {
		s.log.Info("slurm: usable CPUs of the partition changed", "from", s.lastCap, "to", usable)
	}
	s.lastCap = usable
	for {
		select {
		case s.capacity <- usable:
			return
		default:
		}
		select {
		case <-s.capacity:
		default:
		}
	}
}

// Started implements StartRecorder: the job was handed to Slurm (its Slurm
// id is recorded, or Slurm knows a job by its name and comment).
func (s *Slurm) Started(jobID string) (StartRecord, error) {
	if err := checkJobID(jobID); err != nil {
		return StartRecord{}, err
	}
	dir := s.JobDir(jobID)
	if _, err := os.Stat(filepath.Join(dir, slurmFile)); err == nil {
		var st slurmState
		readJSON(filepath.Join(dir, slurmFile), &st) //nolint:errcheck // unreadable: times unknown
		return StartRecord{Started: true, At: st.Submitted, Deadline: st.Deadline}, nil
	}
	var spec jobSpecFile
	if err := readJSON(filepath.Join(dir, specFile), &spec); err != nil {
		return StartRecord{}, nil
	}
	sid, err := s.findByName(context.Background(), jobID)
	return StartRecord{Started: sid != "", Deadline: spec.Deadline}, err
}

// Describe implements Describer.
func (s *Slurm) Describe(jobID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if j := s.jobs[jobID]; j != nil && j.slurmID != "" {
		return "Slurm job " + j.slurmID
	}
	return ""
}
