//go:build !linux

package executor

import "syscall"

// dieWithParent does nothing where the kernel has no parent-death signal:
// a supervisor killed before it recorded the job's process group leaves
// the job running unrecorded, and a crashed node's sbatch may still queue
// its job.
func dieWithParent(*syscall.SysProcAttr) {}
