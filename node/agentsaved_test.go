package node

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// TestSavedFromStoreRestoresTheNodesPlan: an agent restored from what a
// node stored (savedFromStore, agentConfig) holds the node's plan: every
// live job where the node has it, running or waiting, and the operator's
// fixed reservation.
func TestSavedFromStoreRestoresTheNodesPlan(t *testing.T) {
	t0 := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	n := startManualNode(t, t0, 8)
	ctx := context.Background()
	svc := &service{n: n}
	at := func(d time.Duration) *timestamppb.Timestamp { return timestamppb.New(t0.Add(d)) }
	if _, err := svc.CreateReservation(ctx, &fedschedv1.CreateReservationRequest{Name: "maint", Procs: 4, Start: at(3 * time.Hour), End: at(4 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	for _, sp := range []*fedschedv1.JobSpec{
		{Procs: 4, EstimateSeconds: 7200},                               // runs now
		{Procs: 8, EstimateSeconds: 3600},                               // after it, before the maintenance? no: after it
		{Procs: 2, EstimateSeconds: 1800},                               // beside the first
		{Procs: 6, EstimateSeconds: 10 * 3600},                          // late
		{Procs: 2, EstimateSeconds: 600, Release: at(30 * time.Minute)}, // released later
	} {
		sp.User, sp.App = "u", "t"
		if _, err := svc.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		var running int
		runInLoop(t, n, &inLoop{done: make(chan struct{}), f: func(n *Node) { running = n.site.Running() }})
		if running == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d jobs running, want 2", running)
		}
	}
	runInLoop(t, n, &inLoop{done: make(chan struct{}), f: func(n *Node) {
		now := n.now()
		saved, err := savedFromStore(ctx, n.deps.Store, n.cfg.Site)
		if err != nil {
			t.Error(err)
			return
		}
		a, err := site.Restore(n.agentConfig(nil), now, saved)
		if err != nil {
			t.Error(err)
			return
		}
		if a.Site().Running() != n.site.Running() || a.Site().Waiting() != n.site.Waiting() || len(a.Site().Fixed()) != len(n.site.Fixed()) {
			t.Errorf("agent: %d running, %d waiting, %d fixed; node: %d, %d, %d", a.Site().Running(), a.Site().Waiting(), len(a.Site().Fixed()),
				n.site.Running(), n.site.Waiting(), len(n.site.Fixed()))
		}
		for seq := range n.live {
			want, ok := n.site.Placement(seq)
			got, ok2 := a.Site().Placement(seq)
			if ok != ok2 || want.Start != got.Start || want.End != got.End {
				t.Errorf("job %d: node %+v (%v), agent %+v (%v)", seq, want, ok, got, ok2)
			}
		}
		for _, at := range []int64{now, now + 1800, now + 3*3600 + 1, now + 5*3600, now + 12*3600} {
			if f, g := n.site.Plan().Free(at), a.Site().Plan().Free(at); f != g {
				t.Errorf("free at +%d s: node %d, agent %d", at-now, f, g)
			}
		}
		if a.NextID() != int64(n.nextSeq)+1 {
			t.Errorf("the agent's next id %d, the node's %d", a.NextID(), n.nextSeq+1)
		}
	}})
}

// liveSite is one site of a small federation of real nodes (Launch), for
// tests that read what the nodes stored.
type liveSite struct {
	cfg    config.Config
	client fedschedv1.SiteServiceClient
	gossip string
	stop   func()
}

// launchLive starts a site with cfg on loopback, on clk, joining join (if
// not empty), and waits until it serves and sees members alive.
func launchLive(t *testing.T, cfg config.Config, clk clock.Clock, join string, members int) *liveSite {
	t.Helper()
	cfg.Gossip.Addr, cfg.Insecure = "127.0.0.1:0", true
	if join != "" {
		cfg.Gossip.Join = []string{join}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	gossip, ready, done := make(chan string, 1), make(chan string, 1), make(chan error, 1)
	go func() {
		done <- Launch(ctx, cfg, LaunchOptions{Listener: lis, Clock: clk, GossipAddr: gossip, Ready: ready})
	}()
	s := &liveSite{cfg: cfg, gossip: <-gossip}
	<-ready
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	s.client = fedschedv1.NewSiteServiceClient(conn)
	stopped := false
	s.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: %v", cfg.Site, err)
		}
		conn.Close()
	}
	t.Cleanup(s.stop)
	fed := fedschedv1.NewFederationServiceClient(conn)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, err := fed.ListMembers(context.Background(), &fedschedv1.ListMembersRequest{})
		alive := 0
		for _, m := range r.GetMembers() {
			if m.GetState() == "alive" && m.GetAddr() != "" {
				alive++
			}
		}
		if err == nil && alive >= members {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s sees %d of %d sites alive: %v", cfg.Site, alive, members, err)
		}
	}
}

// savedOf reads the store in dir as site.Saved (savedFromStore).
func savedOf(t *testing.T, dir, self string) *site.Saved {
	t.Helper()
	st, err := store.OpenBolt(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s, err := savedFromStore(context.Background(), st, self)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSavedFromStoreRestoresAgreements: the agreements of two real nodes,
// an origin that delegated three jobs and the peer that runs them, read
// from their stores (savedFromStore) and restored, give two agents that
// carry on the federation where the nodes stopped: the report the peer
// owed for a job that ended while the origin was down is delivered and
// settles that job at the origin; the Terminate the origin owed for a job
// cancelled while the peer was down reaches the peer, which cancels and
// kills the job it runs; the job still running at the peer ends there
// and is reported to the origin. Nothing is left owed or awaited.
func TestSavedFromStoreRestoresAgreements(t *testing.T) {
	const factor = 1000
	clk := clock.Scaled(time.Now(), factor)
	cfgOf := func(name string, procs int) config.Config {
		c := config.Default()
		c.Site, c.DataDir, c.Procs, c.Executor, c.TimeScale = name, t.TempDir(), procs, "simulated", factor
		return c
	}
	origin := launchLive(t, cfgOf("s0", 2), clk, "", 1)
	peer := launchLive(t, cfgOf("s1", 16), clk, origin.gossip, 2)
	ctx := context.Background()
	submit := func(procs int32, est int64) site.JobKey {
		r, err := origin.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{Procs: procs, EstimateSeconds: est, User: "u", App: "t"}})
		if err != nil {
			t.Fatal(err)
		}
		if j := r.GetJob(); j.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED || j.GetSite() != "s1" {
			t.Fatalf("submit: %v", j)
		}
		k, err := keyOfID(r.GetJob().GetId())
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	long, short, cut := submit(5, 24*3600), submit(3, 3600), submit(5, 24*3600)

	// The origin stops; the short job ends at the peer, whose report is
	// owed.
	origin.stop()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		r, err := peer.client.ListJobs(ctx, &fedschedv1.ListJobsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		ended := false
		for _, j := range r.GetJobs() {
			ended = ended || j.GetSpec().GetProcs() == 3 && j.GetEndTime() != nil
		}
		if ended {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the short job never ended at the peer")
		}
	}
	peer.stop()
	// The origin comes back alone; the cut job is cancelled there, its
	// Terminate owed to the peer.
	origin = launchLive(t, origin.cfg, clk, "", 1)
	if _, err := origin.client.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: wireID(cut)}); err != nil {
		t.Fatal(err)
	}
	origin.stop()

	so, sp := savedOf(t, origin.cfg.DataDir, "s0"), savedOf(t, peer.cfg.DataDir, "s1")
	for _, k := range []site.JobKey{long, short, cut} {
		if j := so.Jobs[k]; j == nil || j.Phase != site.PhaseDelegated || j.Peer != "s1" || j.Terminate != (k == cut) {
			t.Fatalf("the origin's saved %v: %+v", k, j)
		}
	}
	for _, k := range []site.JobKey{long, cut} {
		if j := sp.Jobs[k]; j == nil || j.Phase != site.PhaseRunning || j.Peer != "s0" {
			t.Fatalf("the peer's saved %v: %+v (all: %v)", k, j, sp.Jobs)
		}
	}
	if r, ok := sp.Reports[short]; !ok || !r.Outcome.Completed || len(sp.Reports) != 1 {
		t.Fatalf("the peer's owed reports: %+v", sp.Reports)
	}

	now := clk.Now().Unix()
	f := emptyWireFed(t, "s0", "s1")
	for _, x := range []struct {
		cfg   config.Config
		saved *site.Saved
	}{{origin.cfg, so}, {peer.cfg, sp}} {
		c := site.Config{Name: x.cfg.Site, Procs: x.cfg.Procs, Policy: plan.Conservative, Peers: f.candidates(x.cfg.Site), Transfer: delegation.OnReject}
		a, err := site.Restore(c, now, x.saved)
		if err != nil {
			t.Fatal(err)
		}
		f.agents[c.Name], f.wires[c.Name] = a, agentWire{site: c.Name}
	}
	// The owed report and Terminate are resent within a reply period.
	for end := now + 61; now <= end; now++ {
		f.tick(now)
	}
	f.want(t, short, "[s0:outcome s1:acked]")
	f.want(t, cut, "[s1:cancel s1:kill s0:acked]")
	f.agents["s1"].End(now, cut, false)
	f.flush("s1", now)
	f.agents["s1"].End(now+1, long, true)
	f.flush("s1", now+1)
	f.want(t, cut, "[s1:cancel s1:kill s0:acked s1:end s1:report s0:outcome s1:acked]")
	f.want(t, long, "[s1:end s1:report s0:outcome s1:acked]")
	for _, d := range f.log {
		if d.Kind == site.DecideOutcome && (d.Job == cut) != d.Outcome.Cancelled {
			t.Errorf("outcome of %v: %+v", d.Job, d.Outcome)
		}
	}
	for name, a := range f.agents {
		if a.Busy() {
			t.Errorf("%s is still busy", name)
		}
	}
}

// TestNodeDrivesItsAgent: a node that does not federate decides through
// its site agent: its plan is the agent's, and a submitted job is the
// agent's job, under the node's id.
func TestNodeDrivesItsAgent(t *testing.T) {
	t0 := time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC)
	n := startManualNode(t, t0, 8)
	svc := &service{n: n}
	r, err := svc.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{Procs: 8, EstimateSeconds: 3600, User: "u", App: "t", Release: timestamppb.New(t0.Add(time.Hour))}})
	if err != nil {
		t.Fatal(err)
	}
	seq, _ := seqOf("t", r.GetJob().GetId())
	runInLoop(t, n, &inLoop{done: make(chan struct{}), f: func(n *Node) {
		if n.agent == nil || n.site != n.agent.Site() {
			t.Error("the node does not drive an agent")
			return
		}
		if pl, ok := n.agent.Site().Placement(int64(seq)); !ok || pl.Start != t0.Add(time.Hour).Unix() {
			t.Errorf("the agent's placement of job %d: %+v (%v)", seq, pl, ok)
		}
		if n.agent.NextID() != int64(seq)+1 {
			t.Errorf("the agent's next id %d after job %d", n.agent.NextID(), seq)
		}
	}})
}

// TestSavedFromStoreStartedLate: a running job whose record shows a start
// later than its reservation's (the node stores when the executor took
// it, after the turn's commit), even at the reservation's end, is
// restored into the slot it started in (a SIGKILL test found the agent's
// restore refusing the empty slot [start time, reservation end)).
func TestSavedFromStoreStartedLate(t *testing.T) {
	st := store.NewMemStore()
	const at = int64(1_800_000_000)
	job := &fedschedv1.Job{Id: jobID("k", 1), Spec: &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 1, User: "u", App: "t"}, Site: "k", OriginSite: "k",
		State: fedschedv1.JobState_JOB_STATE_RUNNING, SubmitTime: toTime(at - 1), StartTime: toTime(at + 1),
		Reservation: &fedschedv1.Reservation{Start: toTime(at), End: toTime(at + 1), Procs: 2, Site: "k"}}
	if err := st.Apply(context.Background(), store.Changes{PutJobs: []store.JobRecord{{Job: job}}}); err != nil {
		t.Fatal(err)
	}
	saved, err := savedFromStore(context.Background(), st, "k")
	if err != nil {
		t.Fatal(err)
	}
	a, err := site.Restore(site.Config{Name: "k", Procs: 8, Policy: plan.Conservative}, at+1, saved)
	if err != nil {
		t.Fatal(err)
	}
	if pl, ok := a.Site().Placement(1); !ok || pl.Start != at || pl.End != at+1 {
		t.Fatalf("the restored run: %+v (%v), want [%d, %d)", pl, ok, at, at+1)
	}
}
