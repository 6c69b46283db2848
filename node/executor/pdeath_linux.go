package executor

import "syscall"

// dieWithSupervisor makes the kernel SIGKILL the job's first process when
// its supervisor dies (PR_SET_PDEATHSIG; the supervisor forks from a
// thread it keeps, see RunSupervisorSteps). A supervisor killed before it
// recorded the job's process group in supervisor.json thus leaves no job
// running that nothing records; one killed later leaves a job the next
// poll reports lost, whose group it kills in any case.
func dieWithSupervisor(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
