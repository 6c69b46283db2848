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
// submissions exactly as the node's own core does (ownCore): the same accepted jobs, the
// same reservations, overbooked with the same PoF, the same rejections.
// The node's clock stands still, so admission alone decides (the first
// step of a differential test of the switch).
func TestAgentConfigDecidesAsTheNode(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 9))
	hpath := parityHistory(t, dir, rng)
	t0 := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	n := startNodeAt(t, parityConfig(filepath.Join(dir, "data"), hpath), clock.NewManual(t0), true)
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
		switch {
		case agent == "rejected":
			rejected++
		case d.Placement.Reason == plan.ReasonOverbooked:
			overbooked++
		}
	}
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
// store and the manual clock clk, on its own core (own) or driving its
// site agent, until the test ends.
func startNodeAt(t testing.TB, cfg config.Config, clk *clock.Manual, own bool) *Node {
	t.Helper()
	// A standing horizon of 6 hours: the rules are laid further, and
	// their instances forgotten, within a test's hours.
	n, stop := startOnClock(t, cfg, store.NewMemStore(), clk, func(n *Node) { n.ownCore, n.resv.horizon = own, 6*3600 })
	t.Cleanup(stop)
	if (n.agent == nil) != own {
		t.Fatalf("the node drives an agent: %v, want %v", n.agent != nil, !own)
	}
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
// node's own core does: the same replies, and in the end the same job
// records (state, reason, message, reservation, PoF, SLA) and
// reservations. The clocks stand still; a cancelled running job's kill
// ends it at once (the test waits for that end before the next op).
func TestNodeDecidesAsItsAgent(t *testing.T) {
	rng, _, sites := parityPair(t, 5, 11)
	own, agent := sites[0], sites[1]
	t0 := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()
	at := func(s int64) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	show := func(m interface{ String() string }, err error) string {
		if err != nil {
			return "error: " + err.Error()
		}
		return m.String()
	}
	var ids, resIDs []string
	kinds := map[string]int{}
	for i := range 160 {
		var o, a string
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
			ro, eo := own.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: spec})
			ra, ea := agent.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: spec})
			o, a = show(ro, eo), show(ra, ea)
			if eo == nil {
				ids = append(ids, ro.GetJob().GetId())
				kinds[ro.GetJob().GetState().String()]++
			}
		case k < 8:
			id := ids[rng.IntN(len(ids))]
			ro, eo := own.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: id})
			ra, ea := agent.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: id})
			o, a = show(ro, eo), show(ra, ea)
			kinds["cancel"]++
			if j := ro.GetJob(); j.GetStartTime() != nil {
				// Its kill's exit frees its processors in a later turn:
				// wait for it, so that the next op meets the same plan.
				kinds["cancel running"]++
				for _, s := range []*service{own, agent} {
					waitEnded(t, s, id)
				}
			}
		case k == 9 && len(resIDs) > 0 && rng.IntN(3) == 0:
			id := resIDs[rng.IntN(len(resIDs))]
			ro, eo := own.DeleteReservation(ctx, &fedschedv1.DeleteReservationRequest{ReservationId: id})
			ra, ea := agent.DeleteReservation(ctx, &fedschedv1.DeleteReservationRequest{ReservationId: id})
			o, a = show(ro, eo), show(ra, ea)
			kinds[fmt.Sprint("reservation deleted ", eo == nil)]++
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
			ro, eo := own.CreateReservation(ctx, req)
			ra, ea := agent.CreateReservation(ctx, req)
			o, a = show(ro, eo), show(ra, ea)
			if eo != nil {
				kinds[what+" reservation refused"]++
			} else {
				resIDs = append(resIDs, ro.GetReservation().GetId())
				kinds[fmt.Sprint(what, " reservation displacing ", len(ro.GetDisplaced()) > 0)]++
				for _, d := range ro.GetDisplaced() {
					kinds["displaced to "+d.GetState().String()]++
				}
			}
		}
		if o != a {
			t.Fatalf("op %d: own core\n%s\nagent\n%s", i, o, a)
		}
	}
	t.Logf("ops: %v", kinds)
	if o, a := parityRecords(t, own), parityRecords(t, agent); o != a {
		t.Fatalf("records differ:\nown core\n%s\nagent\n%s", o, a)
	}
	// What each learnt from the cancelled running jobs, as it would store
	// it.
	if o, a := parityStats(t, own), parityStats(t, agent); string(o) != string(a) {
		t.Fatalf("statistics differ:\nown core %s\nagent    %s", o, a)
	}
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
			fmt.Fprintln(&b, j.String())
		}
		if !ending || time.Now().After(deadline) {
			rr, err := s.ListReservations(ctx, &fedschedv1.ListReservationsRequest{})
			if err != nil {
				t.Fatal(err)
			}
			return b.String() + rr.String()
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
// cancelled, waiting jobs move up, and a node
// that drives its agent and one on its own core keep the same records and
// learn the same statistics, step by step (after each step both have
// started and ended every job due). Time never jumps past a start or an
// end: a start the loop makes late is measured from the planned start by
// the agent and from the real one by the node's own core.
func TestNodeRunsAsItsAgent(t *testing.T) {
	rng, clks, sites := parityPair(t, 7, 13)
	ctx := context.Background()
	var ids []string
	ended := 0
	// Both nodes answer a reservation request alike.
	both := func(step int, f func(*service) (fmt.Stringer, error)) fmt.Stringer {
		var got [2]string
		var r fmt.Stringer
		for i, s := range sites {
			var err error
			r, err = f(s)
			got[i] = fmt.Sprint(r, err)
		}
		if got[0] != got[1] {
			t.Fatalf("step %d, reservation: own core\n%s\nagent\n%s", step, got[0], got[1])
		}
		t.Logf("step %d: %s", step, got[0][:min(len(got[0]), 160)])
		return r
	}
	var rule string
	for step := range 200 {
		now := clks[0].Now().Unix()
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
			r := both(step, func(s *service) (fmt.Stringer, error) { return s.CreateReservation(ctx, req) })
			if step == 0 {
				rule = r.(*fedschedv1.CreateReservationResponse).GetReservation().GetId()
			}
		case 150:
			both(step, func(s *service) (fmt.Stringer, error) {
				return s.DeleteReservation(ctx, &fedschedv1.DeleteReservationRequest{ReservationId: rule})
			})
		}
		for range rng.IntN(4) {
			est := 300 + rng.Int64N(3600)
			// Every job runs past its estimate and is killed at its
			// reservation's end (a second after it): a job that ends early
			// frees processors at the same instant as a timer may start
			// another, and which of the two the node's loop takes first
			// (its own core's as much as its agent's) decides the plan.
			spec := &fedschedv1.JobSpec{Procs: int32(1 + rng.IntN(8)), EstimateSeconds: est, User: "u", App: "x", SimRuntimeSeconds: est + 1 + rng.Int64N(600)}
			if rng.IntN(2) == 0 {
				spec.Deadline, spec.Fee, spec.Penalty = timestamppb.New(time.Unix(now+est+rng.Int64N(4*est), 0)), 10, 5
			}
			ids = append(ids, submitBoth(t, sites, spec))
		}
		if len(ids) > 0 && rng.IntN(5) == 0 {
			id := ids[rng.IntN(len(ids))]
			var got [2]string
			for i, s := range sites {
				r, err := s.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: id})
				got[i] = fmt.Sprint(r, err)
				if r.GetJob().GetStartTime() != nil {
					// Its kill ends it in a later turn, before time moves
					// on.
					waitEnded(t, s, id)
				}
			}
			if got[0] != got[1] {
				t.Fatalf("step %d, cancel: own core\n%s\nagent\n%s", step, got[0], got[1])
			}
		}
		// Time moves to the next start or end at the latest, so that jobs
		// start and end on time, as on a live node whose loop is not
		// late (see the report on late starts).
		d := time.Duration(min(1+rng.Int64N(600), nextDue(t, sites[0], now)-now)) * time.Second
		for i, s := range sites {
			clks[i].Advance(d)
			for deadline := time.Now().Add(10 * time.Second); !settled(t, s, clks[i].Now().Unix()); time.Sleep(time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("step %d: site %d never settled", step, i)
				}
			}
		}
		if o, a := parityRecords(t, sites[0]), parityRecords(t, sites[1]); o != a {
			t.Fatalf("step %d: records differ:\n%s", step, firstDiff(o, a))
		}
		if o, a := parityStats(t, sites[0]), parityStats(t, sites[1]); string(o) != string(a) {
			t.Fatalf("step %d: statistics differ:\nown core %s\nagent    %s", step, o, a)
		}
		// The loop wakes to lay the rules further at the same time (with
		// no op to wake it, the outlook it gossips depends on it).
		var wakes [2]int64
		for i, s := range sites {
			runInLoop(t, s.n, &inLoop{done: make(chan struct{}), f: func(n *Node) { wakes[i] = n.reservationWake() }})
		}
		if wakes[0] != wakes[1] {
			t.Fatalf("step %d: the standing rules' wake: own core %d, agent %d", step, wakes[0], wakes[1])
		}
	}
	r, err := sites[0].ListJobs(ctx, &fedschedv1.ListJobsRequest{PageSize: 1000})
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

// firstDiff shows the first line in which the own core's text o and the
// agent's a differ.
func firstDiff(o, a string) string {
	ol, al := strings.Split(o, "\n"), strings.Split(a, "\n")
	for i := range min(len(ol), len(al)) {
		if ol[i] != al[i] {
			return fmt.Sprintf("own core %s\nagent    %s", ol[i], al[i])
		}
	}
	return fmt.Sprintf("own core %d lines, agent %d", len(ol), len(al))
}

// parityPair starts the two nodes of a differential test on parityConfig,
// trained on parityHistory, with manual clocks at the same time: the
// first on its own core, the second driving its agent. rng (seeded with
// a, b) drew the history and draws the test's work.
func parityPair(t *testing.T, a, b uint64) (*rand.Rand, [2]*clock.Manual, [2]*service) {
	t.Helper()
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(a, b))
	hpath := parityHistory(t, dir, rng)
	t0 := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	clks := [2]*clock.Manual{clock.NewManual(t0), clock.NewManual(t0)}
	return rng, clks, [2]*service{{n: startNodeAt(t, parityConfig(filepath.Join(dir, "own"), hpath), clks[0], true)},
		{n: startNodeAt(t, parityConfig(filepath.Join(dir, "agent"), hpath), clks[1], false)}}
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
// (capacity): the waiting jobs moved or failed, and the records, are the
// same on a node that drives its agent and on one on its own core.
func TestNodeLosesProcessorsAsItsAgent(t *testing.T) {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(3, 17))
	t0 := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	var sites [2]*service
	var caps [2]chan int
	for i, own := range []bool{true, false} {
		caps[i] = make(chan int)
		cfg := parityConfig(filepath.Join(dir, fmt.Sprint(i)), "")
		cfg.Overbooking.Enabled = false
		n, stop := startOnClock(t, cfg, store.NewMemStore(), clock.NewManual(t0), func(n *Node) {
			n.ownCore, n.deps.Executor = own, capacityExecutor{Executor: n.deps.Executor, c: caps[i]}
		})
		t.Cleanup(stop)
		if (n.agent == nil) != own {
			t.Fatalf("the node drives an agent: %v, want %v", n.agent != nil, !own)
		}
		sites[i] = &service{n: n}
	}
	at := func(s int64) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	failed := 0
	for round, usable := range []int{10, 4, 16, 2, 12} {
		for range 12 {
			est := 600 + rng.Int64N(7200)
			spec := &fedschedv1.JobSpec{Procs: int32(1 + rng.IntN(6)), EstimateSeconds: est, User: "u", App: "x"}
			if rng.IntN(2) == 0 {
				spec.Deadline = at(est + rng.Int64N(3*est))
			}
			submitBoth(t, sites, spec)
		}
		for i := range sites {
			caps[i] <- usable
		}
		o, a := parityRecords(t, sites[0]), parityRecords(t, sites[1])
		if o != a {
			t.Fatalf("round %d (%d usable): records differ:\n%s", round, usable, firstDiff(o, a))
		}
		failed = strings.Count(o, "REASON_FAILED_NODE")
	}
	t.Logf("%d jobs failed for lost processors", failed)
	if failed == 0 {
		t.Fatal("no job failed for lost processors: the test did not exercise NodeDown")
	}
}

// submitBoth submits spec to both nodes of a differential test, fails the
// test unless both answer alike, and returns the job's id.
func submitBoth(t *testing.T, sites [2]*service, spec *fedschedv1.JobSpec) string {
	t.Helper()
	var got [2]string
	var id string
	for i, s := range sites {
		r, err := s.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{Spec: spec})
		if err != nil {
			t.Fatal(err)
		}
		got[i], id = r.String(), r.GetJob().GetId()
	}
	if got[0] != got[1] {
		t.Fatalf("submit: %s", firstDiff(got[0], got[1]))
	}
	return id
}
