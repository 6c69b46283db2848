package site

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
)

// Phase is where a job a driver keeps stands at the site.
type Phase int

// Phases of a saved job.
const (
	// PhaseOffering (origin): offered to peers, out of the plan
	// (DecideOffer).
	PhaseOffering Phase = iota + 1
	// PhaseAgreeing (origin): the agree to Peer's quote, or to the hold of
	// Peer that takes the job from the queue (HandOver), was written ahead
	// (DecideAgree).
	PhaseAgreeing
	// PhaseWaiting: accepted here, not started (DecideAccept, DecideMove,
	// a DecideFailed that placed it again).
	PhaseWaiting
	// PhaseRunning: started here (DecideStart, DecideExtend).
	PhaseRunning
	// PhaseDelegated (origin): Peer runs it, its report is awaited
	// (DecideDelegate, DecideTerminate).
	PhaseDelegated
)

// SavedJob is one job as a driver keeps it from the agent's decisions.
type SavedJob struct {
	Key   JobKey
	Phase Phase
	// Spec is the job; Spec.ID is the agent's id for it.
	Spec  plan.Job
	Route delegation.Route
	// Placement is a waiting job's reservation, a running job's as
	// admission gave it (PoF, overbooked), or the peer's slot agreed to
	// (agreeing) or accepted (delegated).
	Placement plan.Placement
	// Start and End are a running job's start and kill time.
	Start, End int64
	// Peer is the peer an origin agrees with or delegated to, or the
	// origin of a job accepted for a peer (the site it came from).
	Peer string
	// Price is the price agreed with Peer (Decision.Price): a repeated
	// agree is answered with it, and an agreeing job's report settles it.
	Price float64
	// Offer is what a quote had to beat (offering, agreeing).
	Offer OfferDecision
	// HandOver (agreeing): the agree hands the job over to Peer, which
	// took it from the queue (RQF); a refusal brings it back to the plan.
	HandOver bool
	// HoldID is the hold a peer's job was accepted under (waiting,
	// running), or the peer's hold the agree confirms (agreeing).
	HoldID string
	// Cancelled: cancelled while running (its kill decided, its end to
	// come), agreeing or delegated.
	Cancelled bool
	// Terminate: a Terminate is owed to Peer (delegated and cancelled),
	// since TerminateSince.
	Terminate      bool
	TerminateSince int64
	// Order is when the job joined the plan, relative to the others: the
	// plan's queue order.
	Order int64
}

// Saved is what a driver keeps of an agent for Restore: everything the
// agent's decisions and each batch's state (Ready.Seq, PulledAt, Learnt,
// Observed) tell, as a node's store keeps it. Journal builds it.
type Saved struct {
	Seq, PulledAt int64
	// Stats are the runtime statistics (overbook.Stats.MarshalJSON); nil:
	// none learnt yet.
	Stats []byte
	// History is what each peer's delegations achieved.
	History map[string]delegation.History
	Jobs    map[JobKey]*SavedJob
	// Reports are the outcome reports owed to the jobs' origins.
	Reports map[JobKey]OwedReport
	// Reservations are the operators' fixed reservations (Reserve), by
	// id; FixedSeq is the lowest id the agent has given one.
	Reservations map[int64]plan.FixedSpec
	FixedSeq     int64
	// Standing are the standing reservations added at run time
	// (AddStanding), by name; their instances are laid again at Restore.
	Standing map[string]plan.Standing
}

// OwedReport is an outcome report owed since a time: it is resent every
// reply period from then until acknowledged.
type OwedReport struct {
	Outcome Outcome
	Since   int64
}

// Journal keeps what a driver persists of one agent, batch by batch: the
// simplest store. Record every batch Ready returns, before its messages
// are sent; Saved is then what Restore needs after a crash. A node keeps
// the same in bbolt, one record per job and agreement.
type Journal struct {
	s     Saved
	order int64
}

// NewJournal returns the journal of an agent that has decided nothing.
func NewJournal() *Journal {
	return &Journal{s: Saved{PulledAt: NeverPulled, History: map[string]delegation.History{},
		Jobs: map[JobKey]*SavedJob{}, Reports: map[JobKey]OwedReport{}, Reservations: map[int64]plan.FixedSpec{}, Standing: map[string]plan.Standing{}}}
}

// Record folds one batch of a, made at now, into the journal.
func (j *Journal) Record(a *Agent, r Ready, now int64) error {
	j.s.Seq, j.s.PulledAt = r.Seq, r.PulledAt
	if r.Learnt {
		b, err := a.Stats().MarshalJSON()
		if err != nil {
			return fmt.Errorf("journal of %s: statistics: %w", a.Name(), err)
		}
		j.s.Stats = b
	}
	if r.Observed {
		j.s.History = maps.Clone(a.History())
	}
	for i := range r.Decisions {
		j.apply(&r.Decisions[i], now)
	}
	return nil
}

func (j *Journal) apply(d *Decision, now int64) {
	jobs := j.s.Jobs
	sj := jobs[d.Job]
	switch d.Kind {
	case DecideAgree, DecideMove, DecideStart, DecideExtend, DecideCancel, DecideTerminate:
		if sj == nil {
			return // a job the journal never saw (it started late): nothing to update
		}
	case DecideFailed, DecideDisplaced:
		if sj == nil && d.Placement.OK() {
			return
		}
	}
	switch d.Kind {
	case DecideOffer:
		jobs[d.Job] = &SavedJob{Key: d.Job, Phase: PhaseOffering, Spec: d.Spec, Route: d.Route, Offer: d.Offer}
	case DecideAgree:
		sj.Phase, sj.Peer, sj.Placement, sj.Price, sj.HandOver, sj.HoldID = PhaseAgreeing, d.Peer, d.Placement, d.Price, d.HandOver, d.HoldID
	case DecideAccept:
		j.order++
		jobs[d.Job] = &SavedJob{Key: d.Job, Phase: PhaseWaiting, Spec: d.Spec, Route: d.Route, Placement: d.Placement, Peer: d.Peer, Price: d.Price, Order: j.order,
			HoldID: d.HoldID}
	case DecideMove:
		sj.Placement = d.Placement
	case DecideStart:
		sj.Phase, sj.Start, sj.End = PhaseRunning, d.Start, d.End
	case DecideExtend:
		sj.End = d.End
	case DecideDelegate:
		jobs[d.Job] = &SavedJob{Key: d.Job, Phase: PhaseDelegated, Spec: d.Spec, Route: d.Route, Placement: d.Placement, Peer: d.Peer, Price: d.Price}
	case DecideFailed:
		if !d.Placement.OK() {
			delete(jobs, d.Job)
			break
		}
		j.order++
		sj.Phase, sj.Spec, sj.Placement, sj.Order = PhaseWaiting, d.Spec, d.Placement, j.order
	case DecideCancel:
		if sj.Phase == PhaseOffering || sj.Phase == PhaseWaiting {
			delete(jobs, d.Job)
		} else {
			sj.Cancelled = true
		}
	case DecideTerminate:
		sj.Phase, sj.Peer, sj.Cancelled, sj.Terminate, sj.TerminateSince = PhaseDelegated, d.Peer, true, true, now
	case DecideAcked:
		if _, ok := j.s.Reports[d.Job]; ok {
			delete(j.s.Reports, d.Job)
		} else if sj != nil && sj.Phase == PhaseAgreeing {
			delete(jobs, d.Job) // cancelled, and the peer refused the agree
		} else if sj != nil {
			sj.Terminate = false
		}
	case DecideReport:
		j.s.Reports[d.Job] = OwedReport{Outcome: d.Outcome, Since: now}
	case DecideReject, DecideEnd, DecideOutcome, DecideExpire:
		delete(jobs, d.Job)
	case DecideReserve:
		j.s.Reservations[d.Fixed.ID] = d.Fixed
		j.s.FixedSeq = min(j.s.FixedSeq, d.Fixed.ID)
	case DecideUnreserve:
		delete(j.s.Reservations, d.Fixed.ID)
	case DecideStanding:
		j.s.Standing[d.Standing.Name] = *d.Standing
	case DecideUnstanding:
		delete(j.s.Standing, d.Standing.Name)
	case DecideGaveUp:
		delete(j.s.Reports, d.Job)
		if sj != nil && (sj.Phase == PhaseDelegated || sj.Phase == PhaseAgreeing) {
			delete(jobs, d.Job)
		}
	case DecideDisplaced:
		if d.Placement.OK() {
			sj.Placement = d.Placement
		} else {
			delete(jobs, d.Job)
		}
	}
}

// Saved returns a copy of what the journal keeps.
func (j *Journal) Saved() *Saved {
	s := j.s
	s.Stats = slices.Clone(s.Stats)
	s.History = maps.Clone(s.History)
	s.Reports = maps.Clone(s.Reports)
	s.Reservations = maps.Clone(s.Reservations)
	s.Standing = maps.Clone(s.Standing)
	s.Jobs = make(map[JobKey]*SavedJob, len(j.s.Jobs))
	for k, sj := range j.s.Jobs {
		c := *sj
		c.Route = slices.Clone(sj.Route)
		s.Jobs[k] = &c
	}
	return &s
}

// Restore rebuilds at now the agent of cfg from what its driver kept (s),
// after a crash: its statistics, its peers' history, its id counter and
// last RQF round, the operators' reservations, the standing reservations
// added at run time (with cfg.Standing's, their instances laid again
// after the jobs, as far as the jobs reach: one a running job is in is
// skipped, as AddStanding's laying does), the jobs it accepted
// (waiting with their reservations, running with their start and kill
// time, in the order they joined the plan), the jobs it delegated and
// awaits the reports of (with a Terminate owed, if cancelled), and the
// reports it owes. What a restart loses (docs/architecture.md, "What a
// driver persists, and what a restart loses"): the holds it granted peers
// (an agree for one is refused, and the origin asks on), the quotes it
// was waiting for (a job being offered is offered again, from the first
// round; one whose agree was out asks that peer again, and one being
// handed over to an RQF taker agrees to its hold again), processors a
// driver had taken out of service (NodeDown), and, in the comprehensive
// overbooking mode, the end-time distributions of the jobs in the plan.
// What is owed is resent on its grid (every reply period from when it
// became owed), as if the site had not stopped. The first batch (Ready)
// holds what re-offering decided and sent.
func Restore(cfg Config, now int64, s *Saved) (*Agent, error) {
	a, err := New(cfg)
	if err != nil {
		return nil, err
	}
	a.seq, a.rqfAt = s.Seq, s.PulledAt
	for _, name := range slices.Sorted(maps.Keys(s.Standing)) {
		if _, ok := a.laid[name]; ok {
			return nil, fmt.Errorf("site agent %s: saved standing reservation %q is in the configuration too: %w", cfg.Name, name, ErrInvalid)
		}
		r := s.Standing[name]
		if err := r.Validate(); err != nil || r.Procs > cfg.Procs || r.Name != name {
			return nil, fmt.Errorf("site agent %s: saved standing reservation %q (%d of %d processors): %v: %w", cfg.Name, name, r.Procs, cfg.Procs, err, ErrInvalid)
		}
		a.cfg.Standing = append(a.cfg.Standing, r)
		a.laid[name] = &standingRule{inst: map[int64]plan.Window{}}
		a.rules.Clear = a.clearOfStanding
	}
	if st := a.Stats(); st != nil && s.Stats != nil {
		if err := st.UnmarshalJSON(s.Stats); err != nil {
			return nil, fmt.Errorf("site agent %s: saved statistics: %w", cfg.Name, err)
		}
		// They carry the configuration they were saved with; the site's
		// current one applies from now on (as a node's).
		o := cfg.Overbooking
		if err := st.Reconfigure(overbook.StatsConfig{Classifier: overbook.ByRuntime, AgeFactor: o.AgeFactor, AgeEvery: o.AgeEvery}); err != nil {
			return nil, fmt.Errorf("site agent %s: saved statistics: %w", cfg.Name, err)
		}
	}
	// The operators' reservations go in before the jobs, which were
	// planned around them; one over by now is gone.
	a.fixedID = min(a.fixedID, s.FixedSeq)
	for _, id := range slices.Sorted(maps.Keys(s.Reservations)) {
		f := s.Reservations[id]
		if f.End <= now {
			continue
		}
		if _, err := a.site.AddFixed(now, f, false); err != nil {
			return nil, fmt.Errorf("site agent %s: saved reservation: %w", cfg.Name, err)
		}
		a.reserved[id] = f
	}
	for _, p := range slices.Sorted(maps.Keys(s.History)) {
		a.rank.SetHistory(p, s.History[p])
	}
	saved := slices.SortedFunc(maps.Values(s.Jobs), func(x, y *SavedJob) int {
		return cmp.Or(cmp.Compare(x.Order, y.Order), cmpKey(x.Key, y.Key))
	})
	var redrive []*job
	for _, sj := range saved {
		if sj.Spec.ID <= 0 || sj.Spec.ID > s.Seq {
			return nil, fmt.Errorf("site agent %s: saved job %v has id %d, outside 1..%d: %w", cfg.Name, sj.Key, sj.Spec.ID, s.Seq, ErrInvalid)
		}
		jb := &job{key: sj.Key, pj: sj.Spec, route: sj.Route, place: sj.Placement, price: sj.Price, cancelled: sj.Cancelled, holdID: sj.HoldID}
		switch sj.Phase {
		case PhaseWaiting, PhaseRunning:
			running := sj.Phase == PhaseRunning
			pl := sj.Placement
			if running {
				// The plan holds the run's slot; the job keeps the
				// placement it was accepted with (a repeated agree is
				// answered with it).
				pl.Start, pl.End = sj.Start, sj.End
				jb.started, jb.start = true, sj.Start
			}
			if err := a.site.Restore(jb.pj, pl, running); err != nil {
				return nil, fmt.Errorf("site agent %s: saved job %v: %w", cfg.Name, sj.Key, err)
			}
			if a.adm != nil {
				a.adm.Restore(&jb.pj)
			}
			if sj.Key.Site != cfg.Name {
				jb.from = sj.Peer
			}
			a.add(jb)
			a.set(jb, stateLocal)
		case PhaseDelegated:
			jb.peer = sj.Peer
			a.add(jb)
			a.set(jb, stateDelegated)
			if sj.Terminate {
				a.owed[jb.key] = &owedMsg{msg: Message{Kind: KindTerminate, To: jb.peer, Job: jb.key}, next: a.resendAfter(sj.TerminateSince, now)}
			}
		case PhaseOffering, PhaseAgreeing:
			jb.peer, jb.handOver = sj.Peer, sj.HandOver
			if !sj.HandOver {
				jb.offered, jb.offer = true, sj.Offer
			}
			a.add(jb)
			if sj.Phase == PhaseAgreeing {
				a.set(jb, stateAgreeing)
			}
			redrive = append(redrive, jb)
		default:
			return nil, fmt.Errorf("site agent %s: saved job %v in phase %d: %w", cfg.Name, sj.Key, sj.Phase, ErrInvalid)
		}
	}
	// The standing rules' instances are laid again as far as the jobs
	// reach: the jobs were kept clear of them, and one a running job (or,
	// after a rule was added with displace, a waiting one) is in the way
	// of is skipped (or displaces it), as a rule added now would.
	a.layTo(now, a.jobsReach(now))
	for _, k := range slices.SortedFunc(maps.Keys(s.Reports), cmpKey) {
		r := s.Reports[k]
		a.owed[k] = &owedMsg{msg: Message{Kind: KindReport, To: k.Site, Job: k, Outcome: r.Outcome}, next: a.resendAfter(r.Since, now)}
	}
	// The negotiations in flight, in the order the jobs were saved: an
	// agree is asked again of its peer alone (only its answer settles
	// where the job is); an offer starts over.
	for _, jb := range redrive {
		if jb.state == stateAgreeing {
			if a.cfg.Peers != nil && !jb.handOver {
				jb.rounds = a.rounds(now, jb)
			}
			jb.deadline = now + a.cfg.ReplySeconds
			a.send(Message{Kind: KindAgree, To: jb.peer, Job: jb.key, HoldID: jb.holdID})
			continue
		}
		if !a.reoffer(now, jb) {
			a.admit(now, jb)
		}
	}
	a.dirty = true
	return a, nil
}

// resendAfter is when a message owed since since is next resent after
// now: on its reply-period grid from since, as if the site had not
// stopped.
func (a *Agent) resendAfter(since, now int64) int64 {
	p := a.cfg.ReplySeconds
	if since > now {
		return since + p
	}
	return since + p*((now-since)/p+1)
}

// reoffer offers a job again that was being offered when the site
// stopped; false when no peer may be asked.
func (a *Agent) reoffer(now int64, jb *job) bool {
	switch {
	case a.cfg.Peers == nil:
		return false
	case a.cfg.Transfer == delegation.EFS:
		return a.offerEFS(now, jb)
	}
	return a.offerTo(now, jb, jb.offer)
}
