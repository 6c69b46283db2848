//go:build race

package overbook

// raceEnabled: the race detector slows the comprehensive convolutions
// about tenfold; long tests shorten their runs under it.
const raceEnabled = true
