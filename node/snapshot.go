package node

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fedsched/fedsched/discovery"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// SiteSnapshot is a consistent picture of a site's plan, taken by its event
// loop in one turn: what the status page draws, what `fedsched plan` prints,
// what explain says a pending job waits for, and what the metrics count.
// Times are Unix seconds of the site's clock.
type SiteSnapshot struct {
	Site        string
	Procs, Free int
	Policy      string
	Overbooking bool
	PoFMax      float64
	Federated   bool
	// Now is the site's time; Until the end of the last reservation in the
	// plan (Now if the plan is empty).
	Now, Until       int64
	Running, Pending int
	// Entries are the reservations of the plan, by start then id: running
	// and pending jobs, holds backing quotes, fixed reservations and
	// instances of standing ones, processors down.
	Entries []PlanEntry
	// Queued are the pending jobs without a reservation (queue policies,
	// delegations in flight), in submission order.
	Queued []PlanEntry
	// Jobs are the live jobs (running first, then pending by planned
	// start), then the most recently ended ones, newest first.
	Jobs       []JobView
	Agreements []AgreementView
	Peers      []PeerView
	// Samples and Classes describe the overbooking statistics.
	Samples int64
	Classes int
}

// Kinds of PlanEntry.
const (
	EntryRunning  = "running"
	EntryPending  = "pending"
	EntryHold     = "hold"
	EntryFixed    = "fixed"
	EntryStanding = "standing"
	EntryDown     = "down"
)

var allEntryKinds = []string{EntryRunning, EntryPending, EntryHold, EntryFixed, EntryStanding, EntryDown}

// PlanEntry is one reservation (or one queued job) of a plan.
type PlanEntry struct {
	Kind string
	// ID is the job id (running, pending), the id of the hold, of the
	// fixed reservation or of the standing rule.
	ID string
	// Name is an operator's name of a fixed or standing reservation; the
	// origin site of a hold or of a job received from a peer.
	Name       string
	User       string
	Procs      int
	Start, End int64
	// Estimate is the job's runtime estimate (jobs and holds), seconds.
	Estimate   int64
	Overbooked bool
	PoF        float64
	// Wait says what a pending job waits for; nil otherwise.
	Wait *WaitReason
}

// Kinds of WaitReason (the label values of fedsched_pending_jobs).
const (
	WaitResources   = "resources"
	WaitPolicyOrder = "policy_order"
	WaitFixed       = "fixed_reservation"
	WaitRelease     = "release"
	WaitHold        = "hold"
	WaitDelegation  = "delegation"
	WaitStarting    = "starting"
)

var allWaitKinds = []string{WaitResources, WaitPolicyOrder, WaitFixed, WaitRelease, WaitHold, WaitDelegation, WaitStarting}

// WaitReason is what a pending job waits for, concretely.
type WaitReason struct {
	Kind string
	// Message says it for people: "processors held by a.3, a.5 until ...".
	Message string
	// Until is when the obstacle goes (the job's planned start), 0 if
	// unknown.
	Until int64
	// Blockers are the ids of the jobs or reservations in the way.
	Blockers []string
}

// JobView is a job as the status page lists it.
type JobView struct {
	ID, State, User string
	Procs           int
	// Submit, Start (actual or planned), End (actual or planned) in Unix
	// seconds; 0 when unknown. Planned is true when Start is the plan's.
	Submit, Start, End int64
	Planned            bool
	// Reason is what a pending job waits for, or why the job is in its
	// state.
	Reason string
	// Route is where the job went: "a → b".
	Route string
	// Now is the snapshot's time (for relative display).
	Now int64
}

// AgreementView is an agreement as the status page shows it.
type AgreementView struct {
	ID, Role, State string
	// Other is the site on the other side: the peer of an origin's
	// agreement, the origin of a peer's.
	Other, JobID, PeerJobID string
	Start, End              int64
	PoF                     float64
	// Pending is a message still owed to the other side ("outcome",
	// "terminate"), "" for none.
	Pending string
}

// PeerView is a member of the federation with its outlook.
type PeerView struct {
	Site, Addr, State, Policy         string
	Procs                             int
	FreeNow, Free1h, Free4h, Free24h  int
	Overbooking, Local, DigestUnknown bool
}

// snapshotOp takes a SiteSnapshot on the loop.
type snapshotOp struct{ reply chan *SiteSnapshot }

func (o *snapshotOp) run(n *Node, now int64) func(error) {
	s := n.snapshot(now)
	return func(error) { o.reply <- s }
}

// Snapshot asks the loop for a SiteSnapshot. Safe for use by any goroutine.
func (n *Node) Snapshot(ctx context.Context) (*SiteSnapshot, error) {
	o := &snapshotOp{reply: make(chan *SiteSnapshot, 1)}
	if err := n.send(ctx, o); err != nil {
		return nil, err
	}
	s, err := await(ctx, n, o.reply)
	if err != nil {
		return nil, err
	}
	if n.federating() {
		s.Peers = peerViews(n.fed.Peers.Members())
	}
	return s, nil
}

func peerViews(ms []discovery.Member) []PeerView {
	out := make([]PeerView, 0, len(ms))
	for _, m := range ms {
		d := m.Digest
		out = append(out, PeerView{Site: m.Name, Addr: d.Addr, State: m.State.String(), Policy: d.Policy, Procs: int(d.Procs),
			FreeNow: int(d.FreeNow), Free1h: int(d.Free1h), Free4h: int(d.Free4h), Free24h: int(d.Free24h),
			Overbooking: d.Overbooking, Local: m.Local, DigestUnknown: m.DigestErr != nil})
	}
	slices.SortFunc(out, func(a, b PeerView) int { return strings.Compare(a.Site, b.Site) })
	return out
}

// snapshot builds the picture; it walks the plan and the live jobs once.
func (n *Node) snapshot(now int64) *SiteSnapshot {
	s := &SiteSnapshot{Site: n.cfg.Site, Procs: n.procs, Free: n.site.Plan().Free(now), Policy: n.pol.String(), Overbooking: n.adm != nil,
		PoFMax: n.pofMax(), Federated: n.federating(), Now: now, Until: now, Running: n.site.Running(), Pending: n.site.Waiting()}
	if n.adm != nil {
		s.Samples = n.stats.Updates()
		s.Classes = len(n.stats.Classes(overbook.ByRuntime))
	}
	for _, a := range n.agreements {
		s.Agreements = append(s.Agreements, n.agreementView(a))
	}
	slices.SortFunc(s.Agreements, func(a, b AgreementView) int { return compareIDs(a.ID, b.ID) })
	pc := n.planContext(now)
	res := pc.res
	for _, r := range res {
		s.Entries = append(s.Entries, n.entryOf(r, pc.holds))
		s.Until = max(s.Until, r.End)
	}
	byCore := make(map[int64]int, len(res))
	for i, r := range res {
		byCore[r.ID] = i
	}
	// Queued jobs in submission order: the queue order of FCFS and EASY.
	var queued []*liveJob
	for _, lj := range n.live {
		if lj.state() != fedschedv1.JobState_JOB_STATE_PENDING {
			continue
		}
		if i, ok := byCore[lj.seq]; ok {
			s.Entries[i].Wait = n.waitFor(lj, res[i], pc)
			continue
		}
		queued = append(queued, lj)
	}
	slices.SortFunc(queued, func(a, b *liveJob) int { return cmp.Compare(a.seq, b.seq) })
	defer func() { s.Jobs = n.jobViews(s) }()
	var ahead *liveJob
	for _, lj := range queued {
		j := lj.peek()
		e := PlanEntry{Kind: EntryPending, ID: j.GetId(), User: lj.pj.User, Procs: lj.pj.Procs, Estimate: lj.pj.Estimate}
		if o := j.GetOriginSite(); o != n.cfg.Site {
			e.Name = o
		}
		e.Wait = n.queuedWait(lj, ahead, pc)
		if e.Wait.Kind != WaitDelegation {
			ahead = lj
		}
		s.Queued = append(s.Queued, e)
	}
	return s
}

func (n *Node) agreementView(a *agreementRec) AgreementView {
	v := AgreementView{ID: a.ID, Role: a.Role, State: strings.ToLower(fedschedv1.AgreementState(a.State).String()), JobID: a.JobID, PeerJobID: a.PeerJobID,
		Start: a.Quote.Start, End: a.Quote.End, PoF: a.Quote.PoF, Pending: a.Pending, Other: a.Peer}
	v.State = strings.TrimPrefix(v.State, "agreement_state_")
	if a.Role == rolePeer {
		v.Other = a.Origin
	}
	return v
}

// entryOf describes one reservation of the plan.
func (n *Node) entryOf(r plan.Reservation, holds map[int64]*agreementRec) PlanEntry {
	e := PlanEntry{Procs: r.Procs, Start: r.Start, End: r.End}
	if lj := n.live[r.ID]; lj != nil {
		j := lj.peek()
		e.ID, e.User, e.Estimate, e.PoF = j.GetId(), lj.pj.User, lj.pj.Estimate, j.GetPof()
		e.Overbooked = r.End-r.Start < lj.pj.Estimate
		e.Kind = EntryPending
		if st := j.GetState(); st == fedschedv1.JobState_JOB_STATE_RUNNING || st == fedschedv1.JobState_JOB_STATE_CANCELLED {
			e.Kind = EntryRunning
		}
		if o := j.GetOriginSite(); o != n.cfg.Site {
			e.Name = o
		}
		return e
	}
	if a := holds[r.ID]; a != nil {
		e.Kind, e.ID, e.Name, e.PoF = EntryHold, a.ID, a.Origin, a.Quote.PoF
		return e
	}
	if id, ok := n.resv.byCore[r.ID]; ok {
		e.ID = id
		if f := n.resv.fixed[id]; f != nil {
			e.Kind, e.Name = EntryFixed, f.name
		} else if st := n.resv.rules[id]; st != nil {
			e.Kind, e.Name = EntryStanding, st.rec.Name
		} else {
			e.Kind = EntryFixed
		}
		return e
	}
	if r.Fixed {
		e.Kind, e.ID = EntryFixed, fmt.Sprintf("core-%d", r.ID)
		return e
	}
	e.Kind, e.ID = EntryDown, fmt.Sprintf("down-%d", -r.ID)
	return e
}

// waitFor says what a pending job with a reservation waits for: the
// obstacle whose end its start coincides with (under conservative
// backfilling a job starts at its earliest fit, which is now, its release,
// or the end of some reservation).
func (n *Node) waitFor(lj *liveJob, r plan.Reservation, pc *planCtx) *WaitReason {
	start, now := r.Start, pc.now
	switch {
	case start <= now:
		return &WaitReason{Kind: WaitStarting, Message: "starts now", Until: start}
	case start == lj.pj.Release:
		return &WaitReason{Kind: WaitRelease, Message: "waits for its release time " + humanTime(start), Until: start}
	}
	w := n.blockers(lj.seq, start, pc)
	if w == nil {
		return &WaitReason{Kind: WaitResources, Message: fmt.Sprintf("needs %d processors; they are busy until %s", lj.pj.Procs, humanTime(start)), Until: start}
	}
	return w
}

// queuedWait says what a queued job (no reservation) waits for.
func (n *Node) queuedWait(lj *liveJob, ahead *liveJob, pc *planCtx) *WaitReason {
	now := pc.now
	if offering(lj) {
		// The site agent's offer: its agree, written ahead, names the
		// peer and the hold.
		msg := "a peer quote is in flight: asking peers for a slot"
		if r := lj.peek().GetRoute(); len(r) > 0 {
			if h := r[len(r)-1]; h.GetReason() == fedschedv1.Reason_REASON_DELEGATED && h.GetPeerSite() != "" {
				msg = "agreeing with " + h.GetPeerSite() + " (hold " + h.GetHoldId() + ")"
			}
		}
		return &WaitReason{Kind: WaitDelegation, Message: msg}
	}
	if lj.pj.Release > now {
		return &WaitReason{Kind: WaitRelease, Message: "waits for its release time " + humanTime(lj.pj.Release), Until: lj.pj.Release}
	}
	if ahead != nil {
		return &WaitReason{Kind: WaitPolicyOrder, Message: fmt.Sprintf("behind job %s in the %s queue", ahead.peek().GetId(), n.pol), Blockers: []string{ahead.peek().GetId()}}
	}
	at, ok := n.site.Plan().EarliestFit(lj.pj.Procs, lj.pj.Estimate, now, plan.Forever)
	if !ok {
		return &WaitReason{Kind: WaitResources, Message: fmt.Sprintf("head of the %s queue; needs %d processors", n.pol, lj.pj.Procs)}
	}
	if w := n.blockers(lj.seq, at, pc); w != nil {
		w.Message = "head of the " + n.pol.String() + " queue; " + w.Message
		return w
	}
	return &WaitReason{Kind: WaitResources, Message: fmt.Sprintf("head of the %s queue; needs %d processors, free at %s", n.pol, lj.pj.Procs, humanTime(at)), Until: at}
}

// planCtx is what the wait reasons of one snapshot share: the plan's
// reservations, their indexes by end, the holds by core id.
type planCtx struct {
	res   []plan.Reservation
	ends  map[int64][]int
	holds map[int64]*agreementRec
	now   int64
}

// blockers names what holds processors until t: a fixed or standing
// reservation first (the most actionable answer), then holds backing
// quotes, then running jobs, then waiting jobs reserved earlier.
func (n *Node) blockers(self int64, t int64, pc *planCtx) *WaitReason {
	var fixed, holds, running, pending []string
	var first *PlanEntry
	var firstStart int64
	for _, i := range pc.ends[t] {
		r := pc.res[i]
		if r.ID == self {
			continue
		}
		e := n.entryOf(r, pc.holds)
		switch e.Kind {
		case EntryRunning:
			running = append(running, e.ID)
		case EntryPending:
			pending = append(pending, e.ID)
		case EntryFixed, EntryStanding:
			if first == nil {
				first, firstStart = &e, r.Start
			}
			fixed = append(fixed, e.ID)
		case EntryHold:
			holds = append(holds, e.ID+" for "+e.Name)
		default:
			running = append(running, "failed processors")
		}
	}
	until := humanTime(t)
	switch {
	case first != nil:
		name := first.Name
		if name == "" {
			name = first.ID
		}
		return &WaitReason{Kind: WaitFixed, Message: fmt.Sprintf("behind the %s reservation %q (%s) from %s to %s", first.Kind, name, first.ID,
			humanTime(firstStart), until), Until: t, Blockers: fixed}
	case len(holds) > 0:
		return &WaitReason{Kind: WaitHold, Message: "processors held to back quotes to peers (" + names(holds) + ") until " + until, Until: t, Blockers: holds}
	case len(running) > 0:
		return &WaitReason{Kind: WaitResources, Message: "processors held by " + names(running) + " until " + until, Until: t, Blockers: running}
	case len(pending) > 0:
		return &WaitReason{Kind: WaitPolicyOrder, Message: fmt.Sprintf("behind %s, reserved earlier under %s backfilling, until %s", names(pending), n.pol, until),
			Until: t, Blockers: pending}
	}
	return nil
}

// names lists ids for a message: at most three, then how many more.
func names(ids []string) string {
	if len(ids) <= 3 {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:3], ", "), len(ids)-3)
}

// TimeLayout is how fedsched writes an instant for people, everywhere
// (tables, explain, the status page): UTC, to the second, with the zone.
const TimeLayout = "2006-01-02 15:04:05Z07:00"

// humanTime is an instant of the site's clock in TimeLayout.
func humanTime(sec int64) string { return time.Unix(sec, 0).UTC().Format(TimeLayout) }

// jobViews lists the live jobs of a snapshot, then the recently ended ones.
func (n *Node) jobViews(s *SiteSnapshot) []JobView {
	waits := map[string]*WaitReason{}
	for _, e := range s.Entries {
		if e.Wait != nil {
			waits[e.ID] = e.Wait
		}
	}
	for _, e := range s.Queued {
		waits[e.ID] = e.Wait
	}
	out := make([]JobView, 0, len(n.live)+len(n.recent))
	for _, lj := range n.live {
		v := jobView(lj.peek())
		if w := waits[v.ID]; w != nil {
			v.Reason = w.Message
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b JobView) int {
		ra, rb := a.State != "RUNNING", b.State != "RUNNING"
		if ra != rb {
			if ra {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(a.Start, b.Start), compareIDs(a.ID, b.ID))
	})
	for i := len(n.recent) - 1; i >= 0; i-- {
		out = append(out, jobView(n.recent[i]))
	}
	return out
}

func jobView(j *fedschedv1.Job) JobView {
	v := JobView{ID: j.GetId(), State: stateName(j.GetState()), User: j.GetSpec().GetUser(), Procs: int(j.GetSpec().GetProcs()),
		Submit: j.GetSubmitTime().GetSeconds(), Reason: j.GetMessage()}
	if r := j.GetReservation(); r != nil {
		v.Start, v.End, v.Planned = r.GetStart().GetSeconds(), r.GetEnd().GetSeconds(), true
	}
	if st := j.GetStartTime(); st != nil {
		v.Start, v.Planned = st.GetSeconds(), false
	}
	if en := j.GetEndTime(); en != nil {
		v.End = en.GetSeconds()
	}
	v.Route = strings.Join(routeSites(j.GetRoute()), " → ")
	return v
}

// recentEnded is how many ended jobs the status page lists.
const recentEnded = 20

// remember keeps a job that reached a final state for the status page.
func (n *Node) remember(j *fedschedv1.Job) {
	if len(n.recent) == recentEnded {
		copy(n.recent, n.recent[1:])
		n.recent = n.recent[:recentEnded-1]
	}
	n.recent = append(n.recent, j)
}
