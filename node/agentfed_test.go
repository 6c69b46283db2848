package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// failingStore refuses every change while fail is set.
type failingStore struct {
	store.Store
	fail bool
}

func (s *failingStore) Apply(ctx context.Context, ch store.Changes) error {
	if s.fail {
		return errors.New("test: the disk is gone")
	}
	return s.Store.Apply(ctx, ch)
}

// fedTestNode is a federating node "o" (4 processors, simulated, no
// peers, no dialing) on store st, with a manual clock, not running: the
// tests call its loop's functions themselves.
func fedTestNode(t *testing.T, st store.Store, giveUp time.Duration) (*Node, *clock.Manual) {
	t.Helper()
	cfg := config.Default()
	cfg.Site, cfg.DataDir, cfg.Procs, cfg.Executor = "o", t.TempDir(), 4, "simulated"
	clk := clock.NewManual(time.Date(2030, 1, 7, 0, 0, 0, 0, time.UTC))
	n, err := New(cfg, Deps{Store: st, Executor: executor.NewSimulated(executor.SimulatedConfig{Clock: clk}), Clock: clk,
		Federation: FederationConfig{Peers: noPeers{}, OutboxGiveUp: giveUp, Dial: func(context.Context, string, string) (*grpc.ClientConn, error) {
			return nil, errors.New("test: no dialing")
		}}})
	if err != nil {
		t.Fatal(err)
	}
	return n, clk
}

// TestAgentMessagesWaitForTheCommit: the durability rule of the federation
// through the agent. The messages a batch of the agent's decisions sends
// (an agree, a report, a Terminate: each promises what its decision
// recorded) are handed to the sending goroutines only by the commit that
// made that batch durable: none while the commit fails, all once one
// succeeds.
func TestAgentMessagesWaitForTheCommit(t *testing.T) {
	st := &failingStore{Store: store.NewMemStore(), fail: true}
	n, clk := fedTestNode(t, st, 0)
	// A batch: the intent of an agree (a job record) and the agree it
	// sends.
	job := &fedschedv1.Job{Id: jobID("o", 1), Site: "o", OriginSite: "o"}
	n.pending.putJob(store.JobRecord{Job: job})
	n.queueOut(clk.Now().Unix(), []site.Message{{Kind: site.KindAgree, From: "o", To: "p", Job: site.JobKey{Site: "o", ID: 1}, HoldID: "o/1#3"}})
	if err := n.commit(context.Background()); err == nil {
		t.Fatal("the commit succeeded on a failing store")
	}
	if len(n.sendq) != 0 {
		t.Fatalf("%d messages handed to the senders although their commit failed", len(n.sendq))
	}
	st.fail = false
	n.pending.putJob(store.JobRecord{Job: job})
	if err := n.commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(n.sendq) != 1 {
		t.Fatalf("%d messages handed to the senders after the commit, want the agree", len(n.sendq))
	}
	c := <-n.sendq
	r, ok := c.req.(*fedschedv1.AgreeRequest)
	if !ok || c.m.To != "p" || r.GetHoldId() != "o/1#3" || r.GetOriginJobId() != job.GetId() {
		t.Fatalf("sent %T %v to %s, want the agree to p's hold o/1#3", c.req, c.req, c.m.To)
	}
}

// TestSavedFromStoreRestoresTheAgreesHold: the records the node writes for
// the agent's agrees and accepts (applyFed, peerAccepted) give back, after
// a restart (savedFromStore), the hold each agree confirms and whether it
// hands a job over (RQF), and the hold a peer's job was accepted under, so
// that the restored agent asks its agree again of the same hold (a peer
// that still holds it accepts it) and knows which repeated agree is the
// peer's.
func TestSavedFromStoreRestoresTheAgreesHold(t *testing.T) {
	st := store.NewMemStore()
	n, clk := fedTestNode(t, st, 0)
	now := clk.Now().Unix()
	agrees := []site.Decision{
		{Kind: site.DecideAgree, Job: site.JobKey{Site: "o", ID: 1}, Peer: "p", HoldID: "o/1#3",
			Placement: plan.Placement{Start: now, End: now + 600, Reason: plan.ReasonPlacedInFull}},
		{Kind: site.DecideAgree, Job: site.JobKey{Site: "o", ID: 2}, Peer: "q", HoldID: "o/2#9", HandOver: true},
	}
	for _, d := range agrees {
		spec := &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 600, User: "u"}
		job := &fedschedv1.Job{Id: jobID("o", uint64(d.Job.ID)), Spec: spec, Site: "o", OriginSite: "o", SubmitTime: toTime(now)}
		lj := &liveJob{seq: d.Job.ID, j: job, pj: planJob(spec, d.Job.ID, now)}
		lj.rec = n.setState(job, store.JobRecord{Job: job}, fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.Reason_REASON_DELEGATED, acfOffering, now)
		n.live[lj.seq] = lj
		if _, err := n.applyFed(d, lj, now); err != nil {
			t.Fatal(err)
		}
	}
	peers := site.JobKey{Site: "p", ID: 5}
	if err := n.peerAccepted(site.Decision{Kind: site.DecideAccept, Job: peers, Peer: "p", HoldID: "p/5#4",
		Spec:      plan.Job{ID: 4, Procs: 1, Estimate: 60, Release: now, Deadline: plan.Forever, User: "u"},
		Placement: plan.Placement{Start: now + 600, End: now + 660, Reason: plan.ReasonPlacedInFull}}, now); err != nil {
		t.Fatal(err)
	}
	if err := n.commit(context.Background()); err != nil {
		t.Fatal(err)
	}
	saved, err := savedFromStore(context.Background(), st, "o")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range agrees {
		sj := saved.Jobs[d.Job]
		if sj == nil || sj.Phase != site.PhaseAgreeing || sj.Peer != d.Peer || sj.HoldID != d.HoldID || sj.HandOver != d.HandOver {
			t.Fatalf("job %v restored as %+v, want agreeing with %s's hold %s (hand-over %v)", d.Job, sj, d.Peer, d.HoldID, d.HandOver)
		}
	}
	if sj := saved.Jobs[peers]; sj == nil || sj.Peer != "p" || sj.HoldID != "p/5#4" {
		t.Fatalf("p's job restored as %+v, want accepted under p's hold p/5#4", sj)
	}
	// The restored agent asks each agree again, of the same hold.
	a, err := site.Restore(site.Config{Name: "o", Procs: 4, Policy: plan.Conservative, ReplySeconds: 2}, now+1, saved)
	if err != nil {
		t.Fatal(err)
	}
	asked := map[site.JobKey]string{}
	for _, m := range a.Ready().Messages {
		if m.Kind == site.KindAgree {
			asked[m.Job] = m.To + " " + m.HoldID
		}
	}
	for _, d := range agrees {
		if asked[d.Job] != d.Peer+" "+d.HoldID {
			t.Fatalf("the restored agent asks %v's agree as %q, want %q (all: %v)", d.Job, asked[d.Job], d.Peer+" "+d.HoldID, asked)
		}
	}
}

// TestSavedFromStoreRestoresAnAgreeInFlight: a job whose agree was written
// ahead is restored agreeing with the peer its intent hop names, under the
// hold that hop names (RouteHop.hold_id), so that the restarted origin
// agrees to that very hold again; an RQF hand-over's hop (taken) is
// restored as one.
func TestSavedFromStoreRestoresAnAgreeInFlight(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemStore()
	for i, taken := range []bool{false, true} {
		id := jobID("o", uint64(i+1))
		job := &fedschedv1.Job{Id: id, Site: "o", OriginSite: "o", State: fedschedv1.JobState_JOB_STATE_PENDING, Reason: fedschedv1.Reason_REASON_DELEGATED,
			Spec: &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 600}, SubmitTime: toTime(1000),
			Route: []*fedschedv1.RouteHop{{Site: "o", Message: "submitted", Time: toTime(1000)},
				{Site: "o", PeerSite: "p", Reason: fedschedv1.Reason_REASON_DELEGATED, Time: toTime(1001), Taken: taken, HoldId: fmt.Sprintf("o/%d#4", i+1)}}}
		if err := st.PutJob(ctx, store.JobRecord{Job: job}); err != nil {
			t.Fatal(err)
		}
	}
	saved, err := savedFromStore(ctx, st, "o")
	if err != nil {
		t.Fatal(err)
	}
	for i, taken := range []bool{false, true} {
		sj := saved.Jobs[site.JobKey{Site: "o", ID: int64(i + 1)}]
		if sj == nil || sj.Phase != site.PhaseAgreeing || sj.Peer != "p" || sj.HoldID != fmt.Sprintf("o/%d#4", i+1) || sj.HandOver != taken {
			t.Fatalf("job %d restored as %+v, want agreeing with p under hold o/%d#4, hand-over %v", i+1, sj, i+1, taken)
		}
	}
}

// TestGiveUpKeepsWhy: an owed report to a peer that has not been an alive
// member for outbox_give_up is given up (givenUp, Agent.GiveUp), and the
// agreement keeps what was not delivered and why (docs/protocol.md,
// "Crashes and retries"), also once the agent's gave-up decision, which
// comes in a later batch, has been written.
func TestGiveUpKeepsWhy(t *testing.T) {
	n, clk := fedTestNode(t, store.NewMemStore(), time.Hour)
	now := clk.Now().Unix()
	k := site.JobKey{Site: "p", ID: 5}
	saved := &site.Saved{Reports: map[site.JobKey]site.OwedReport{k: {Outcome: site.Outcome{Start: now - 60, End: now - 1, Completed: true}, Since: now - 1}}}
	var err error
	if n.agent, err = site.Restore(site.Config{Name: "o", Procs: 4, Policy: plan.Conservative, ReplySeconds: 2}, now, saved); err != nil {
		t.Fatal(err)
	}
	a := &agreementRec{Role: rolePeer, Seq: 3, Pending: "outcome", Agreement: delegation.Agreement{ID: jobID("o", 3), JobID: wireID(k), PeerJobID: jobID("o", 3),
		Origin: "p", Peer: "o", State: delegation.Complete}}
	n.putAgreement(a, now)
	n.byOrigin[originKey(a.Origin, a.JobID)] = a.ID
	n.agent.Tick(now + 2) // its resend is due
	report := n.agent.Ready().Messages
	if len(report) != 1 || report[0].Kind != site.KindReport {
		t.Fatalf("the restored agent sends %v, want the owed report", report)
	}
	n.queueOut(now, report) // p is no member: absent from now
	later := now + int64(time.Hour/time.Second)
	n.queueOut(later, report)
	if len(n.outq) != 1 {
		t.Fatalf("%d messages queued, want the first report only", len(n.outq))
	}
	const why = "it has not been an alive member since"
	if !strings.Contains(a.Undelivered, why) || a.Pending != "" {
		t.Fatalf("given up: pending %q, undelivered %q", a.Pending, a.Undelivered)
	}
	if err := n.applyReady(context.Background(), later, n.agent.Ready()); err != nil {
		t.Fatal(err)
	}
	if got := n.agreements[a.ID]; !strings.Contains(got.Undelivered, why) {
		t.Fatalf("after the agent's gave-up decision: undelivered %q, want why (%q)", got.Undelivered, why)
	}
}

// TestAgreeGivenUpAfterCancel: a job cancelled while its agree was out
// (its record CANCELLED at once) to a peer that then stays away for
// outbox_give_up is given up too: the agree is no longer resent, and the
// agent forgets the job.
func TestAgreeGivenUpAfterCancel(t *testing.T) {
	n, clk := fedTestNode(t, store.NewMemStore(), time.Hour)
	now := clk.Now().Unix()
	restoreAgreeing(t, n, now, "p", "o/1#3", true)
	agree := n.agent.Ready().Messages
	if len(agree) != 1 || agree[0].Kind != site.KindAgree {
		t.Fatalf("the restored agent sends %v, want the agree", agree)
	}
	n.queueOut(now, agree) // p is no member: absent from now
	later := now + int64(time.Hour/time.Second)
	n.queueOut(later, agree)
	if len(n.outq) != 1 {
		t.Fatalf("%d agrees queued, want the first only: the second is given up", len(n.outq))
	}
	if n.agent.Busy() {
		t.Fatal("the agent still awaits the agree's answer after the give-up")
	}
}

// TestAgreeGiveUpCountsPerPeer: outbox_give_up counts how long the peer an
// agree is for has been away: a job that agreed with p, away for long,
// and then with q (p refused), is not given up on q's first absence.
func TestAgreeGiveUpCountsPerPeer(t *testing.T) {
	n, clk := fedTestNode(t, store.NewMemStore(), time.Hour)
	now := clk.Now().Unix()
	restoreAgreeing(t, n, now, "q", "o/1#7", false)
	toQ := n.agent.Ready().Messages
	if len(toQ) != 1 || toQ[0].Kind != site.KindAgree || toQ[0].To != "q" {
		t.Fatalf("the restored agent sends %v, want the agree to q", toQ)
	}
	toP := slices.Clone(toQ)
	toP[0].To, toP[0].HoldID = "p", "o/1#3"
	n.queueOut(now, toP) // the earlier agree, to p: away from now
	later := now + int64(time.Hour/time.Second)
	n.queueOut(later, toQ) // q is away from later only
	if len(n.outq) != 2 || !n.agent.Busy() {
		t.Fatalf("%d agrees queued (busy %v): the agree to q was given up on p's absence", len(n.outq), n.agent.Busy())
	}
	n.queueOut(later+int64(time.Hour/time.Second), toQ)
	if len(n.outq) != 2 || n.agent.Busy() {
		t.Fatalf("%d agrees queued (busy %v): the agree to q away for outbox_give_up is not given up", len(n.outq), n.agent.Busy())
	}
}

// TestAgreeAnsweredForgetsAbsence: an agree resent to a peer that is not
// an alive member starts counting its absence (agreeGivenUp); once the
// peer answers it (here: it no longer holds the slot), the job leaves
// agreeing and the node keeps no absence for it.
func TestAgreeAnsweredForgetsAbsence(t *testing.T) {
	n, clk := fedTestNode(t, store.NewMemStore(), time.Hour)
	now := clk.Now().Unix()
	k := restoreAgreeing(t, n, now, "p", "o/1#3", true)
	agree := n.agent.Ready().Messages
	if len(agree) != 1 || agree[0].Kind != site.KindAgree {
		t.Fatalf("the restored agent sends %v, want the agree", agree)
	}
	n.queueOut(now, agree) // p is no member: absent from now
	if _, ok := n.absent[k]; !ok {
		t.Fatal("no absence counted for the agree to a peer that is no member")
	}
	(&answerOp{m: agree[0], err: ErrJobFinished}).run(n, now+1)
	if n.agent.Busy() {
		t.Fatal("the agent still awaits the agree's answer after it came")
	}
	if ab, ok := n.absent[k]; ok {
		t.Fatalf("the node still counts %v's absence (%+v) after its agree was answered", k, ab)
	}
}

// TestReportGivenUpOnGonePeer: a delegated job whose peer has not been an
// alive member for outbox_give_up is given up as an agree is
// (reportsGivenUp, Agent.GiveUp): its report is no longer awaited, the
// job ends FAILED, reason PEER_UNREACHABLE, and the agreement says why;
// a restart does not await it again.
func TestReportGivenUpOnGonePeer(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemStore()
	n, clk := fedTestNode(t, st, time.Hour)
	now := clk.Now().Unix()
	k := site.JobKey{Site: "o", ID: 1}
	spec := &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 600, User: "u"}
	job := &fedschedv1.Job{Id: wireID(k), Spec: spec, Site: "p", OriginSite: "o", SubmitTime: toTime(now - 10),
		Reservation: &fedschedv1.Reservation{Start: toTime(now), End: toTime(now + 600), Procs: 2, Site: "p"}}
	n.setState(job, store.JobRecord{Job: job}, fedschedv1.JobState_JOB_STATE_DELEGATED, fedschedv1.Reason_REASON_DELEGATED, "delegated to p", now)
	a := &agreementRec{Role: roleOrigin, Seq: 1, Agreement: delegation.Agreement{ID: "o/1#3", JobID: wireID(k), PeerJobID: "p-000000000007",
		Origin: "o", Peer: "p", State: delegation.Observed, Quote: delegation.Quote{Site: "p", HoldID: "o/1#3", Start: now, End: now + 600}}}
	n.putAgreement(a, now)
	n.byOrigin[originKey("o", a.JobID)] = a.ID
	if err := n.commit(ctx); err != nil {
		t.Fatal(err)
	}
	// A restart awaits the report too (recovery keeps n.awaited).
	r, _ := fedTestNode(t, st, time.Hour)
	if err := r.recoverAgreements(ctx, now); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.awaited[a.ID]; !ok || r.reportWake() == plan.Forever {
		t.Fatalf("a recovered node does not await %s's report (awaited %v, wake %d)", a.ID, r.awaited, r.reportWake())
	}
	saved, err := savedFromStore(ctx, st, "o")
	if err != nil {
		t.Fatal(err)
	}
	if sj := saved.Jobs[k]; sj == nil || sj.Phase != site.PhaseDelegated {
		t.Fatalf("job restored as %+v, want delegated to p", sj)
	}
	if n.agent, err = site.Restore(site.Config{Name: "o", Procs: 4, Policy: plan.Conservative, ReplySeconds: 2}, now, saved); err != nil {
		t.Fatal(err)
	}
	n.reportsGivenUp(now) // p is no member: absent from now
	if a.AbsentSince != now || !n.agent.Busy() || n.reportWake() != now+reportSweep {
		t.Fatalf("absent since %d (want %d), busy %v, wake %d: p's absence not counted", a.AbsentSince, now, n.agent.Busy(), n.reportWake())
	}
	n.reportsGivenUp(now + reportSweep) // away, not for outbox_give_up yet
	if !n.agent.Busy() {
		t.Fatal("the report given up before outbox_give_up")
	}
	later := now + int64(time.Hour/time.Second)
	n.reportsGivenUp(later)
	if n.agent.Busy() {
		t.Fatal("the agent still awaits the report of a peer away for outbox_give_up")
	}
	const why = "it has not been an alive member since"
	if !strings.Contains(a.Undelivered, why) {
		t.Fatalf("agreement undelivered %q, want why (%q)", a.Undelivered, why)
	}
	if err := n.applyReady(ctx, later, n.agent.Ready()); err != nil {
		t.Fatal(err)
	}
	if err := n.commit(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetJob(ctx, wireID(k))
	if err != nil {
		t.Fatal(err)
	}
	if j := rec.Job; j.GetState() != fedschedv1.JobState_JOB_STATE_FAILED || j.GetReason() != fedschedv1.Reason_REASON_PEER_UNREACHABLE || !strings.Contains(j.GetMessage(), why) {
		t.Fatalf("job %s %s %q, want FAILED, PEER_UNREACHABLE, why", j.GetState(), j.GetReason(), j.GetMessage())
	}
	if saved, err = savedFromStore(ctx, st, "o"); err != nil {
		t.Fatal(err)
	}
	if sj := saved.Jobs[k]; sj != nil {
		t.Fatalf("a restart awaits the given-up job again: %+v", sj)
	}
	n.reportsGivenUp(later + reportSweep)
	if n.reportWake() != plan.Forever {
		t.Fatalf("the loop still wakes at %d to look for reports, none awaited", n.reportWake())
	}
}

// TestRestoredAgreeKeepsPriceAndSlot: a job restored agreeing (its intent
// hop written ahead) agrees again at the price its peer quoted (the
// record's quote answers keep it); when the peer's report comes before
// the answer to the repeated agree, the delegation writes no slot dated
// 1970: the job and its agreement take the peer's from the report.
func TestRestoredAgreeKeepsPriceAndSlot(t *testing.T) {
	for _, slot := range []bool{true, false} {
		t.Run(fmt.Sprintf("report with slot %v", slot), func(t *testing.T) { restoredAgreeReported(t, slot) })
	}
}

// restoredAgreeReported: TestRestoredAgreeKeepsPriceAndSlot, the peer's
// report carrying its record's slot (slot) or only the outcome, as a
// report the origin rebuilds from the agent's message carries.
func restoredAgreeReported(t *testing.T, slot bool) {
	ctx := context.Background()
	st := store.NewMemStore()
	n, clk := fedTestNode(t, st, 0)
	now := clk.Now().Unix()
	k := site.JobKey{Site: "o", ID: 1}
	spec := &fedschedv1.JobSpec{Procs: 2, EstimateSeconds: 600, User: "u"}
	job := &fedschedv1.Job{Id: wireID(k), Spec: spec, Site: "o", OriginSite: "o", State: fedschedv1.JobState_JOB_STATE_PENDING,
		Reason: fedschedv1.Reason_REASON_DELEGATED, SubmitTime: toTime(now - 10),
		QuoteAnswers: []*fedschedv1.QuoteAnswer{{PeerSite: "p", Offered: true, Price: 2.5}, {PeerSite: "q", Offered: true, Price: 1}, {PeerSite: "r"}},
		Route: []*fedschedv1.RouteHop{{Site: "o", Message: "submitted", Time: toTime(now - 10)},
			{Site: "o", PeerSite: "p", Reason: fedschedv1.Reason_REASON_DELEGATED, Time: toTime(now - 5), HoldId: "o/1#3"}}}
	if err := st.PutJob(ctx, store.JobRecord{Job: job}); err != nil {
		t.Fatal(err)
	}
	saved, err := savedFromStore(ctx, st, "o")
	if err != nil {
		t.Fatal(err)
	}
	if sj := saved.Jobs[k]; sj == nil || sj.Phase != site.PhaseAgreeing || sj.Price != 2.5 {
		t.Fatalf("job restored as %+v, want agreeing with p at its price 2.5", sj)
	}
	lj := &liveJob{seq: 1, j: job, rec: store.JobRecord{Job: job}, pj: planJob(spec, 1, now-10)}
	n.live[1] = lj
	if n.agent, err = site.Restore(site.Config{Name: "o", Procs: 4, Policy: plan.Conservative, ReplySeconds: 2}, now, saved); err != nil {
		t.Fatal(err)
	}
	n.agent.Ready() // the repeated agree, whose answer does not come
	start, end := now-3, now+597
	ran := &fedschedv1.Job{Id: "p-000000000007", Site: "p", OriginSite: "o", State: fedschedv1.JobState_JOB_STATE_COMPLETED,
		StartTime: toTime(start), EndTime: toTime(start + 60), Reservation: &fedschedv1.Reservation{Start: toTime(start), End: toTime(end), Procs: 2, Site: "p"}}
	if !slot {
		ran.Reservation = nil
	}
	if _, err := n.stepPeer(&fedschedv1.ReportOutcomeRequest{AgreementId: "o/1#3", OriginJobId: wireID(k), Job: ran}, now+60); err != nil {
		t.Fatal(err)
	}
	a := n.agreementOfKey(k)
	if a == nil || a.State != delegation.Complete {
		t.Fatalf("agreement %+v, want complete", a)
	}
	if a.Quote.Price != 2.5 || slot && (a.Quote.Start != start || a.Quote.End != end) {
		t.Fatalf("agreement quote %+v, want p's slot %d..%d (%v) at price 2.5", a.Quote, start, end, slot)
	}
	if err := n.commit(ctx); err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetJob(ctx, wireID(k))
	if err != nil {
		t.Fatal(err)
	}
	r := rec.Job.GetReservation()
	if rec.Job.GetState() != fedschedv1.JobState_JOB_STATE_COMPLETED || slot && r.GetStart().AsTime().Unix() != start || !slot && r != nil {
		t.Fatalf("job %s, reservation %v: want COMPLETED in p's slot from %d, none when the report has none (%v)", rec.Job.GetState(), r, start, slot)
	}
}

// restoreAgreeing gives n an agent restored with one job, o/1, agreeing
// with peer under hold (cancelled while its agree was out, if cancelled),
// and returns the job's key.
func restoreAgreeing(t *testing.T, n *Node, now int64, peer, hold string, cancelled bool) site.JobKey {
	t.Helper()
	k := site.JobKey{Site: "o", ID: 1}
	saved := &site.Saved{Seq: 1, Jobs: map[site.JobKey]*site.SavedJob{k: {Key: k, Phase: site.PhaseAgreeing, Peer: peer, HoldID: hold, Cancelled: cancelled,
		Spec: plan.Job{ID: 1, Procs: 2, Estimate: 600, Release: now, Deadline: plan.Forever}, Placement: plan.Placement{Reason: plan.ReasonQueued}}}}
	var err error
	if n.agent, err = site.Restore(site.Config{Name: "o", Procs: 4, Policy: plan.Conservative, ReplySeconds: 2}, now, saved); err != nil {
		t.Fatal(err)
	}
	return k
}
