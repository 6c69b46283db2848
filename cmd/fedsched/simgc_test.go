package main

import (
	"os"
	"runtime/debug"
	"testing"
)

// gcPercent reads the collector's target without changing it.
func gcPercent() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}

func TestReplayGC(t *testing.T) {
	t.Setenv("GOGC", "")
	if err := os.Unsetenv("GOGC"); err != nil {
		t.Fatal(err)
	}
	before := gcPercent()
	restore := replayGC()
	if got := gcPercent(); got != replayGCPercent {
		t.Fatalf("GOGC unset: target %d during the replay, want %d", got, replayGCPercent)
	}
	restore()
	if got := gcPercent(); got != before {
		t.Fatalf("target %d after the replay, want %d back", got, before)
	}

	// A GOGC the user set wins.
	t.Setenv("GOGC", "50")
	restore = replayGC()
	if got := gcPercent(); got != before {
		t.Fatalf("GOGC set: target %d during the replay, want it left at %d", got, before)
	}
	restore()
}
