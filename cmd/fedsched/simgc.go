package main

import (
	"os"
	"runtime/debug"
)

// replayGCPercent is the collector's target (GOGC) during a plain replay. A
// replay keeps almost all it allocates until it ends (the trace, the jobs,
// one record per job), so a collection while the heap grows finds little
// to free; it costs CPU, and, running beside the replay, it reads fresh
// pages before the replay writes them, which doubles their page faults. At
// 800 the KTH replay runs no collection at all, and the peak resident size
// of the KTH, CTC and SDSC replays does not grow (docs/PERFORMANCE.md,
// "Replay speed, before and after issue 16").
const replayGCPercent = 800

// replayGC sets the collector's target for a plain replay, unless the user
// set GOGC, and returns the function that restores it.
func replayGC() (restore func()) {
	if _, set := os.LookupEnv("GOGC"); set {
		return func() {}
	}
	old := debug.SetGCPercent(replayGCPercent)
	return func() { debug.SetGCPercent(old) }
}
