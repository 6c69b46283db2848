package e2e

import (
	"testing"
	"time"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

func cancelJob(t *testing.T, s *Site, id string) {
	t.Helper()
	if _, err := s.Client.CancelJob(bg(t), &fedschedv1.CancelJobRequest{JobId: id, Message: "e2e: make room"}); err != nil {
		t.Fatalf("cancel %s at %s: %v", id, s.Name, err)
	}
}

// delegatedTo submits a job to origin and checks that it was delegated to
// want.
func delegatedTo(t *testing.T, c *Cluster, origin *Site, want string, estimate, runtime int64) *fedschedv1.Job {
	t.Helper()
	j := submit(t, origin, slaSpec(c, 2, estimate, runtime))
	if j.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED || j.GetSite() != want {
		t.Fatalf("want the job delegated to %s, got %s", want, brief(j))
	}
	return j
}

// completedAt waits until a job completes at its origin with its SLA met,
// run by site exec.
func completedAt(t *testing.T, origin *Site, id, exec string, within time.Duration) *fedschedv1.Job {
	t.Helper()
	j := waitJob(t, origin, id, within, "terminal", terminal)
	if j.GetState() != fedschedv1.JobState_JOB_STATE_COMPLETED || j.GetSlaOutcome() != fedschedv1.SlaOutcome_SLA_OUTCOME_MET {
		t.Errorf("want completed with its SLA met, got %s", brief(j))
	}
	checkRoute(t, j, origin.Name, exec)
	return j
}

// TestLeaveAndRejoin stops a peer gracefully: the others see it left and
// delegate to the remaining peer; it comes back on the same data
// directory, with the jobs it ran, and takes delegated work again.
func TestLeaveAndRejoin(t *testing.T) {
	t.Parallel()
	c := start(t, Options{TimeScale: 100, Federation: fed(), Sites: []SiteConfig{
		{Name: "a", Procs: 4}, {Name: "b", Procs: 8}, {Name: "c", Procs: 8},
	}})
	ctx := bg(t)
	a, b, cs := c.Site("a"), c.Site("b"), c.Site("c")
	fill(t, a)
	fc := fill(t, cs)
	j1 := delegatedTo(t, c, a, "b", 300, 150)
	completedAt(t, a, j1.GetId(), "b", 20*time.Second)

	if err := c.Stop("b"); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"a", "c"} {
		if err := c.WaitMember(ctx, o, "b", "left"); err != nil {
			t.Fatal(err)
		}
	}
	cancelJob(t, cs, fc.GetId())
	j2 := delegatedTo(t, c, a, "c", 300, 150)
	j3 := delegatedTo(t, c, a, "c", 300, 150)

	if err := c.Restart(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	// b kept its state: the job it ran before it left.
	got := receivedFrom(t, b, "a")
	if len(got) != 1 || got[0].GetState() != fedschedv1.JobState_JOB_STATE_COMPLETED {
		t.Fatalf("b after the restart: %v", got)
	}
	fill(t, cs)
	j4 := delegatedTo(t, c, a, "b", 300, 150)
	completedAt(t, a, j2.GetId(), "c", 20*time.Second)
	completedAt(t, a, j3.GetId(), "c", 20*time.Second)
	completedAt(t, a, j4.GetId(), "b", 20*time.Second)
}

// TestFalseSuspicion partitions only the gossip of a peer that runs
// delegated jobs, keeping gRPC up: gossip declares it dead, nobody asks it
// for new quotes, but nobody writes it off either: its jobs complete and
// their outcomes reach the origin. When gossip heals it is alive again.
func TestFalseSuspicion(t *testing.T) {
	t.Parallel()
	c := start(t, Options{TimeScale: 100, Federation: fed(), Sites: []SiteConfig{
		{Name: "a", Procs: 4}, {Name: "b", Procs: 8}, {Name: "c", Procs: 8},
	}})
	ctx := bg(t)
	a, b := c.Site("a"), c.Site("b")
	fill(t, a)
	fill(t, b)
	var jobs []*fedschedv1.Job
	for range 3 {
		jobs = append(jobs, delegatedTo(t, c, a, "c", 1500, 1200))
	}
	began := time.Now()
	if err := c.Isolate("c", Gossip); err != nil {
		t.Fatal(err)
	}
	for _, o := range []string{"a", "b"} {
		if err := c.WaitMember(ctx, o, "c", "dead"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("gossip declared c dead after %v", time.Since(began).Round(time.Millisecond))
	// The jobs are still c's: none was given up or moved.
	for _, j := range jobs {
		got, err := getJob(ctx, a, j.GetId())
		if err != nil || got.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED || got.GetSite() != "c" {
			t.Fatalf("while c is suspected: %s %v", brief(got), err)
		}
	}
	// A new job is not sent to a site gossip says is dead (and b is full).
	j := submit(t, a, slaSpec(c, 2, 300, 150))
	if j.GetSite() == "c" {
		t.Errorf("delegated to a site gossip declared dead: %s", brief(j))
	}
	for _, j := range jobs {
		completedAt(t, a, j.GetId(), "c", 30*time.Second)
	}
	if m, err := c.Members(ctx, "a"); err != nil || m["c"] != "dead" {
		t.Logf("c no longer dead at a when the outcomes arrived: %v %v", m, err)
	}
	c.Heal()
	if err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("gossip healed %v after the partition", time.Since(began).Round(time.Millisecond))
}

// TestPartition cuts a and b apart (gossip and gRPC) in a federation of
// three: a keeps delegating through c; the outcomes of the jobs b ran for
// a during the cut are held back, and delivered once the cut heals.
func TestPartition(t *testing.T) {
	t.Parallel()
	c := start(t, Options{TimeScale: 100, Federation: fed(), Sites: []SiteConfig{
		{Name: "a", Procs: 4}, {Name: "b", Procs: 8}, {Name: "c", Procs: 8},
	}})
	ctx := bg(t)
	a, b, cs := c.Site("a"), c.Site("b"), c.Site("c")
	fill(t, a)
	fc := fill(t, cs)
	var atB []*fedschedv1.Job
	for range 2 {
		atB = append(atB, delegatedTo(t, c, a, "b", 1000, 500))
	}
	if err := c.Cut("a", "b", Both); err != nil {
		t.Fatal(err)
	}
	cancelJob(t, cs, fc.GetId())
	var atC []*fedschedv1.Job
	for range 2 {
		atC = append(atC, delegatedTo(t, c, a, "c", 300, 100))
	}
	for _, j := range atC {
		completedAt(t, a, j.GetId(), "c", 20*time.Second)
	}
	// b finishes a's jobs, but cannot tell a.
	for _, j := range atB {
		ag, err := b.Fed.GetAgreement(ctx, &fedschedv1.GetAgreementRequest{OriginSite: "a", OriginJobId: j.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		waitJob(t, b, ag.GetAgreement().GetPeerJobId(), 20*time.Second, "completed", inState(fedschedv1.JobState_JOB_STATE_COMPLETED))
	}
	time.Sleep(300 * time.Millisecond) // a few report rounds
	for _, j := range atB {
		got, err := getJob(ctx, a, j.GetId())
		if err != nil || got.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED {
			t.Fatalf("outcome crossed the cut: %s %v", brief(got), err)
		}
	}
	healed := time.Now()
	if err := c.Mend("a", "b", Both); err != nil {
		t.Fatal(err)
	}
	for _, j := range atB {
		completedAt(t, a, j.GetId(), "b", 20*time.Second)
	}
	t.Logf("outcomes delivered %v after the cut healed", time.Since(healed).Round(time.Millisecond))
	if err := c.WaitConverged(ctx); err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Site{a, b, cs} {
		sum, err := Summarize(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		if sum.Open != 0 {
			t.Errorf("open SLAs left: %+v", sum)
		}
	}
}
