//go:build !linux

package executor

import "syscall"

// dieWithSupervisor does nothing where the kernel has no parent-death
// signal: a supervisor killed before it recorded the job's process group
// leaves the job running unrecorded.
func dieWithSupervisor(*syscall.SysProcAttr) {}
