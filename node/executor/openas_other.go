//go:build !linux

package executor

import (
	"errors"
	"os"
)

// openOutput opens a job's output file; running a job as another account
// is supported on Linux only.
func openOutput(path string, r *runAs) (*os.File, error) {
	if r != nil {
		return nil, errors.New("running jobs as their users needs Linux")
	}
	return os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
}
