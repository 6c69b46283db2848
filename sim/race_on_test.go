//go:build race

package sim

// raceEnabled scales the slow trace-replay tests of the deadline policies
// down under the race detector, which makes them about ten times slower.
const raceEnabled = true
