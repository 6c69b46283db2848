package main

import (
	"errors"
	"fmt"
	"os"
	"runtime/pprof"
)

// withCPUProfile runs f while writing a CPU profile to path (go tool pprof
// reads it); an empty path runs f alone.
func withCPUProfile(path string, f func() error) (err error) {
	if path == "" {
		return f()
	}
	out, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("InvalidArgument: --cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		out.Close()
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	defer func() {
		pprof.StopCPUProfile()
		if cerr := out.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("--cpuprofile: %w", cerr))
		}
	}()
	return f()
}
