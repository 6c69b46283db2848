package executor

import "syscall"

// dieWithParent makes the kernel SIGKILL a child process when the thread
// that forked it dies (PR_SET_PDEATHSIG): the caller keeps that thread
// (runtime.LockOSThread) until the child has ended.
//
// The supervisor gives it to the job's first process (it forks from a
// thread it keeps, see RunSupervisorSteps): a supervisor killed before it
// recorded the job's process group in supervisor.json thus leaves no job
// running that nothing records; one killed later leaves a job the next
// poll reports lost, whose group it kills in any case. The Slurm executor
// gives it to sbatch (Slurm.sbatch): a crashed node's sbatch does not
// queue a job after the next node has.
func dieWithParent(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
