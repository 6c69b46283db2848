package forecast

import (
	"slices"
	"sync"
	"testing"

	"github.com/fedsched/fedsched/swf"
	"github.com/fedsched/fedsched/traces"
)

// traceCache holds each embedded trace once per test binary.
var traceCache sync.Map

type loadedTrace struct {
	jobs  []Job
	epoch int64
}

// loadTrace returns the jobs and epoch of an embedded trace. The slice is a
// copy the caller may modify.
func loadTrace(tb testing.TB, name string) ([]Job, int64) {
	tb.Helper()
	if v, ok := traceCache.Load(name); ok {
		lt := v.(loadedTrace)
		return slices.Clone(lt.jobs), lt.epoch
	}
	rc, err := traces.Open(name)
	if err != nil {
		tb.Fatal(err)
	}
	defer rc.Close()
	tr, err := swf.Read(rc, name, swf.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	lt := loadedTrace{jobs: FromSWF(tr.Jobs), epoch: EpochFromHeader(tr.Header)}
	traceCache.Store(name, lt)
	return slices.Clone(lt.jobs), lt.epoch
}

// completionOrder returns the jobs with a known runtime sorted by End (ties
// by input order): the order in which a driver feeds Observe.
func completionOrder(jobs []Job) []Job {
	var out []Job
	for _, j := range jobs {
		if j.Runtime >= 0 {
			out = append(out, j)
		}
	}
	slices.SortStableFunc(out, func(a, b Job) int {
		switch {
		case a.End < b.End:
			return -1
		case a.End > b.End:
			return 1
		}
		return 0
	})
	return out
}

// testConfig is DefaultConfig with the given epoch.
func testConfig(epoch int64) Config {
	c := DefaultConfig()
	c.Search.Epoch = epoch
	return c
}
