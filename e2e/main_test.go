package e2e

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs more tests at once than go test's default of GOMAXPROCS,
// unless -test.parallel is given: the scenarios mostly wait (for the
// shared clock, gossip timers, restarts), so on two cores they would
// otherwise take twice as long as they need.
func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		flag.Set("test.parallel", "6") //nolint:errcheck // a valid number
	}
	os.Exit(m.Run())
}
