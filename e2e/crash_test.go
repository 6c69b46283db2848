package e2e

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// crashCase crashes the origin or the executing site at one step of a
// delegation.
type crashCase struct {
	name string
	// victim is "origin" or "peer" (the site the origin is talking to).
	victim string
	// method and phase name the call of the origin at which the victim
	// crashes; method "" means: once the job runs at the peer.
	method string
	phase  Phase
	// lostReply: the peer crashes after answering, and the answer is lost
	// on the way back.
	lostReply bool
	// downUntilEnded keeps the victim down until the job has ended at the
	// peer (origin victims whose job the peer runs).
	downUntilEnded bool
	// want is the job's final state at the origin, 0 for any terminal
	// state that is consistent with the peers.
	want fedschedv1.JobState
	// orLost also accepts a job that had started at the peer before
	// the peer crashed: the simulated executor's jobs die with their
	// site, and the restarted peer reports it lost.
	orLost bool
	// hard crashes with Cluster.HardCrash instead of Cluster.Crash.
	hard bool
}

// TestCrashDuringDelegation crashes the origin, or the site the origin
// delegates to, before and after each step of the protocol (quote and its
// hold, agree) and while the job runs at the peer, restarts it on the same
// data directory, and checks that the job is neither lost (it ends, and
// what the origin says matches what the peers did) nor run twice.
//
// Three sites: "a" is full (a filler job holds all its processors), so its
// job goes to "b" or "c".
func TestCrashDuringDelegation(t *testing.T) {
	t.Parallel()
	completed := fedschedv1.JobState_JOB_STATE_COMPLETED
	for _, tc := range []crashCase{
		{name: "origin/before-quote", victim: "origin", method: "Quote", phase: Before, want: completed},
		{name: "origin/after-quote-hold", victim: "origin", method: "Quote", phase: After, want: completed},
		{name: "origin/before-agree", victim: "origin", method: "Agree", phase: Before, want: completed},
		{name: "origin/after-agree", victim: "origin", method: "Agree", phase: After, want: completed},
		{name: "origin/after-agree-down-until-ended", victim: "origin", method: "Agree", phase: After, downUntilEnded: true, want: completed},
		{name: "origin/job-running-at-peer", victim: "origin", want: completed},
		{name: "peer/before-quote", victim: "peer", method: "Quote", phase: Before, want: completed},
		{name: "peer/after-quote-hold", victim: "peer", method: "Quote", phase: After, want: completed},
		{name: "peer/before-agree", victim: "peer", method: "Agree", phase: Before, want: completed},
		{name: "peer/after-agree-reply-lost", victim: "peer", method: "Agree", phase: After, lostReply: true, want: completed, orLost: true},
		// The simulated executor's jobs die with the site: the restarted
		// peer reports the job lost (FAILED, SLA violated).
		{name: "peer/job-running", victim: "peer", want: fedschedv1.JobState_JOB_STATE_FAILED},
	} {
		// Each crash point twice: a graceful crash (the site's context
		// ends; a commit under way finishes) and a hard one (its store is
		// closed under it first: a commit under way fails, nothing more
		// reaches its data directory).
		for _, hard := range []bool{false, true} {
			tc := tc
			tc.hard = hard
			mode := "graceful"
			if hard {
				mode = "hard"
			}
			t.Run(mode+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				runCrashCase(t, tc)
			})
		}
	}
}

func crash(c *Cluster, tc crashCase, victim string) error {
	if tc.hard {
		return c.HardCrash(victim)
	}
	return c.Crash(victim)
}

func runCrashCase(t *testing.T, tc crashCase) {
	c := start(t, Options{TimeScale: 100, Federation: fed(), Sites: []SiteConfig{
		{Name: "a", Procs: 4}, {Name: "b", Procs: 8}, {Name: "c", Procs: 8},
	}})
	ctx := bg(t)
	a := c.Site("a")
	fill(t, a)

	// The hook crashes the victim at the chosen call, once.
	var fired atomic.Bool
	var victimName atomic.Value
	crashed := make(chan struct{})
	if tc.method != "" {
		c.SetHook(func(cctx context.Context, call Call) error {
			if call.From != "a" || call.Method != tc.method || call.Phase != tc.phase || (tc.phase == After && call.Err != nil) {
				return nil
			}
			if !fired.CompareAndSwap(false, true) {
				return nil
			}
			victim := "a"
			if tc.victim == "peer" {
				victim = call.To
			}
			victimName.Store(victim)
			t.Logf("crashing %s %s %s %s->%s", victim, call.Phase, call.Method, call.From, call.To)
			if err := crash(c, tc, victim); err != nil {
				t.Error(err)
			}
			close(crashed)
			return afterCrash(cctx, victim == "a", tc.lostReply)
		})
	}

	// The user submits; if the origin crashes under the call, the user
	// retries with the same idempotency key once it is back.
	spec := slaSpec(c, 2, 600, 300)
	req := &fedschedv1.SubmitJobRequest{IdempotencyKey: "the-job", Spec: spec}
	type answer struct {
		job *fedschedv1.Job
		err error
	}
	first := make(chan answer, 1)
	go func() {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		r, err := a.Client.SubmitJob(sctx, req)
		first <- answer{r.GetJob(), err}
	}()

	var job *fedschedv1.Job
	if tc.method == "" {
		// Crash once the job runs at the peer.
		ans := <-first
		if ans.err != nil || ans.job.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED {
			t.Fatalf("submit: %v %s", ans.err, brief(ans.job))
		}
		job = ans.job
		peer := c.Site(job.GetSite())
		ag, err := peer.Fed.GetAgreement(ctx, &fedschedv1.GetAgreementRequest{OriginSite: "a", OriginJobId: job.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		waitJob(t, peer, ag.GetAgreement().GetPeerJobId(), 20*time.Second, "running", inState(fedschedv1.JobState_JOB_STATE_RUNNING))
		victim := "a"
		if tc.victim == "peer" {
			victim = peer.Name
		}
		victimName.Store(victim)
		t.Logf("crashing %s while the job runs at %s", victim, peer.Name)
		if err := crash(c, tc, victim); err != nil {
			t.Fatal(err)
		}
		close(crashed)
	} else {
		select {
		case <-crashed:
		case ans := <-first:
			if !fired.Load() {
				t.Fatalf("the hook never fired: submit answered %v %s", ans.err, brief(ans.job))
			}
			// The crash cut the submission short before the hook
			// returned.
			<-crashed
			first <- ans
		case <-time.After(30 * time.Second):
			t.Fatal("the hook never fired")
		}
	}
	victim := victimName.Load().(string)
	if err := c.Wait(ctx, victim); err != nil {
		t.Logf("crashed %s stopped with: %v", victim, err)
	}
	c.SetHook(nil)
	if tc.downUntilEnded {
		// Wait until the peer that agreed has run the job to its end.
		waitPeerJobsEnded(t, c, "a")
	} else {
		// Stay down a while: the others notice (failed calls, gossip
		// suspicion), and holds and retries run into the outage.
		time.Sleep(500 * time.Millisecond)
	}
	if err := c.Restart(ctx, victim); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted %s", victim)

	if job == nil {
		ans := <-first
		switch {
		case ans.err == nil:
			job = ans.job
		case victim != "a":
			t.Fatalf("submit failed although only the peer crashed: %v", ans.err)
		default:
			// The user's retry after the origin came back.
			r, err := a.Client.SubmitJob(ctx, req)
			if err != nil {
				t.Fatalf("retried submit: %v", err)
			}
			job = r.GetJob()
			if !r.GetReplayed() {
				t.Logf("the first submission was not durable before the crash; the retry created %s", job.GetId())
			}
		}
	}
	final := waitJob(t, a, job.GetId(), 45*time.Second, "terminal", terminal)
	t.Logf("origin: %s", brief(final))
	runs := peerRuns(t, c, final)
	checkOneRun(t, final, runs)
	lost := final.GetState() == fedschedv1.JobState_JOB_STATE_FAILED && final.GetReason() == fedschedv1.Reason_REASON_FAILED_LOST_ON_RESTART
	if tc.want != 0 && final.GetState() != tc.want && !(tc.orLost && lost) {
		t.Errorf("final state %v, want %v", final.GetState(), tc.want)
	}
	// The origin has exactly the filler and this job: the retry did not
	// make a second one.
	if jobs := jobsOf(t, a); len(jobs) != 2 {
		for _, j := range jobs {
			t.Logf("at a: %s", brief(j))
		}
		t.Errorf("origin has %d jobs, want 2", len(jobs))
	}
}

// waitPeerJobsEnded waits until every job the peers run for origin has
// ended.
func waitPeerJobsEnded(t *testing.T, c *Cluster, origin string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		n, live := 0, 0
		for _, s := range c.Sites() {
			if s.Name == origin || !s.Running() {
				continue
			}
			for _, j := range receivedFrom(t, s, origin) {
				n++
				if !terminal(j) {
					live++
				}
			}
		}
		if n > 0 && live == 0 {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the peers' jobs did not end")
}

// peerRuns waits until every job the peers have for the origin of final
// has ended, and returns those that started.
func peerRuns(t *testing.T, c *Cluster, final *fedschedv1.Job) []*fedschedv1.Job {
	t.Helper()
	origin := final.GetOriginSite()
	var runs []*fedschedv1.Job
	for _, s := range c.Sites() {
		if s.Name == origin {
			continue
		}
		for _, j := range receivedFrom(t, s, origin) {
			pj := waitJob(t, s, j.GetId(), 20*time.Second, "terminal", terminal)
			t.Logf("peer %s: %s", s.Name, brief(pj))
			if pj.GetStartTime() != nil {
				runs = append(runs, pj)
			}
		}
	}
	return runs
}

// checkOneRun checks that the peers ran the origin job at most once, and
// that what the origin reports matches the run: the site, the state and
// the SLA outcome.
func checkOneRun(t *testing.T, final *fedschedv1.Job, runs []*fedschedv1.Job) {
	t.Helper()
	origin := final.GetOriginSite()
	switch {
	case len(runs) > 1:
		t.Errorf("the job ran %d times", len(runs))
	case len(runs) == 1:
		r := runs[0]
		if final.GetSite() != r.GetSite() || final.GetState() != r.GetState() || final.GetSlaOutcome() != r.GetSlaOutcome() {
			t.Errorf("origin reports %s, but it ran as %s", brief(final), brief(r))
		}
		checkRoute(t, final, origin, r.GetSite())
	default:
		if final.GetStartTime() != nil || final.GetSite() != origin {
			t.Errorf("origin reports %s, but no peer ran it", brief(final))
		}
	}
}

// TestOutcomeBeforeAgreement delays the Agree reply on its way back to the
// origin until the peer has run the (short) job and tried to report its
// outcome: the origin must still end up with the outcome.
func TestOutcomeBeforeAgreement(t *testing.T) {
	t.Parallel()
	c := start(t, Options{TimeScale: 100, Federation: fed(), Sites: []SiteConfig{{Name: "a", Procs: 4}, {Name: "b", Procs: 8}}})
	ctx := bg(t)
	a, b := c.Site("a"), c.Site("b")
	fill(t, a)
	var once atomic.Bool
	c.SetHook(func(_ context.Context, call Call) error {
		if call.Method != "Agree" || call.Phase != After || call.Err != nil || !once.CompareAndSwap(false, true) {
			return nil
		}
		id := call.Reply.(*fedschedv1.AgreeResponse).GetAgreement().GetPeerJobId()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if j, err := getJob(ctx, b, id); err == nil && terminal(j) {
				break
			}
		}
		time.Sleep(500 * time.Millisecond) // the peer's reporter tries a few times
		return nil
	})
	j := submit(t, a, slaSpec(c, 2, 100, 5))
	final := waitJob(t, a, j.GetId(), 10*time.Second, "settled", func(j *fedschedv1.Job) bool {
		return terminal(j) || j.GetState() == fedschedv1.JobState_JOB_STATE_DELEGATED
	})
	deadline := time.Now().Add(5 * time.Second)
	for !terminal(final) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		var err error
		if final, err = getJob(ctx, a, j.GetId()); err != nil {
			t.Fatal(err)
		}
	}
	if !terminal(final) {
		ag, err := b.Fed.GetAgreement(ctx, &fedschedv1.GetAgreementRequest{OriginSite: "a", OriginJobId: j.GetId()})
		t.Fatalf("the outcome never reached the origin: %s (agreement %v, %v)", brief(final), ag, err)
	}
	checkRoute(t, final, "a", "b")
	if final.GetState() != fedschedv1.JobState_JOB_STATE_COMPLETED {
		t.Errorf("final: %s", brief(final))
	}
}

// afterCrash is what a hooked call answers once the hook has crashed a
// site: if the caller is the crashed site, its goroutine is frozen until
// the crash has stopped its loop, as if the process were gone; otherwise
// the reply is lost (lostReply) or delivered.
func afterCrash(cctx context.Context, callerCrashed, lostReply bool) error {
	if callerCrashed {
		<-cctx.Done()
		time.Sleep(100 * time.Millisecond)
		return status.Error(codes.Unavailable, "e2e: the calling site crashed")
	}
	if lostReply {
		return status.Error(codes.Unavailable, "e2e: the reply was lost in the crash")
	}
	return nil
}
