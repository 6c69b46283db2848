package e2e

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestCancelWhileDelegating: a job its user cancels while the origin asks
// peers for quotes, or while its agree is out, is CANCELLED at once, and
// runs nowhere: a quote that comes after the cancel is released, and a
// peer that agrees after it is told to terminate the job. The submission's
// reply, which waits for the offer's end, says CANCELLED too.
//
// A difference from the node's own core (before the switch to the site
// agent), which refused such a cancel with "being delegated to a peer;
// retry the cancel in a few seconds".
func TestCancelWhileDelegating(t *testing.T) {
	t.Parallel()
	for _, method := range []string{"Quote", "Agree"} {
		t.Run(method, func(t *testing.T) {
			t.Parallel()
			c := start(t, Options{TimeScale: 100, Federation: fed(), Sites: []SiteConfig{{Name: "a", Procs: 4}, {Name: "b", Procs: 8}}})
			a, b := c.Site("a"), c.Site("b")
			fill(t, a)
			held := make(chan struct{})
			entered, answered := make(chan struct{}), make(chan struct{})
			var once, onceAfter sync.Once
			c.SetHook(func(ctx context.Context, call Call) error {
				if call.From == "a" && call.Method == method && call.Phase == Before {
					once.Do(func() { close(entered) })
					select {
					case <-held:
					case <-ctx.Done():
					}
				}
				if call.From == "a" && call.Method == method && call.Phase == After && call.Err == nil {
					onceAfter.Do(func() { close(answered) })
				}
				return nil
			})
			type answer struct {
				job *fedschedv1.Job
				err error
			}
			first := make(chan answer, 1)
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				r, err := a.Client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: slaSpec(c, 2, 600, 300)})
				first <- answer{r.GetJob(), err}
			}()
			select {
			case <-entered:
			case <-time.After(20 * time.Second):
				t.Fatalf("a never called %s", method)
			}
			const id = "a.000000000002" // the filler is the first
			// While it is out of the plan, the job waits for the
			// delegation (the status page, jobs and explain say so).
			g, err := a.Client.GetJob(bg(t), &fedschedv1.GetJobRequest{JobId: id})
			if err != nil {
				t.Fatal(err)
			}
			if w := g.GetJob().GetWait(); w.GetKind() != "delegation" || method == "Agree" && !strings.HasPrefix(w.GetMessage(), "agreeing with b (hold a/2#") {
				t.Fatalf("job while its %s is out waits for %v, want the delegation", method, w)
			}
			r, err := a.Client.CancelJob(bg(t), &fedschedv1.CancelJobRequest{JobId: id, Message: "e2e: cancelled while delegating"})
			if err != nil {
				t.Fatalf("cancel while the %s is out: %v", method, err)
			}
			if r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_CANCELLED {
				t.Fatalf("cancel while the %s is out: %s, want CANCELLED", method, brief(r.GetJob()))
			}
			close(held)
			ans := <-first
			if ans.err != nil || ans.job.GetState() != fedschedv1.JobState_JOB_STATE_CANCELLED {
				t.Fatalf("the submission's reply: %v %s, want CANCELLED", ans.err, brief(ans.job))
			}
			select {
			case <-answered:
			case <-time.After(20 * time.Second):
				t.Fatalf("b never answered the %s", method)
			}
			// Nothing of a's job runs or waits at b: a quote that came
			// late is released; b took the agree (it came after the
			// cancel), and the job is terminated there.
			deadline := time.Now().Add(20 * time.Second)
			for {
				live, cancelled := 0, 0
				for _, j := range jobsOf(t, b) {
					switch {
					case j.GetOriginSite() != "a":
					case !terminal(j):
						live++
					case j.GetState() == fedschedv1.JobState_JOB_STATE_CANCELLED:
						cancelled++
					default:
						t.Fatalf("a's cancelled job ended at b as %s", brief(j))
					}
				}
				ag, err := b.Fed.GetAgreement(bg(t), &fedschedv1.GetAgreementRequest{OriginSite: "a", OriginJobId: id})
				held := err == nil && ag.GetAgreement().GetState() == fedschedv1.AgreementState_AGREEMENT_STATE_PENDING
				if live == 0 && !held && (method == "Quote" || cancelled == 1) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("a's cancelled job at b: %d live, %d cancelled, hold %v", live, cancelled, held)
				}
				time.Sleep(50 * time.Millisecond)
			}
			if j := waitJob(t, a, id, 5*time.Second, "cancelled", terminal); j.GetState() != fedschedv1.JobState_JOB_STATE_CANCELLED {
				t.Fatalf("at a: %s, want CANCELLED", brief(j))
			}
		})
	}
}

// TestAgreeGivenUpOnGonePeer: the peer the origin agreed with dies before
// the agree reaches it and never comes back. The origin resends the agree;
// once the peer has not been an alive member for outbox_give_up it gives
// up: the job is not placed at the origin (the peer may have taken it)
// but ends FAILED, reason PEER_UNREACHABLE, its outcome unknown, and the
// submission is answered so. (The node's own core asked it for ever.)
func TestAgreeGivenUpOnGonePeer(t *testing.T) {
	t.Parallel()
	f := fed()
	f.OutboxGiveUp = 600 * time.Second // site seconds: 6 s of wall time at 100x
	c := start(t, Options{TimeScale: 100, Federation: f, Sites: []SiteConfig{{Name: "a", Procs: 4}, {Name: "b", Procs: 8}}})
	a := c.Site("a")
	fill(t, a)
	var once sync.Once
	c.SetHook(func(ctx context.Context, call Call) error {
		if call.From == "a" && call.To == "b" && call.Method == "Agree" && call.Phase == Before {
			once.Do(func() {
				if err := c.Crash("b"); err != nil {
					t.Error(err)
				}
			})
			return status.Error(codes.Unavailable, "e2e: b is gone")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := a.Client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: slaSpec(c, 2, 600, 300)})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	j := r.GetJob()
	if j.GetState() != fedschedv1.JobState_JOB_STATE_FAILED || j.GetReason() != fedschedv1.Reason_REASON_PEER_UNREACHABLE || j.GetSite() != "a" {
		t.Fatalf("the submission's reply: %s, want FAILED for the unreachable peer", brief(j))
	}
	if !strings.Contains(j.GetMessage(), "gave up agreeing with b") {
		t.Errorf("message %q does not say what was given up", j.GetMessage())
	}
}
