package store

import (
	"os"
	"syscall"
)

// fdatasync makes f's data durable (and its size, when it changed), not
// its other metadata.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
