package node_test

import (
	"context"
	"testing"
	"time"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestScaledClockResumesAfterRestart: a node on a scaled clock (1000x)
// restarted on its data directory went back to the wall clock's time: a
// job submitted after the restart carried a time before the jobs of the
// first run, and a waiting job's release came round again. The site's
// time must resume from where the first run left it.
func TestScaledClockResumesAfterRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.TimeScale = 1000
	submit := func(c fedschedv1.SiteServiceClient) *fedschedv1.Job {
		t.Helper()
		r, err := c.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{Spec: spec(1, 36000)})
		if err != nil {
			t.Fatal(err)
		}
		return r.GetJob()
	}
	c, stop, err := launchConfig(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // about 17 minutes of site time ahead of the wall clock
	first := submit(c).GetSubmitTime().AsTime()
	stop()
	if c, _, err = launchConfig(t, cfg); err != nil {
		t.Fatal(err)
	}
	if again := submit(c).GetSubmitTime().AsTime(); again.Before(first) {
		t.Errorf("after the restart the site's time went back %v: a job submitted after it at %v, one before it at %v",
			first.Sub(again).Round(time.Second), again.UTC(), first.UTC())
	}
}
