package node

import (
	"context"
	"fmt"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/gantt"
	"github.com/fedsched/fedsched/node/auth"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// GetPlan answers the site's plan from one snapshot of the loop, as the
// caller may see it (SiteSnapshot.seenBy).
func (s *service) GetPlan(ctx context.Context, _ *fedschedv1.GetPlanRequest) (*fedschedv1.GetPlanResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	snap, err := s.n.Snapshot(ctx)
	if err != nil {
		return nil, ToStatus(err)
	}
	id, ok := auth.FromContext(ctx)
	if !ok {
		// Every call passes the interceptor, which sets the identity.
		return nil, ToStatus(fmt.Errorf("no caller identity: %w", ErrUnavailable))
	}
	return s.n.planResponse(snap.seenBy(id)), nil
}

func (n *Node) planResponse(snap *SiteSnapshot) *fedschedv1.GetPlanResponse {
	out := &fedschedv1.GetPlanResponse{Site: &fedschedv1.Site{Name: snap.Site, Procs: int32(snap.Procs), Policy: snap.Policy,
		FreeProcs: int32(snap.Free), RunningJobs: int32(snap.Running), PendingJobs: int32(snap.Pending), Version: n.deps.Version,
		Executor: n.cfg.Executor, TimeScale: n.cfg.TimeScale, Now: toTime(snap.Now), Overbooking: snap.Overbooking, PofMax: snap.PoFMax},
		Until: toTime(snap.Until)}
	for _, e := range snap.Entries {
		out.Entries = append(out.Entries, e.proto())
	}
	for _, e := range snap.Queued {
		out.Queued = append(out.Queued, e.proto())
	}
	return out
}

// PlanChart draws a site's plan (a GetPlan answer) from now to the end of
// its last reservation: the status page's chart and `fedsched plan`'s.
func PlanChart(p *fedschedv1.GetPlanResponse) gantt.Chart {
	now, until := p.GetSite().GetNow().GetSeconds(), p.GetUntil().GetSeconds()
	c := gantt.Chart{Title: "plan of site " + p.GetSite().GetName(), Procs: int(p.GetSite().GetProcs()), From: now, To: max(until, now+60), Now: now, Clock: true}
	// A little room on the right so that the last reservation's end shows.
	c.To += max(60, (c.To-c.From)/40)
	for _, e := range p.GetEntries() {
		start, end := e.GetStart().GetSeconds(), e.GetEnd().GetSeconds()
		b := gantt.Bar{ID: e.GetId(), Kind: e.GetKind(), Procs: int(e.GetProcs()), Start: max(start, now), End: end, PoF: e.GetPof(), Label: e.GetUser()}
		switch e.GetKind() {
		case EntryPending:
			if e.GetOverbooked() {
				b.Kind = gantt.Overbooked
			}
		case EntryHold:
			b.Label = "hold for " + e.GetName()
		case EntryFixed, EntryStanding:
			b.Label = e.GetName()
		}
		if e.GetId() == "" {
			b.Label = "another user" // SiteSnapshot.seenBy
		}
		if end <= now {
			// A running job late to end: show it at now.
			b.End = now + 1
		}
		b.Title = entryTitle(e)
		c.Bars = append(c.Bars, b)
	}
	return c
}

func entryTitle(e *fedschedv1.PlanEntry) string {
	var b strings.Builder
	if e.GetId() == "" {
		// An entry a user may not see the details of (SiteSnapshot.seenBy).
		fmt.Fprintf(&b, "another user's work (%s): %d processors, %s → %s", e.GetKind(), e.GetProcs(), humanTime(e.GetStart().GetSeconds()), humanTime(e.GetEnd().GetSeconds()))
		return b.String()
	}
	fmt.Fprintf(&b, "%s (%s", e.GetId(), e.GetKind())
	if e.GetUser() != "" {
		fmt.Fprintf(&b, ", user %s", e.GetUser())
	}
	if e.GetName() != "" {
		fmt.Fprintf(&b, ", %s", e.GetName())
	}
	start, end := e.GetStart().GetSeconds(), e.GetEnd().GetSeconds()
	fmt.Fprintf(&b, "): %d processors, %s → %s", e.GetProcs(), humanTime(start), humanTime(end))
	if e.GetOverbooked() {
		fmt.Fprintf(&b, ", overbooked: %d of %d estimated seconds, PoF %.3f", end-start, e.GetEstimateSeconds(), e.GetPof())
	}
	if w := e.GetWait(); w != nil {
		fmt.Fprintf(&b, "; waits: %s", w.GetMessage())
	}
	return b.String()
}

func (e PlanEntry) proto() *fedschedv1.PlanEntry {
	m := &fedschedv1.PlanEntry{Kind: e.Kind, Id: e.ID, Name: e.Name, User: e.User, Procs: int32(e.Procs), EstimateSeconds: e.Estimate,
		Overbooked: e.Overbooked, Pof: e.PoF, Wait: e.Wait.proto()}
	if e.End > 0 {
		m.Start, m.End = toTime(e.Start), toTime(e.End)
	}
	return m
}

func (w *WaitReason) proto() *fedschedv1.WaitReason {
	if w == nil {
		return nil
	}
	m := &fedschedv1.WaitReason{Kind: w.Kind, Message: w.Message, Blockers: w.Blockers}
	if w.Until > 0 {
		m.Until = timestamppb.New(time.Unix(w.Until, 0))
	}
	return m
}

// waitOp computes what some pending jobs wait for.
type waitOp struct {
	ids   []string
	reply chan map[string]*WaitReason
}

func (o *waitOp) run(n *Node, now int64) func(error) {
	out := n.waits(o.ids, now)
	return func(error) { o.reply <- out }
}

// waits says what each of the given pending jobs of this site waits for;
// jobs that are not pending here are left out. It indexes the plan once
// (and walks the queue once if some of the jobs have no reservation).
func (n *Node) waits(ids []string, now int64) map[string]*WaitReason {
	out := make(map[string]*WaitReason, len(ids))
	var pc *planCtx
	queued := map[string]bool{}
	for _, id := range ids {
		seq, ok := seqOf(n.cfg.Site, id)
		lj := n.live[int64(seq)]
		if !ok || lj == nil || lj.job().GetState() != fedschedv1.JobState_JOB_STATE_PENDING {
			continue
		}
		r, ok := n.site.Plan().Get(lj.seq)
		if !ok {
			queued[id] = true
			continue
		}
		if pc == nil {
			pc = n.planContext(now)
		}
		out[id] = n.waitFor(lj, r, pc)
	}
	if len(queued) > 0 {
		// What a queued job waits for depends on the jobs ahead of it.
		for _, e := range n.snapshot(now).Queued {
			if queued[e.ID] {
				out[e.ID] = e.Wait
			}
		}
	}
	return out
}

// planContext indexes the plan's reservations by end.
func (n *Node) planContext(now int64) *planCtx {
	holds := map[int64]*agreementRec{}
	for _, a := range n.agreements {
		if a.Role == rolePeer && a.State == delegation.Pending {
			holds[a.Seq] = a
		}
	}
	res := n.site.Plan().Reservations()
	pc := &planCtx{res: res, ends: make(map[int64][]int, len(res)), holds: holds, now: now}
	for i, r := range res {
		pc.ends[r.End] = append(pc.ends[r.End], i)
	}
	return pc
}

// withWaits sets Job.wait on the pending jobs of this site among jobs (which
// the caller owns), asking the loop once. A loop too busy to answer leaves
// them unset: the listing matters more than the detail.
func (s *service) withWaits(ctx context.Context, jobs []*fedschedv1.Job) []*fedschedv1.Job {
	var ids []string
	for _, j := range jobs {
		if j.GetState() == fedschedv1.JobState_JOB_STATE_PENDING && j.GetSite() == s.n.cfg.Site {
			ids = append(ids, j.GetId())
		}
	}
	if len(ids) == 0 {
		return jobs
	}
	o := &waitOp{ids: ids, reply: make(chan map[string]*WaitReason, 1)}
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if err := s.n.send(wctx, o); err != nil {
		return jobs
	}
	ws, err := await(wctx, s.n, o.reply)
	if err != nil {
		return jobs
	}
	for i, j := range jobs {
		if w := ws[j.GetId()]; w != nil {
			j = proto.Clone(j).(*fedschedv1.Job)
			j.Wait = w.proto()
			jobs[i] = j
		}
	}
	return jobs
}
