package executor

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
)

// openOutput opens (creating, truncating) a job's output file: as the
// supervisor when r is nil, else with the rights of the job's account, so
// that a root supervisor never writes where the job's user may not, and
// the file is the user's. setfsuid and setfsgid change only the calling
// thread, which is locked for the call.
func openOutput(path string, r *runAs) (*os.File, error) {
	if r == nil {
		return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	uid, gid := syscall.Getuid(), syscall.Getgid()
	syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(r.GID), 0, 0)
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(r.UID), 0, 0)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	syscall.RawSyscall(syscall.SYS_SETFSUID, uintptr(uid), 0, 0)
	syscall.RawSyscall(syscall.SYS_SETFSGID, uintptr(gid), 0, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s as user %s: %w", path, r.User, err)
	}
	return f, nil
}
