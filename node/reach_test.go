package node

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// walkedReach is jobsReach as it was first written: the latest end of the
// reservation of a live job, read from each job's message (every frozen
// job decoded).
func walkedReach(n *Node, now int64) int64 {
	reach := now
	for _, lj := range n.live {
		if r := lj.peek().GetReservation(); r != nil {
			reach = max(reach, r.GetEnd().AsTime().Unix())
		}
	}
	return reach
}

// startManualNode runs a conservative node of procs processors on a
// memory store and a clock that stays at t0 until the test ends.
func startManualNode(tb testing.TB, t0 time.Time, procs int) *Node {
	tb.Helper()
	cfg := config.Default()
	cfg.Site, cfg.DataDir, cfg.Procs, cfg.Executor, cfg.Policy = "t", tb.TempDir(), procs, "simulated", "conservative"
	cfg.Limits.MaxPendingJobs, cfg.Limits.MaxIdempotencyKeys = 1<<30, 1<<30
	n, stop := startOnClock(tb, cfg, store.NewMemStore(), clock.NewManual(t0))
	tb.Cleanup(stop)
	return n
}

// TestJobsReachFromThePlan: on a plan that mixes running, frozen and
// thawed waiting jobs with a fixed reservation, a standing reservation's
// instances and a hold for a peer, the last two reaching further than any
// job, jobsReach is the latest end of a live job's reservation, as read
// from the jobs' messages, and it decodes no frozen job to find it.
func TestJobsReachFromThePlan(t *testing.T) {
	t0 := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC) // a Monday
	n := startManualNode(t, t0, 8)
	ctx := context.Background()
	svc := &service{n: n}
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }
	const day = 24 * time.Hour
	for _, req := range []*fedschedv1.CreateReservationRequest{
		{Name: "far", Procs: 2, Start: at(30 * day), End: at(31 * day)},
		{Name: "nightly", Procs: 2, Start: at(time.Hour), End: at(2 * time.Hour), EverySeconds: 86400},
	} {
		if _, err := svc.CreateReservation(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	var ids []string
	for _, sp := range []*fedschedv1.JobSpec{
		{Procs: 4, EstimateSeconds: 7200},                                 // runs now
		{Procs: 8, EstimateSeconds: 3 * 3600},                             // waits for it
		{Procs: 6, EstimateSeconds: 10 * 3600, Release: at(3 * day)},      // the furthest
		{Procs: 2, EstimateSeconds: 3600, Release: at(2*day + time.Hour)}, // beside it
	} {
		sp.User, sp.App = "u", "t"
		r, err := svc.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.GetJob().GetId())
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		r, err := svc.GetJob(ctx, &fedschedv1.GetJobRequest{JobId: ids[0]})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetJob().GetState() == fedschedv1.JobState_JOB_STATE_RUNNING {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never started: %v", ids[0], r.GetJob().GetState())
		}
	}
	runInLoop(t, n, &inLoop{done: make(chan struct{}), f: func(n *Node) {
		now := n.now()
		// A peer's hold, further ahead than every job (not a live job).
		const holdID = 1 << 40
		if pl := n.site.Hold(now, plan.Job{ID: holdID, Procs: 1, Estimate: 86400, Release: now + 20*86400, Deadline: plan.Forever}, now+600); !pl.OK() {
			t.Errorf("hold refused: %v", pl.Reason) // not Fatal: this is the loop's goroutine
			return
		}
		defer n.site.Unhold(now, holdID)
		want := walkedReach(n, now)
		if want != t0.Add(3*day+10*time.Hour).Unix() {
			t.Errorf("the jobs reach %s, want the end of the job released on day 3", rfc(want))
			return
		}
		var frozen, thawed, running int
		for _, lj := range n.live {
			switch {
			case lj.frozen() && thawed == 0:
				lj.job() // one waiting job thawed in the turn
				thawed++
			case lj.frozen():
				frozen++
			case lj.state() == fedschedv1.JobState_JOB_STATE_RUNNING:
				running++
			}
		}
		if frozen < 2 || thawed != 1 || running != 1 || len(n.resv.fixed) != 1 || len(n.resv.rules) != 1 {
			t.Errorf("not the mix asked for: %d frozen, %d thawed, %d running jobs, %d fixed, %d standing",
				frozen, thawed, running, len(n.resv.fixed), len(n.resv.rules))
			return
		}
		// Every frozen job's bytes made undecodable, so that decoding one
		// panics (thawed), until the check is done.
		saved := map[*liveJob][]byte{}
		for _, lj := range n.live {
			if lj.frozen() {
				saved[lj], lj.wire = lj.wire, []byte{0xff}
			}
		}
		defer func() {
			for lj, w := range saved {
				lj.wire = w
			}
			if r := recover(); r != nil {
				t.Errorf("jobsReach decoded a frozen job: %v", r)
			}
		}()
		if got := n.jobsReach(now); got != want {
			t.Errorf("jobsReach = %s, the jobs' reservations reach %s", rfc(got), rfc(want))
		}
	}})
}

// BenchmarkJobsReach: how far the jobs reach (asked when a standing
// reservation is created) with 100,000 frozen waiting jobs, read from the
// plan (jobsReach) and, for comparison, from the jobs' messages as it was
// (walkedReach, which decodes every frozen job).
func BenchmarkJobsReach(b *testing.B) {
	t0 := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	n := startManualNode(b, t0, 16384) // as BenchmarkNodeThroughput
	svc := &service{n: n}
	ctx := context.Background()
	const waiting = 100_000
	for k := range waiting {
		sp := &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 3600, User: "u", App: "b",
			Release: timestamppb.New(t0.Add(24*time.Hour + time.Duration(k)*7*24*time.Hour/waiting))}
		if _, err := svc.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp}); err != nil {
			b.Fatal(err)
		}
	}
	for _, c := range []struct {
		name  string
		reach func(*Node, int64) int64
	}{{"plan", (*Node).jobsReach}, {"walk", walkedReach}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				runInLoop(b, n, &inLoop{done: make(chan struct{}), f: func(n *Node) { c.reach(n, n.now()) }})
			}
		})
	}
}
