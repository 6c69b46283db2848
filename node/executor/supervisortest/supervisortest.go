// Package supervisortest pauses the Process executor's supervisor at a
// chosen step of its start (executor.SupervisorStep), so that a test can
// stop or kill the node at that exact point and then let the supervisor go
// on. The supervisor is a separate process (the test binary re-executed),
// so the step is chosen through the environment and the pause is a pair of
// files in the job's directory.
//
// A test binary that serves as supervisor runs
//
//	executor.RunSupervisorSteps(args, func(dir string, s executor.SupervisorStep) {
//		supervisortest.Pause(dir, string(s))
//	})
//
// with PauseEnv set (for the supervisor only) to the step to pause at.
// The package does not import executor, so that executor's own tests can
// use it.
package supervisortest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// PauseEnv names the environment variable holding the step to pause at.
const PauseEnv = "FEDSCHED_TEST_SUPERVISOR_PAUSE"

// Names of the files of a pause, in the job's directory.
const (
	pausedFile = "test-paused"
	resumeFile = "test-resume"
)

// maxPause bounds a pause, so that a test that fails before it resumes
// leaves no supervisor waiting.
const maxPause = 2 * time.Minute

// Pause is the supervisor's step hook. At the step named by PauseEnv, the
// first supervisor of the job directory to get there creates test-paused
// in it and waits until test-resume exists; a later one (a second node's
// supervisor of the same job) goes on at once.
func Pause(dir, step string) {
	if step == "" || step != os.Getenv(PauseEnv) {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, pausedFile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return
	}
	fmt.Fprintf(f, "%s %d\n", step, os.Getpid())
	f.Close()
	for deadline := time.Now().Add(maxPause); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(dir, resumeFile)); err == nil {
			return
		}
	}
}

// WaitPaused waits until a supervisor pauses in dir.
func WaitPaused(dir string, within time.Duration) error {
	for deadline := time.Now().Add(within); ; time.Sleep(5 * time.Millisecond) {
		_, err := os.Stat(filepath.Join(dir, pausedFile))
		if err == nil {
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no supervisor paused in %s within %v", dir, within)
		}
	}
}

// PausedPID returns the pid of the process paused in dir (a supervisor,
// or slurmtest's sbatch), or 0.
func PausedPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, pausedFile))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0
	}
	pid, _ := strconv.Atoi(f[1])
	return pid
}

// Resume lets the supervisor paused in dir go on.
func Resume(dir string) error {
	return os.WriteFile(filepath.Join(dir, resumeFile), nil, 0o644)
}
