package executor

import (
	"encoding/json"
	"fmt"
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
	scriptFile     = "script"
)

// jobSpecFile is spec.json: what the supervisor runs.
type jobSpecFile struct {
	JobID     string            `json:"job_id"`
	Argv      []string          `json:"argv"`
	Env       map[string]string `json:"env,omitempty"`
	Workdir   string            `json:"workdir,omitempty"`
	Deadline  time.Time         `json:"deadline,omitzero"`
	KillGrace time.Duration     `json:"kill_grace_ns"`
	// Stdout and Stderr are the output files; empty means the job
	// directory's stdout and stderr.
	Stdout string `json:"stdout,omitempty"`
	Stderr string `json:"stderr,omitempty"`
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

// writeScript saves a job's script in its directory and returns the argv
// that runs it with args: the script itself when it starts with an
// interpreter line, else sh.
func writeScript(dir string, script []byte, args []string) ([]string, error) {
	path := filepath.Join(dir, scriptFile)
	if err := writeFileAtomic(path, script); err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o755); err != nil {
		return nil, err
	}
	if strings.HasPrefix(string(script), "#!") {
		return append([]string{path}, args...), nil
	}
	return append([]string{"/bin/sh", path}, args...), nil
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
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
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
