package executor

import (
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/fedsched/fedsched/node/executor/supervisortest"
)

// supervisorEnv turns the test binary into a supervisor: the Process
// executor under test re-executes os.Executable() with it, as the node
// re-executes fedsched with `supervise`.
const supervisorEnv = "FEDSCHED_EXECUTOR_TEST_SUPERVISOR"

// pdeathsigEnv turns the test binary into a Slurm command that prints the
// parent-death signal it was started with (TestSlurmOnlySbatchDiesWithTheNode).
const pdeathsigEnv = "FEDSCHED_EXECUTOR_TEST_PDEATHSIG"

func TestMain(m *testing.M) {
	if os.Getenv(supervisorEnv) == "1" {
		// Paused at the step named by supervisortest.PauseEnv, if any.
		os.Exit(RunSupervisorSteps(os.Args[1:], func(dir string, s SupervisorStep) { supervisortest.Pause(dir, string(s)) }))
	}
	if os.Getenv(pdeathsigEnv) == "1" {
		os.Exit(printPdeathsig())
	}
	if arg := os.Getenv(slurmStartEnv); arg != "" {
		// A node starting a Slurm job (TestSlurmStartCutAtEachPoint).
		os.Exit(runSlurmStart(arg))
	}
	code := m.Run()
	reapChildren(2 * time.Second)
	os.Exit(code)
}

// reapChildren collects supervisors this test process started and dropped
// (executors that were never run, as in the re-attach tests), so that none
// outlives the tests as a zombie.
func reapChildren(within time.Duration) {
	for deadline := time.Now().Add(within); time.Now().Before(deadline); {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.ECHILD:
			return
		case pid <= 0:
			time.Sleep(10 * time.Millisecond)
		}
	}
}
