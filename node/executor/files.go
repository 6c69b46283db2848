package executor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Names of the files in a job's directory.
const (
	specFile       = "spec.json"
	supervisorFile = "supervisor.json"
	exitFile       = "exit.json"
	stdoutFile     = "stdout"
	stderrFile     = "stderr"
	supervisorLog  = "supervisor.log"
	// workDir is the working directory of a job that runs as another
	// user than the node's (see prepareJobDir).
	workDir    = "work"
	scriptFile = "script"
	// claimFile is created exclusively by the one supervisor that runs the
	// job, before it starts anything. It holds that supervisor's pid and
	// start ticks ("<pid> <ticks>\n"; older ones the pid alone).
	claimFile = "claim"
	// newDirPrefix starts the name of a job directory being prepared.
	newDirPrefix = ".new-"
)

// claimedReport is the supervisor's readiness report when another
// supervisor claimed the job first.
const claimedReport = "claimed"

// prepareJobDir makes dir, a job's directory, with spec.json in it, so that
// a crash at any point leaves either no directory or a complete one: the
// directory is built under a temporary name (spec.json written and synced),
// renamed into place, and the parent synced. If dir exists already (an
// earlier node made it and died), the job is started again only if no
// supervisor has claimed it: then spec.json is rewritten atomically, and
// should a supervisor of the earlier node still be on its way, the claim
// file lets only one of them run the job. The error wraps ErrAlreadyStarted
// if the job was claimed or has ended.
func prepareJobDir(dir string, sf jobSpecFile) error {
	// jobs/ may be traversed by job users (to their own work/), not
	// listed; a job's directory is the node's alone unless openJobDir
	// opens it to its job's user.
	parent := filepath.Dir(dir)
	if err := os.MkdirAll(parent, 0o711); err != nil {
		return err
	}
	for _, d := range []string{parent, filepath.Dir(parent)} { // jobs/<epoch>, jobs
		if err := os.Chmod(d, 0o711); err != nil {
			return err
		}
	}
	tmp, err := os.MkdirTemp(parent, newDirPrefix+filepath.Base(dir)+"-")
	if err != nil {
		return err
	}
	err = writeJSON(filepath.Join(tmp, specFile), sf)
	if err == nil {
		err = os.Chmod(tmp, 0o700)
	}
	if err == nil {
		err = os.Rename(tmp, dir)
	}
	if err == nil {
		return syncDir(parent)
	}
	os.RemoveAll(tmp)
	if _, serr := os.Stat(dir); serr != nil {
		return err
	}
	// The directory exists: claimed (or ended), or left by a node that died
	// before a supervisor claimed it.
	if claimed(dir) {
		return fmt.Errorf("%s was claimed by a supervisor: %w", dir, ErrAlreadyStarted)
	}
	return writeJSON(filepath.Join(dir, specFile), sf)
}

// claimed reports whether a supervisor has claimed the job of dir (or, in
// a directory made before claims, started or ended it).
func claimed(dir string) bool {
	for _, f := range []string{claimFile, exitFile, supervisorFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			return true
		}
	}
	return false
}

// claimJob is the supervisor's claim on a job directory: true if this
// supervisor is the one that runs the job, false if another claimed it.
func claimJob(dir string) (bool, error) {
	f, err := os.OpenFile(filepath.Join(dir, claimFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	pid := os.Getpid()
	ticks, _ := procStartTicks(pid) // 0 where /proc is missing
	_, err = fmt.Fprintf(f, "%d %d\n", pid, ticks)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = syncDir(dir)
	}
	return err == nil, err
}

// claimant reads the claim file of dir: the pid and start ticks of the
// supervisor that claimed the job. ok is false if the job is not claimed,
// or its claim does not name the supervisor with its start ticks (a claim
// being written, or one made before the ticks were recorded).
func claimant(dir string) (pid int, ticks uint64, ok bool) {
	b, err := os.ReadFile(filepath.Join(dir, claimFile))
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0, false
	}
	pid, perr := strconv.Atoi(f[0])
	ticks, terr := strconv.ParseUint(f[1], 10, 64)
	if perr != nil || terr != nil || pid <= 0 || ticks == 0 {
		return 0, 0, false
	}
	return pid, ticks, true
}

// removeUnfinishedDirs removes job directories that a node was preparing
// when it died (never renamed into place, so never started).
func removeUnfinishedDirs(jobsDir string) error {
	ents, err := os.ReadDir(jobsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), newDirPrefix) {
			if err := os.RemoveAll(filepath.Join(jobsDir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// jobSpecFile is spec.json: what the supervisor runs.
type jobSpecFile struct {
	JobID    string            `json:"job_id"`
	Argv     []string          `json:"argv"`
	Env      map[string]string `json:"env,omitempty"`
	Workdir  string            `json:"workdir,omitempty"`
	Deadline time.Time         `json:"deadline,omitzero"`
	// Limit: see Spec.Limit.
	Limit     time.Duration `json:"limit_ns,omitempty"`
	KillGrace time.Duration `json:"kill_grace_ns"`
	// Stdout and Stderr are the output files; empty means the job
	// directory's stdout and stderr.
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
	// RunAs is set when the job runs as another account than the
	// supervisor's (the node runs as root).
	RunAs *runAs `json:"run_as,omitempty"`
}

// runAs is the account a job runs as.
type runAs struct {
	User   string   `json:"user"`
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
}

// OutputPaths returns the files a job's standard output and error go to:
// the spec's, or the job directory's stdout and stderr.
func OutputPaths(jobDir string, spec Spec) (stdout, stderr string) {
	stdout, stderr = spec.Stdout, spec.Stderr
	if stdout == "" {
		stdout = filepath.Join(jobDir, stdoutFile)
	}
	if stderr == "" {
		stderr = filepath.Join(jobDir, stderrFile)
	}
	return stdout, stderr
}

// scriptArgv returns the argv that runs a job's script (saved in its
// directory by writeScript) with args: the script itself when it starts
// with an interpreter line, else sh.
func scriptArgv(dir string, script []byte, args []string) []string {
	path := filepath.Join(dir, scriptFile)
	if strings.HasPrefix(string(script), "#!") {
		return append([]string{path}, args...)
	}
	return append([]string{"/bin/sh", path}, args...)
}

// writeScript saves a job's script in its directory, executable.
func writeScript(dir string, script []byte) error {
	path := filepath.Join(dir, scriptFile)
	if err := writeFileAtomic(path, script); err != nil {
		return err
	}
	return os.Chmod(path, 0o755)
}

// supervisorState is supervisor.json.
type supervisorState struct {
	// PID is the supervisor's process id.
	PID int `json:"pid"`
	// PIDStart is the supervisor's start time in clock ticks since boot
	// (/proc/<pid>/stat field 22), to tell it from a later process that
	// reuses its pid; 0 if unknown.
	PIDStart uint64 `json:"pid_start_ticks,omitempty"`
	// PGID is the job's process group (the pid of its first process).
	PGID int `json:"pgid"`
	// StartedAt is when the job's process started.
	StartedAt time.Time `json:"started_at"`
}

// exitState is exit.json.
type exitState struct {
	ExitCode   int       `json:"exit_code"`
	Signaled   bool      `json:"signaled,omitempty"`
	Signal     int       `json:"signal,omitempty"`
	Killed     bool      `json:"killed,omitempty"`
	Cause      KillCause `json:"cause,omitempty"`
	StartError string    `json:"start_error,omitempty"`
	At         time.Time `json:"at"`
}

// writeFileAtomic writes data to path so that a reader sees either the old
// file or the whole new one, even across a crash: temp file, fsync, rename,
// fsync of the directory.
func writeFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o600)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(dir)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// readJSON reads a JSON file; it returns an error wrapping os.ErrNotExist if
// the file is missing.
func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// procStartTicks returns the start time of a process in clock ticks since
// boot, from /proc/<pid>/stat. It fails where /proc is missing.
func procStartTicks(pid int) (uint64, error) {
	st, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	return st.start, nil
}

type procStatus struct {
	state byte   // R, S, D, Z, ...
	start uint64 // field 22, starttime
}

func procStat(pid int) (procStatus, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStatus{}, err
	}
	// The command name (field 2) is in parentheses and may hold anything;
	// the fields after the last ')' start with field 3, the state.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return procStatus{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || len(f[0]) != 1 {
		return procStatus{}, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStatus{}, fmt.Errorf("malformed /proc/%d/stat: %w", pid, err)
	}
	return procStatus{state: f[0][0], start: start}, nil
}

// alive reports whether the process pid still runs and is the one that had
// start time startTicks (0: unknown, not checked). A zombie is not alive.
func alive(pid int, startTicks uint64) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && err != syscall.EPERM {
		return false
	}
	st, err := procStat(pid)
	if err != nil {
		// No /proc here, or the process just went: trust kill(2) when /proc
		// is missing altogether.
		_, statErr := os.Stat("/proc/self/stat")
		return statErr != nil
	}
	if st.state == 'Z' || st.state == 'X' {
		return false
	}
	return startTicks == 0 || st.start == startTicks
}
