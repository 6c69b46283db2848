//go:build !race

package forecast

// raceEnabled scales the slow trace-replay tests down under the race
// detector, which makes them about ten times slower.
const raceEnabled = false
