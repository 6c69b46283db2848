package node

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// TestAgentConfigDecidesAsTheNode: the agent a node's configuration gives
// (agentConfig, with the node's history as pastJobs) admits a run of
// submissions exactly as the node does: the same accepted jobs, the same
// reservations, overbooked with the same PoF, the same rejections; and
// the node answers as the node's own core did (the baseline recorded
// from it, testdata/TestAgentConfigDecidesAsTheNode.golden). The node's
// clock stands still, so admission alone decides.
func TestAgentConfigDecidesAsTheNode(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 9))
	hpath := parityHistory(t, dir, rng)
	t0 := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	n := startNodeAt(t, parityConfig(filepath.Join(dir, "data"), hpath), clock.NewManual(t0))
	past, _, err := pastJobs(hpath)
	if err != nil {
		t.Fatal(err)
	}
	pj := make([]site.PastJob, len(past))
	for i, p := range past {
		pj[i] = p.PastJob
	}
	a, err := site.New(n.agentConfig(pj))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	svc := &service{n: n}
	now := t0.Unix()
	overbooked, rejected := 0, 0
	var tr transcript
	for i := range 80 {
		est := 600 + rng.Int64N(7200)
		procs := 1 + rng.IntN(8)
		deadline := now + est + rng.Int64N(10*est)
		spec := &fedschedv1.JobSpec{Procs: int32(procs), EstimateSeconds: est, Deadline: timestamppb.New(time.Unix(deadline, 0)), Fee: 10, Penalty: 5,
			User: "u", App: "x", SimRuntimeSeconds: est}
		r, err := svc.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		j := r.GetJob()
		a.Submit(now, a.NextID(), planJob(spec, 0, now))
		rd := a.Ready()
		if len(rd.Decisions) != 1 {
			t.Fatalf("job %d: the agent decided %+v", i, rd.Decisions)
		}
		d := rd.Decisions[0]
		node := "rejected"
		if res := j.GetReservation(); res != nil && j.GetState() != fedschedv1.JobState_JOB_STATE_REJECTED {
			node = fmt.Sprintf("%d..%d overbooked %v pof %.6f", res.GetStart().AsTime().Unix(), res.GetEnd().AsTime().Unix(), j.GetOverbooked(), j.GetPof())
		}
		agent := "rejected"
		if d.Kind == site.DecideAccept {
			agent = fmt.Sprintf("%d..%d overbooked %v pof %.6f", d.Placement.Start, d.Placement.End, d.Placement.Reason == plan.ReasonOverbooked, d.Placement.PoF)
		}
		if node != agent {
			t.Fatalf("job %d (%d procs, %d s, deadline +%d): node %s (%v), agent %s", i, procs, est, deadline-now, node, j.GetState(), agent)
		}
		tr.add("job %d: %s", i, stable(r))
		switch {
		case agent == "rejected":
			rejected++
		case d.Placement.Reason == plan.ReasonOverbooked:
			overbooked++
		}
	}
	tr.check(t, t.Name())
	t.Logf("80 submissions: %d overbooked, %d rejected, the rest placed in full; all alike", overbooked, rejected)
	if overbooked == 0 || rejected == 0 {
		t.Fatalf("the run did not exercise overbooking (%d) and rejection (%d)", overbooked, rejected)
	}
}

// parityConfig is the configuration of the differential tests: a
// conservative site of 16 processors that overbooks (PoF 0.5), trained on
// the SWF file hpath.
func parityConfig(dir, hpath string) config.Config {
	cfg := config.Default()
	cfg.Site, cfg.DataDir, cfg.Procs, cfg.Executor, cfg.Policy = "t", dir, 16, "simulated", "conservative"
	cfg.Limits.MaxPendingJobs, cfg.Limits.MaxIdempotencyKeys = 1<<30, 1<<30
	cfg.Overbooking.Enabled, cfg.Overbooking.PoFMax, cfg.Overbooking.History = true, 0.5, hpath
	return cfg
}

// startNodeAt runs a node of cfg (that does not federate) on a memory
// store and the manual clock clk until the test ends.
func startNodeAt(t testing.TB, cfg config.Config, clk *clock.Manual) *Node {
	t.Helper()
	// A standing horizon of 6 hours: the rules are laid further, and
	// their instances forgotten, within a test's hours.
	n, stop := startOnClock(t, cfg, store.NewMemStore(), clk, func(n *Node) { n.resv.horizon = 6 * 3600 })
	t.Cleanup(stop)
	return n
}

// parityHistory writes 300 past jobs that ran 20-70 % of their estimate
// as an SWF file in dir, and returns its path.
func parityHistory(t *testing.T, dir string, rng *rand.Rand) string {
	t.Helper()
	var hist strings.Builder
	for i := range 300 {
		est := 600 + rng.Int64N(7200)
		fmt.Fprintf(&hist, "%d %d 0 %d 2 -1 -1 2 %d -1 1 1 1 1 1 1 -1 -1\n", i+1, i*100, est*int64(20+rng.IntN(50))/100, est)
	}
	hpath := filepath.Join(dir, "history.swf")
	if err := os.WriteFile(hpath, []byte(hist.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return hpath
}

// TestNodeDecidesAsItsAgent: a node that drives its site agent answers a
// run of submissions, cancels (of waiting and running jobs) and fixed
// reservations (some displacing jobs, some refused) exactly as the
// node's own core did (the baseline recorded from it,
// testdata/TestNodeDecidesAsItsAgent.golden): the same replies, and in
// the end the same job records (state, reason, message, reservation, PoF,
// SLA), reservations and statistics. The clock stands still; a cancelled
// running job's kill ends it at once (the test waits for that end before
// the next op).
func TestNodeDecidesAsItsAgent(t *testing.T) {
	rng, _, s := parityNode(t, 5, 11)
	t0 := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()
	at := func(s int64) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	show := func(m proto.Message, err error) string {
		if err != nil {
			return "error: " + err.Error()
		}
		return stable(m)
	}
	var tr transcript
	var ids, resIDs []string
	kinds := map[string]int{}
	for i := range 160 {
		var o string
		switch k := rng.IntN(10); {
		case k < 6 || len(ids) == 0:
			est := 600 + rng.Int64N(7200)
			spec := &fedschedv1.JobSpec{Procs: int32(1 + rng.IntN(8)), EstimateSeconds: est, User: "u", App: "x", SimRuntimeSeconds: est}
			if rng.IntN(2) == 0 {
				spec.Deadline, spec.Fee, spec.Penalty = at(est+rng.Int64N(3*est)), 10, 5
			}
			if rng.IntN(3) == 0 {
				spec.Release = at(rng.Int64N(4 * 3600))
			}
			r, err := s.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: spec})
			o = "submit " + show(r, err)
			if err == nil {
				ids = append(ids, r.GetJob().GetId())
				kinds[r.GetJob().GetState().String()]++
			}
		case k < 8:
			id := ids[rng.IntN(len(ids))]
			r, err := s.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: id})
			o = "cancel " + show(r, err)
			kinds["cancel"]++
			if j := r.GetJob(); j.GetStartTime() != nil {
				// Its kill's exit frees its processors in a later turn:
				// wait for it, so that the next op meets the same plan.
				kinds["cancel running"]++
				waitEnded(t, s, id)
			}
		case k == 9 && len(resIDs) > 0 && rng.IntN(3) == 0:
			id := resIDs[rng.IntN(len(resIDs))]
			r, err := s.DeleteReservation(ctx, &fedschedv1.DeleteReservationRequest{ReservationId: id})
			o = "delete reservation " + show(r, err)
			kinds[fmt.Sprint("reservation deleted ", err == nil)]++
		default:
			// k == 8: a fixed reservation; k == 9: a standing one (every
			// 4 to 24 hours, 10 to 70 minutes long).
			start := rng.Int64N(6 * 3600)
			req := &fedschedv1.CreateReservationRequest{Name: fmt.Sprint("r", i), Procs: int32(1 + rng.IntN(12)), Start: at(start), End: at(start + 600 + rng.Int64N(3600)),
				Displace: rng.IntN(2) == 0}
			what := "fixed"
			if k == 9 {
				req.EverySeconds, what = 3600*(4+rng.Int64N(21)), "standing"
			}
			r, err := s.CreateReservation(ctx, req)
			o = "reserve " + show(r, err)
			if err != nil {
				kinds[what+" reservation refused"]++
			} else {
				resIDs = append(resIDs, r.GetReservation().GetId())
				kinds[fmt.Sprint(what, " reservation displacing ", len(r.GetDisplaced()) > 0)]++
				for _, d := range r.GetDisplaced() {
					kinds["displaced to "+d.GetState().String()]++
				}
			}
		}
		tr.add("op %d: %s", i, o)
	}
	t.Logf("ops: %v", kinds)
	tr.add("records")
	tr.add("%s", parityRecords(t, s))
	// What it learnt from the cancelled running jobs, as it would store
	// it.
	tr.add("statistics %s", parityStats(t, s))
	tr.check(t, t.Name())
}

// waitEnded waits until job id has an end time at s.
func waitEnded(t *testing.T, s *service, id string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		r, err := s.GetJob(context.Background(), &fedschedv1.GetJobRequest{JobId: id})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetJob().GetEndTime() != nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s never ended", id)
		}
	}
}

// parityRecords is every job of s (without its update time and history)
// and its reservations, as text, after the loop's current turn and once
// no cancelled job is still running (a kill ends its job in a later
// turn).
func parityRecords(t *testing.T, s *service) string {
	t.Helper()
	ctx := context.Background()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		// A turn may commit in two steps (its starts first, pass) and
		// answer the ops it took after the first: an op sent after that
		// answer comes in a later turn, after the whole of this one.
		for range 2 {
			runInLoop(t, s.n, &inLoop{done: make(chan struct{}), f: func(*Node) {}})
		}
		r, err := s.ListJobs(ctx, &fedschedv1.ListJobsRequest{PageSize: 1000})
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		ending := false
		for _, j := range r.GetJobs() {
			ending = ending || j.GetState() == fedschedv1.JobState_JOB_STATE_CANCELLED && j.GetStartTime() != nil && j.GetEndTime() == nil
			j.UpdateTime, j.History = nil, nil
			fmt.Fprintln(&b, stable(j))
		}
		if !ending || time.Now().After(deadline) {
			rr, err := s.ListReservations(ctx, &fedschedv1.ListReservationsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			for _, res := range rr.GetReservations() {
				fmt.Fprintln(&b, stable(res))
			}
			return b.String()
		}
	}
}

// parityStats is s's runtime statistics as it would store them.
func parityStats(t *testing.T, s *service) (b []byte) {
	t.Helper()
	runInLoop(t, s.n, &inLoop{done: make(chan struct{}), f: func(n *Node) {
		var err error
		if b, err = n.stats.MarshalJSON(); err != nil {
			t.Error(err)
		}
	}})
	return b
}

// settled reports whether every job of s that should have started or
// ended by now has: none is PENDING with a reservation begun, none
// RUNNING past its simulated runtime or its reservation's kill.
func settled(t *testing.T, s *service, now int64) bool {
	t.Helper()
	r, err := s.ListJobs(context.Background(), &fedschedv1.ListJobsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range r.GetJobs() {
		res := j.GetReservation()
		switch {
		case j.GetState() == fedschedv1.JobState_JOB_STATE_PENDING && res != nil && res.GetStart().AsTime().Unix() <= now:
			return false
		case j.GetEndTime() == nil && j.GetStartTime() != nil &&
			(j.GetStartTime().AsTime().Unix()+j.GetSpec().GetSimRuntimeSeconds() <= now || res.GetEnd().AsTime().Unix()+1 <= now):
			return false
		}
	}
	return true
}

// nextDue is the next time after now at which a job of s starts or ends
// (by its simulated runtime or its reservation's kill), plan.Forever if
// none does.
func nextDue(t *testing.T, s *service, now int64) int64 {
	t.Helper()
	r, err := s.ListJobs(context.Background(), &fedschedv1.ListJobsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	due := int64(plan.Forever)
	later := func(at int64) {
		if at > now {
			due = min(due, at)
		}
	}
	for _, j := range r.GetJobs() {
		res := j.GetReservation()
		switch {
		case j.GetState() == fedschedv1.JobState_JOB_STATE_PENDING && res != nil:
			later(res.GetStart().AsTime().Unix())
		case j.GetEndTime() == nil && j.GetStartTime() != nil:
			later(j.GetStartTime().AsTime().Unix() + j.GetSpec().GetSimRuntimeSeconds())
			later(res.GetEnd().AsTime().Unix() + 1)
		}
	}
	return due
}

// TestNodeRunsAsItsAgent: as TestNodeDecidesAsItsAgent, with time
// passing: jobs start, are killed at their reservation's end or
// cancelled, waiting jobs move up, and a node that drives its agent keeps
// the records, learns the statistics and wakes for the standing rules as
// the node's own core did (testdata/TestNodeRunsAsItsAgent.golden), step
// by step (after each step it has started and ended every job due). Time
// never jumps past a start or an end: a start the loop makes late is
// measured from the planned start by the agent and was measured from the
// real one by the node's own core.
func TestNodeRunsAsItsAgent(t *testing.T) {
	rng, clk, s := parityNode(t, 7, 13)
	ctx := context.Background()
	var tr transcript
	var ids []string
	ended := 0
	reply := func(step int, what string, m proto.Message, err error) {
		tr.add("step %d %s: %s %v", step, what, stable(m), err)
	}
	var rule, stats string
	for step := range 200 {
		now := clk.Now().Unix()
		switch step {
		case 0, 90:
			// Standing rules: one before any job, one (displacing) among
			// them; then the first is deleted.
			req := &fedschedv1.CreateReservationRequest{Name: "every 3h", Procs: 4, Start: timestamppb.New(time.Unix(now+1800, 0)),
				End: timestamppb.New(time.Unix(now+3000, 0)), EverySeconds: 3 * 3600}
			if step == 90 {
				req = &fedschedv1.CreateReservationRequest{Name: "every 5h", Procs: 6, Start: timestamppb.New(time.Unix(now+7200, 0)),
					End: timestamppb.New(time.Unix(now+9000, 0)), EverySeconds: 5 * 3600, Displace: true}
			}
			r, err := s.CreateReservation(ctx, req)
			reply(step, "reserve", r, err)
			if step == 0 {
				rule = r.GetReservation().GetId()
			}
		case 150:
			r, err := s.DeleteReservation(ctx, &fedschedv1.DeleteReservationRequest{ReservationId: rule})
			reply(step, "delete reservation", r, err)
		}
		for range rng.IntN(4) {
			est := 300 + rng.Int64N(3600)
			// Every job runs past its estimate and is killed at its
			// reservation's end (a second after it): a job that ends early
			// frees processors at the same instant as a timer may start
			// another, and which of the two the node's loop takes first
			// decides the plan.
			spec := &fedschedv1.JobSpec{Procs: int32(1 + rng.IntN(8)), EstimateSeconds: est, User: "u", App: "x", SimRuntimeSeconds: est + 1 + rng.Int64N(600)}
			if rng.IntN(2) == 0 {
				spec.Deadline, spec.Fee, spec.Penalty = timestamppb.New(time.Unix(now+est+rng.Int64N(4*est), 0)), 10, 5
			}
			r, err := s.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: spec})
			if err != nil {
				t.Fatal(err)
			}
			reply(step, "submit", r, err)
			ids = append(ids, r.GetJob().GetId())
		}
		if len(ids) > 0 && rng.IntN(5) == 0 {
			id := ids[rng.IntN(len(ids))]
			r, err := s.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: id})
			reply(step, "cancel", r, err)
			if r.GetJob().GetStartTime() != nil {
				// Its kill ends it in a later turn, before time moves on.
				waitEnded(t, s, id)
			}
		}
		// Time moves to the next start or end at the latest, so that jobs
		// start and end on time, as on a live node whose loop is not
		// late (see the report on late starts).
		d := time.Duration(min(1+rng.Int64N(600), nextDue(t, s, now)-now)) * time.Second
		clk.Advance(d)
		for deadline := time.Now().Add(10 * time.Second); !settled(t, s, clk.Now().Unix()); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("step %d: the node never settled", step)
			}
		}
		tr.delta(fmt.Sprintf("step %d records at %d", step, clk.Now().Unix()), parityRecords(t, s))
		if st := string(parityStats(t, s)); st != stats {
			tr.add("step %d statistics %s", step, st)
			stats = st
		}
		// The loop wakes to lay the rules further (with no op to wake it,
		// the outlook it gossips depends on it).
		var wake int64
		runInLoop(t, s.n, &inLoop{done: make(chan struct{}), f: func(n *Node) { wake = n.reservationWake() }})
		tr.add("step %d standing rules wake at %d", step, wake)
	}
	tr.check(t, t.Name())
	r, err := s.ListJobs(ctx, &fedschedv1.ListJobsRequest{PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	states := map[string]int{}
	for _, j := range r.GetJobs() {
		states[j.GetState().String()+" "+j.GetReason().String()]++
		if j.GetEndTime() != nil {
			ended++
		}
	}
	t.Logf("%d jobs, %d ended: %v", len(ids), ended, states)
}

// parityNode starts the node of a differential test on parityConfig,
// trained on parityHistory, with a manual clock. rng (seeded
// with a, b) drew the history and draws the test's work.
func parityNode(t *testing.T, a, b uint64) (*rand.Rand, *clock.Manual, *service) {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(a, b))
	hpath := parityHistory(t, dir, rng)
	clk := clock.NewManual(time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC))
	return rng, clk, &service{n: startNodeAt(t, parityConfig(filepath.Join(dir, "data"), hpath), clk)}
}

// capacityExecutor is an executor whose batch system reports the
// processors it would start jobs on through c (as Slurm's does).
type capacityExecutor struct {
	executor.Executor
	c chan int
}

func (e capacityExecutor) Capacity() <-chan int { return e.c }

// TestNodeLosesProcessorsAsItsAgent: as TestNodeDecidesAsItsAgent, for a
// batch system that takes processors out of service and returns them
// (capacity): the waiting jobs moved or failed, and the records, are
// those of the node's own core (testdata/TestNodeLosesProcessorsAsItsAgent.golden).
func TestNodeLosesProcessorsAsItsAgent(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 17))
	t0 := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	capc := make(chan int)
	cfg := parityConfig(filepath.Join(dir, "data"), "")
	cfg.Overbooking.Enabled = false
	n, stop := startOnClock(t, cfg, store.NewMemStore(), clock.NewManual(t0), func(n *Node) {
		n.deps.Executor = capacityExecutor{Executor: n.deps.Executor, c: capc}
	})
	t.Cleanup(stop)
	s := &service{n: n}
	at := func(s int64) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	var tr transcript
	failed := 0
	for round, usable := range []int{10, 4, 16, 2, 12} {
		for range 12 {
			est := 600 + rng.Int64N(7200)
			spec := &fedschedv1.JobSpec{Procs: int32(1 + rng.IntN(6)), EstimateSeconds: est, User: "u", App: "x"}
			if rng.IntN(2) == 0 {
				spec.Deadline = at(est + rng.Int64N(3*est))
			}
			r, err := s.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{Spec: spec})
			if err != nil {
				t.Fatal(err)
			}
			tr.add("round %d submit %s", round, stable(r))
		}
		capc <- usable
		o := parityRecords(t, s)
		tr.delta(fmt.Sprintf("round %d (%d usable) records", round, usable), o)
		failed = strings.Count(o, "REASON_FAILED_NODE")
	}
	tr.check(t, t.Name())
	t.Logf("%d jobs failed for lost processors", failed)
	if failed == 0 {
		t.Fatal("no job failed for lost processors: the test did not exercise NodeDown")
	}
}
