package node

// Operators' fixed and standing reservations.
//
// A fixed reservation holds procs processors for exactly [start, end): it
// is a plan.FixedSpec in the core's plan and a store.ReservationRecord
// (Fixed, Note = name) in the store. A standing reservation is a rule
// (store.StandingRecord); its instances are fixed reservations that the
// node lays into the plan a horizon ahead (Deps.StandingHorizon, 7 days by
// default), extending it a seventh of the horizon at a time, and again at
// every start from the stored rule. Core ids of fixed reservations are
// negative (job ids are positive) and live in memory only.
//
// The plan's jobs are kept clear of instances not laid yet: a job placed
// beyond the laid range is taken out again, the range is laid as far as
// the job's end, and the job is placed again (clearOfStanding); under the
// queue policies the range is laid as far as the longest waiting job's
// estimate before each pass (tickReservations). A job the rules leave no
// room for at all is rejected (plan.StandingExcludes), so that the plan is
// the one the rules laid in advance would give (the simulator's). Only a
// rule created while work is in the plan finds work in an instance's way:
// waiting jobs are displaced as with CreateReservation's displace (an
// accepted SLA rejected so is VIOLATED); if a running job or a peer's hold
// is in the way, the instance is skipped and logged.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

const (
	// DefaultStandingHorizon is how far ahead a node keeps the instances of
	// standing reservations in its plan when Deps.StandingHorizon is 0.
	DefaultStandingHorizon = 7 * 24 * time.Hour
	// minEverySeconds is the shortest period of a standing reservation.
	minEverySeconds = 3600
	// maxStartPast is how far in the past a reservation may start, in
	// seconds (a request takes a moment to arrive).
	maxStartPast = 60
)

// reservations is the node's bookkeeping of operators' reservations. The
// reservations themselves are in the core's plan. Owned by the loop.
type reservations struct {
	fixed  map[string]*fixedRes
	rules  map[string]*standingRes
	byCore map[int64]string // core id -> reservation id
	core   int64            // last core id handed out (negative)
	// laidTo: every rule's instances starting before laidTo are laid.
	laidTo  int64
	horizon int64
	// tidyAt is the earliest end of a reservation or an instance: before
	// it, nothing is over.
	tidyAt int64
	// unfit are stored fixed reservations that recovery could not put
	// back into the plan (fixedRes.problem says why): listed, not held.
	unfit []*fixedRes
}

func newReservations(horizon time.Duration) reservations {
	if horizon <= 0 {
		horizon = DefaultStandingHorizon
	}
	return reservations{fixed: map[string]*fixedRes{}, rules: map[string]*standingRes{}, byCore: map[int64]string{},
		horizon: max(1, int64(horizon/time.Second)), tidyAt: plan.Forever}
}

func (r *reservations) newCore() int64 {
	r.core--
	return r.core
}

// target is how far to lay the rules for a plan that must reach want.
func (r *reservations) target(now, want int64) int64 {
	return max(want, now+r.horizon) + max(1, r.horizon/7)
}

type fixedRes struct {
	id, name   string
	procs      int
	start, end int64
	core       int64
	problem    string // why it is not in the plan (reservations.unfit)
}

type standingRes struct {
	rec  store.StandingRecord
	rule plan.Standing
	// next: the instances starting before next have been laid (or
	// skipped).
	next    int64
	inst    map[int64]plan.Window // core id -> instance in the plan
	skipped int
}

func newStanding(rec store.StandingRecord) *standingRes {
	st := plan.Standing{Name: rec.ID, Procs: rec.Procs, Start: rec.Start.Unix(), Every: rec.EverySeconds,
		Length: rec.End.Unix() - rec.Start.Unix(), Weekdays: rec.Weekdays}
	if !rec.Until.IsZero() {
		st.Until = rec.Until.Unix()
	}
	return &standingRes{rec: rec, rule: st, next: plan.Never, inst: map[int64]plan.Window{}}
}

// over reports whether no instance of the rule will hold processors after
// now.
func (s *standingRes) over(now int64) bool {
	return s.rule.Until != 0 && s.rule.Until <= now && len(s.inst) == 0
}

func reservationID(site string, seq uint64) string { return fmt.Sprintf("%s.r%012d", site, seq) }

// ReservationConflictError is the error of a reservation refused because
// accepted work or other fixed reservations stand in its way. It matches
// ErrReservationConflict; ToStatus gives it a ReservationConflict detail.
type ReservationConflictError struct {
	// Jobs are all the jobs whose reservations overlap the slots in time,
	// sorted by id; Running and Held are the subsets that are running or
	// held for a peer's quote (never displaced).
	Jobs, Running, Held []string
	// Reservations are the fixed reservations that leave no room.
	Reservations []string
	// Displace tells whether displacement was asked for.
	Displace bool
}

func (e *ReservationConflictError) Error() string {
	var parts []string
	if len(e.Reservations) > 0 {
		parts = append(parts, "the slot collides with fixed reservations "+strings.Join(e.Reservations, ", ")+", which are never displaced")
	}
	if len(e.Jobs) > 0 {
		s := "the slot conflicts with jobs " + strings.Join(e.Jobs, ", ")
		if len(e.Running) > 0 {
			s += "; running jobs are never displaced: " + strings.Join(e.Running, ", ")
		}
		if len(e.Held) > 0 {
			s += "; held for a peer's quote (retry in a minute): " + strings.Join(e.Held, ", ")
		}
		if !e.Displace && len(e.Running) == 0 && len(e.Held) == 0 && len(e.Reservations) == 0 {
			s += "; displace re-plans them around the reservation"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ") + ": " + ErrReservationConflict.Error()
}

// Unwrap makes errors.Is(err, ErrReservationConflict) true.
func (e *ReservationConflictError) Unwrap() error { return ErrReservationConflict }

// Detail is the error as the API's ReservationConflict.
func (e *ReservationConflictError) Detail() *fedschedv1.ReservationConflict {
	return &fedschedv1.ReservationConflict{JobIds: e.Jobs, RunningJobIds: e.Running, HeldJobIds: e.Held,
		ReservationIds: e.Reservations, Displace: e.Displace}
}

// --- validation -------------------------------------------------------------

// validateReservation checks a request against the site and its clock
// (now, in seconds). Errors wrap ErrInvalidReservation.
func (n *Node) validateReservation(req *fedschedv1.CreateReservationRequest, now int64) error {
	if err := noUnknownFields(req); err != nil {
		return err
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w", fmt.Sprintf(format, args...), ErrInvalidReservation)
	}
	if len(req.GetName()) > maxNameLen || !printable(req.GetName()) {
		return bad("name: at most %d bytes of printable UTF-8", maxNameLen)
	}
	switch p := req.GetProcs(); {
	case p <= 0:
		return bad("procs must be at least 1, got %d", p)
	case int(p) > n.procs:
		return bad("procs %d exceeds the site's %d processors", p, n.procs)
	}
	instant := func(name string, t *timestamppb.Timestamp) (int64, error) {
		if t == nil {
			return 0, bad("%s is required", name)
		}
		if err := t.CheckValid(); err != nil {
			return 0, bad("%s: %v", name, err)
		}
		sec := t.AsTime().Unix()
		if sec > now+maxFutureTime {
			return 0, bad("%s is more than ten years ahead", name)
		}
		return sec, nil
	}
	start, err := instant("start", req.GetStart())
	if err != nil {
		return err
	}
	end, err := instant("end", req.GetEnd())
	if err != nil {
		return err
	}
	switch {
	case end <= start:
		return bad("end %s is not after start %s", rfc(end), rfc(start))
	case start < now-maxStartPast:
		return bad("start %s is more than a minute in the past (the site's time is %s)", rfc(start), rfc(now))
	}
	every := req.GetEverySeconds()
	switch {
	case every < 0:
		return bad("every_seconds must not be negative, got %d", every)
	case every == 0 && req.GetUntil() != nil:
		return bad("until is only for standing reservations (every_seconds > 0)")
	case every == 0 && len(req.GetWeekdays()) > 0:
		return bad("weekdays are only for standing reservations (every_seconds > 0)")
	case every == 0:
		return nil
	case every < end-start:
		return bad("every_seconds %d is shorter than the reservation's length of %d s: instances would overlap", every, end-start)
	case every < minEverySeconds:
		return bad("every_seconds %d is shorter than the least period of %d s", every, minEverySeconds)
	case every > maxFutureTime:
		return bad("every_seconds %d is more than ten years", every)
	}
	until := plan.Forever
	if req.GetUntil() != nil {
		if until, err = instant("until", req.GetUntil()); err != nil {
			return err
		}
		if until <= start {
			return bad("until %s is not after start %s", rfc(until), rfc(start))
		}
	}
	seen := map[fedschedv1.Weekday]bool{}
	for i, d := range req.GetWeekdays() {
		if d < fedschedv1.Weekday_WEEKDAY_MONDAY || d > fedschedv1.Weekday_WEEKDAY_SUNDAY {
			return bad("weekdays[%d]: %v is not a day", i, d)
		}
		if seen[d] {
			return bad("weekdays[%d]: %s given twice", i, weekdayName(d))
		}
		seen[d] = true
	}
	// A rule must have an instance: look at its first eight periods, or
	// eight weeks, whichever is longer.
	st := newStanding(standingRecord(req)).rule
	if len(st.Instances(start, min(until, start+max(8*every, 8*7*86400)))) == 0 {
		return bad("the rule has no instance in its first eight periods or weeks: check until and weekdays")
	}
	return nil
}

func rfc(sec int64) string { return time.Unix(sec, 0).UTC().Format(time.RFC3339) }

func weekdayName(d fedschedv1.Weekday) string {
	return strings.ToLower(strings.TrimPrefix(d.String(), "WEEKDAY_"))
}

// toWeekday and fromWeekday convert between the API's days (Monday = 1,
// Sunday = 7) and Go's (Sunday = 0).
func toWeekday(d fedschedv1.Weekday) time.Weekday { return time.Weekday(int32(d) % 7) }

func fromWeekday(d time.Weekday) fedschedv1.Weekday {
	if d == time.Sunday {
		return fedschedv1.Weekday_WEEKDAY_SUNDAY
	}
	return fedschedv1.Weekday(d)
}

// standingRecord is the rule a valid request asks for (without an id).
func standingRecord(req *fedschedv1.CreateReservationRequest) store.StandingRecord {
	rec := store.StandingRecord{Name: req.GetName(), Procs: int(req.GetProcs()),
		Start: time.Unix(req.GetStart().AsTime().Unix(), 0), End: time.Unix(req.GetEnd().AsTime().Unix(), 0),
		EverySeconds: req.GetEverySeconds()}
	if u := req.GetUntil(); u != nil {
		rec.Until = time.Unix(u.AsTime().Unix(), 0)
	}
	for _, d := range req.GetWeekdays() {
		rec.Weekdays = append(rec.Weekdays, toWeekday(d))
	}
	return rec
}

// --- laying rules into the plan ---------------------------------------------

// layStanding lays the instances of every rule, at recovery, into the plan
// recovery rebuilds before the agent takes over (startAgent: the agent
// lays them again), as far as the plan needs to reach want (and at least
// the horizon ahead of now): a seventh of the horizon beyond.
func (n *Node) layStanding(now, want int64) {
	r := &n.resv
	if len(r.rules) == 0 || max(want, now+r.horizon) <= r.laidTo {
		return
	}
	to := r.target(now, want)
	if to <= r.laidTo {
		return
	}
	for _, id := range slices.SortedFunc(maps.Keys(r.rules), compareIDs) {
		n.layRule(r.rules[id], now, to)
	}
	r.laidTo = to
}

// layRule lays the instances of one rule that start in [s.next, to) and
// have not ended by now.
func (n *Node) layRule(s *standingRes, now, to int64) {
	for _, w := range s.rule.Instances(max(now, s.next), to) {
		if w.Start < s.next || w.End <= now {
			continue
		}
		n.layInstance(s, w, now)
	}
	s.next = max(s.next, to)
}

// layInstance lays one instance that comes into the laid range. Waiting
// jobs in its way are displaced; a running job or a hold in its way makes
// it skip the instance.
func (n *Node) layInstance(s *standingRes, w plan.Window, now int64) {
	spec := plan.FixedSpec{ID: n.resv.newCore(), Name: s.rec.ID, Procs: s.rec.Procs, Start: w.Start, End: w.End}
	_, err := n.site.AddFixed(now, spec, false)
	var ce *plan.ConflictError
	if errors.As(err, &ce) {
		if c := n.classify(ce.Jobs); len(c.Running) == 0 && len(c.Held) == 0 {
			var ds []plan.Displaced
			if ds, err = n.site.AddFixed(now, spec, true); err == nil {
				n.settleDisplaced(ds, s.rec.ID, now)
			}
		}
	}
	if err != nil {
		s.skipped++
		n.log.Warn("instance of a standing reservation skipped", "reservation", s.rec.ID, "start", rfc(w.Start), "end", rfc(w.End), "err", err)
		return
	}
	n.addInstance(s, spec.ID, w)
}

func (n *Node) addInstance(s *standingRes, core int64, w plan.Window) {
	s.inst[core] = w
	n.resv.byCore[core] = s.rec.ID
	n.resv.tidyAt = min(n.resv.tidyAt, w.End)
}

// standingRules are the rules of the standing reservations, in id order.
func (n *Node) standingRules() []plan.Standing {
	out := make([]plan.Standing, 0, len(n.resv.rules))
	for _, id := range slices.SortedFunc(maps.Keys(n.resv.rules), compareIDs) {
		out = append(out, n.resv.rules[id].rule)
	}
	return out
}

// tickReservations runs every turn of the loop: it forgets reservations
// and instances that are over (and deletes their records) and extends the
// laid range of the rules.
func (n *Node) tickReservations(now int64) {
	r := &n.resv
	if len(r.fixed) == 0 && len(r.rules) == 0 && len(r.unfit) == 0 {
		return
	}
	if now >= r.tidyAt {
		r.tidyAt = plan.Forever
		r.unfit = slices.DeleteFunc(r.unfit, func(f *fixedRes) bool {
			if f.end <= now {
				n.pending.putRes(f.id, nil)
				return true
			}
			r.tidyAt = min(r.tidyAt, f.end)
			return false
		})
		for id, f := range r.fixed {
			if f.end <= now {
				delete(r.fixed, id)
				delete(r.byCore, f.core)
				n.pending.putRes(id, nil)
				continue
			}
			r.tidyAt = min(r.tidyAt, f.end)
		}
		for id, s := range r.rules {
			for core, w := range s.inst {
				if w.End <= now {
					delete(s.inst, core)
					delete(r.byCore, core)
					continue
				}
				r.tidyAt = min(r.tidyAt, w.End)
			}
			if s.over(now) {
				n.dropRule(id, now)
			}
		}
	}
	// A rule whose until passed with no instance in the plan is over too.
	for id, s := range r.rules {
		if s.over(now) {
			n.dropRule(id, now)
		}
	}
}

// dropRule forgets a rule that is over (and deletes its record).
func (n *Node) dropRule(id string, now int64) {
	delete(n.resv.rules, id)
	n.pending.putStanding(id, nil)
	n.agent.RemoveStanding(now, id)
	n.applyOwn(now)
}

// reservationWake is when the laid range of the rules must grow next.
func (n *Node) reservationWake() int64 {
	return n.agent.StandingWake()
}

// --- conflicts and displaced jobs -------------------------------------------

// classify names the jobs behind core ids and sorts out those that can
// never be displaced: running ones, and holds for peers' quotes.
func (n *Node) classify(ids []int64) *ReservationConflictError {
	c := &ReservationConflictError{}
	type named struct {
		id            string
		running, held bool
	}
	var all []named
	for _, id := range ids {
		lj := n.live[id]
		x := named{id: jobID(n.cfg.Site, uint64(id))}
		switch {
		case lj == nil:
			x.held = true
		case lj.cancelled || lj.job().GetState() == fedschedv1.JobState_JOB_STATE_RUNNING:
			x.id, x.running = lj.job().GetId(), true
		default:
			x.id = lj.job().GetId()
		}
		all = append(all, x)
	}
	slices.SortFunc(all, func(a, b named) int { return compareIDs(a.id, b.id) })
	for _, x := range all {
		c.Jobs = append(c.Jobs, x.id)
		if x.running {
			c.Running = append(c.Running, x.id)
		}
		if x.held {
			c.Held = append(c.Held, x.id)
		}
	}
	return c
}

// fixedInTheWay returns the ids of the fixed reservations overlapping w
// when, with every job gone, they would still leave no room for procs
// processors over it; nil if they leave room.
func (n *Node) fixedInTheWay(procs int, w plan.Window) []string {
	prof := plan.NewProfile(n.procs)
	var ids []string
	for _, r := range n.site.Fixed() {
		if r.Start >= w.End || w.Start >= r.End {
			continue
		}
		prof.Add(max(r.Start, w.Start), min(r.End, w.End), -r.Procs)
		if id, ok := n.resv.byCore[r.ID]; ok {
			ids = append(ids, id)
		}
	}
	if prof.Fits(procs, w.Start, w.End) {
		return nil
	}
	slices.SortFunc(ids, compareIDs)
	return slices.Compact(ids)
}

// settleDisplaced carries out what a fixed reservation did to waiting jobs:
// a re-planned job gets its new reservation, a rejected one ends REJECTED
// (an accepted SLA VIOLATED: the provider broke it). The changes join the
// turn's commit.
func (n *Node) settleDisplaced(ds []plan.Displaced, resID string, now int64) []*fedschedv1.DisplacedJob {
	out := make([]*fedschedv1.DisplacedJob, 0, len(ds))
	for _, d := range ds {
		lj := n.live[d.JobID]
		if lj == nil {
			continue
		}
		id := lj.job().GetId()
		var prev *fedschedv1.Reservation
		if r := lj.job().GetReservation(); r != nil {
			prev = proto.Clone(r).(*fedschedv1.Reservation)
		}
		dj := &fedschedv1.DisplacedJob{JobId: id, Previous: prev, Reason: fedschedv1.Reason_REASON_DISPLACED}
		if d.Rejected {
			_, why := rejectReason(d.Placement, lj.pj, n.cfg.Site, now)
			msg := fmt.Sprintf("fixed reservation %s took the job's slot and none other is left: %s", resID, why)
			if lj.sla {
				msg += "; the SLA is violated"
			}
			lj.job().Reservation = nil
			n.finish(lj, fedschedv1.JobState_JOB_STATE_REJECTED, fedschedv1.Reason_REASON_DISPLACED, msg, fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, now)
			dj.State, dj.Message = fedschedv1.JobState_JOB_STATE_REJECTED, msg
		} else {
			pl := d.Placement
			api, over := n.reservationOf(lj.pj.Procs, pl, lj.pj.Estimate)
			lj.job().Reservation, lj.job().Pof, lj.job().Overbooked = api, pl.PoF, over
			msg := fmt.Sprintf("fixed reservation %s took the job's slot at %s; re-planned to start at %s", resID, rfc(d.Was.Start), rfc(pl.Start))
			if over {
				msg += fmt.Sprintf(", overbooked into %d of its %d estimated seconds with PoF %.3f", pl.End-pl.Start, lj.pj.Estimate, pl.PoF)
			}
			lj.rec = n.setState(lj.job(), lj.rec, fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.Reason_REASON_DISPLACED, msg, now)
			dj.State, dj.Message, dj.Reservation = fedschedv1.JobState_JOB_STATE_PENDING, msg, proto.Clone(api).(*fedschedv1.Reservation)
		}
		dj.SlaOutcome = lj.job().GetSlaOutcome()
		out = append(out, dj)
	}
	return out
}

// --- operations -------------------------------------------------------------

// createReservation makes a fixed or standing reservation (req is valid).
func (n *Node) createReservation(ctx context.Context, req *fedschedv1.CreateReservationRequest, now int64) (*fedschedv1.CreateReservationResponse, error) {
	procs, displace := int(req.GetProcs()), req.GetDisplace()
	start, end := req.GetStart().AsTime().Unix(), req.GetEnd().AsTime().Unix()
	if req.GetEverySeconds() == 0 && end <= now {
		return nil, fmt.Errorf("end %s is not after the site's time %s: %w", rfc(end), rfc(now), ErrInvalidReservation)
	}
	var (
		rule    *standingRes
		windows []plan.Window
	)
	if req.GetEverySeconds() > 0 {
		rule = newStanding(standingRecord(req))
		// The agent lays the other rules as far as the jobs reach.
		windows = n.agent.StandingWindows(now, rule.rule)
		n.applyOwn(now)
		n.displacedBy = nil // what laying them displaced is not this request's
	} else {
		windows = []plan.Window{{Start: start, End: end}}
	}
	// Nothing changes until every instance is known to fit.
	jobs := map[int64]bool{}
	var fixed []string
	for _, w := range windows {
		fixed = append(fixed, n.fixedInTheWay(procs, w)...)
		for _, id := range n.site.Conflicts(plan.FixedSpec{Procs: procs, Start: w.Start, End: w.End}) {
			jobs[id] = true
		}
	}
	c := n.classify(slices.Sorted(maps.Keys(jobs)))
	c.Displace = displace
	slices.SortFunc(fixed, compareIDs)
	c.Reservations = slices.Compact(fixed)
	if len(c.Reservations) > 0 || len(c.Running) > 0 || len(c.Held) > 0 || (len(c.Jobs) > 0 && !displace) {
		return nil, c
	}
	seq, err := n.deps.Store.NextSequence(ctx)
	if err != nil {
		return nil, fmt.Errorf("reservation id: %w: %w", ErrUnavailable, err)
	}
	id := reservationID(n.cfg.Site, seq)
	var displaced []*fedschedv1.DisplacedJob
	laid := map[int64]plan.Window{}
	if rule != nil {
		r := rule.rule
		r.Name = id
		if err := n.agent.AddStanding(now, r, displace); err != nil {
			return nil, fmt.Errorf("standing reservation %s: %w", id, err)
		}
		n.applyOwn(now)
		displaced, n.displacedBy = n.displacedBy, nil
		laid, _, _ = n.agent.Instances(id)
		windows = nil
	}
	for _, w := range windows {
		// A fixed one (a standing one was added above).
		spec := plan.FixedSpec{ID: n.resv.newCore(), Name: id, Procs: procs, Start: w.Start, End: w.End}
		core, err := n.agent.Reserve(now, spec, displace)
		if err != nil {
			return nil, fmt.Errorf("fixed reservation %s over [%s, %s): %w", id, rfc(w.Start), rfc(w.End), err)
		}
		n.applyOwn(now)
		displaced, n.displacedBy = append(displaced, n.displacedBy...), nil
		laid[core] = w
	}
	resp := &fedschedv1.CreateReservationResponse{Displaced: mergeDisplaced(displaced)}
	if rule != nil {
		rule.rec.ID, rule.rule.Name = id, id
		for core, w := range laid {
			n.addInstance(rule, core, w)
		}
		n.resv.rules[id] = rule
		rec := rule.rec
		n.pending.putStanding(id, &rec)
		resp.Reservation = n.standingMsg(rule, now)
		n.log.Info("standing reservation created", "reservation", id, "name", rule.rec.Name, "procs", procs, "every_s", req.GetEverySeconds(),
			"instances", len(laid), "displaced", len(resp.Displaced))
		return resp, nil
	}
	var core int64
	for c := range laid {
		core = c
	}
	f := &fixedRes{id: id, name: req.GetName(), procs: procs, start: start, end: end, core: core}
	n.resv.fixed[id] = f
	n.resv.byCore[core] = id
	n.resv.tidyAt = min(n.resv.tidyAt, end)
	n.pending.putRes(id, &store.ReservationRecord{ID: id, Procs: procs, Start: time.Unix(start, 0), End: time.Unix(end, 0), Fixed: true, Note: f.name})
	resp.Reservation = n.fixedMsg(f, now)
	n.log.Info("fixed reservation created", "reservation", id, "name", f.name, "procs", procs, "start", rfc(start), "end", rfc(end),
		"displaced", len(resp.Displaced))
	return resp, nil
}

// mergeDisplaced keeps one entry per job, in first-displaced order: its
// reservation before the first displacement and its fate after the last.
func mergeDisplaced(ds []*fedschedv1.DisplacedJob) []*fedschedv1.DisplacedJob {
	var out []*fedschedv1.DisplacedJob
	at := map[string]int{}
	for _, d := range ds {
		i, seen := at[d.GetJobId()]
		if !seen {
			at[d.GetJobId()] = len(out)
			out = append(out, d)
			continue
		}
		d.Previous = out[i].GetPrevious()
		out[i] = d
	}
	return out
}

// deleteReservation removes a reservation and every instance it holds.
func (n *Node) deleteReservation(id string, now int64) (*fedschedv1.FixedReservation, error) {
	r := &n.resv
	if f, ok := r.fixed[id]; ok && f.end > now {
		msg := n.fixedMsg(f, now)
		n.agent.Unreserve(now, f.core)
		n.applyOwn(now)
		delete(r.fixed, id)
		delete(r.byCore, f.core)
		n.pending.putRes(id, nil)
		n.log.Info("fixed reservation deleted", "reservation", id)
		return msg, nil
	}
	if i := slices.IndexFunc(r.unfit, func(f *fixedRes) bool { return f.id == id }); i >= 0 && r.unfit[i].end > now {
		// Not in the plan (the site restarted smaller): only its record
		// holds it, and a later restart would put it back.
		msg := n.unfitMsg(r.unfit[i], now)
		r.unfit = slices.Delete(r.unfit, i, i+1)
		n.pending.putRes(id, nil)
		n.log.Info("fixed reservation deleted (it was not in the plan)", "reservation", id)
		return msg, nil
	}
	if s, ok := r.rules[id]; ok && !s.over(now) {
		msg := n.standingMsg(s, now)
		for core := range s.inst {
			delete(r.byCore, core)
		}
		n.agent.RemoveStanding(now, id)
		n.applyOwn(now)
		delete(r.rules, id)
		n.pending.putStanding(id, nil)
		n.log.Info("standing reservation deleted", "reservation", id, "instances", len(s.inst))
		return msg, nil
	}
	return nil, fmt.Errorf("site %s has no reservation %q: %w", n.cfg.Site, id, ErrReservationNotFound)
}

// listReservations returns the reservations that are not over.
func (n *Node) listReservations(now int64) *fedschedv1.ListReservationsResponse {
	out := &fedschedv1.ListReservationsResponse{HorizonSeconds: n.resv.horizon}
	for _, f := range n.resv.fixed {
		if f.end > now {
			out.Reservations = append(out.Reservations, n.fixedMsg(f, now))
		}
	}
	for _, s := range n.resv.rules {
		if !s.over(now) {
			out.Reservations = append(out.Reservations, n.standingMsg(s, now))
		}
	}
	for _, f := range n.resv.unfit {
		if f.end > now {
			out.Reservations = append(out.Reservations, n.unfitMsg(f, now))
		}
	}
	slices.SortFunc(out.Reservations, func(a, b *fedschedv1.FixedReservation) int { return compareIDs(a.GetId(), b.GetId()) })
	return out
}

func (n *Node) fixedMsg(f *fixedRes, now int64) *fedschedv1.FixedReservation {
	m := &fedschedv1.FixedReservation{Id: f.id, Name: f.name, Procs: int32(f.procs), Start: toTime(f.start), End: toTime(f.end), Site: n.cfg.Site}
	if f.end > now {
		m.Instances = []*fedschedv1.TimeWindow{{Start: toTime(f.start), End: toTime(f.end)}}
	}
	return m
}

// unfitMsg describes a stored fixed reservation that is not in the plan:
// it holds nothing, and its problem says why.
func (n *Node) unfitMsg(f *fixedRes, now int64) *fedschedv1.FixedReservation {
	m := n.fixedMsg(f, now)
	m.Instances, m.Problem = nil, f.problem
	return m
}

func (n *Node) standingMsg(s *standingRes, now int64) *fedschedv1.FixedReservation {
	rec := s.rec
	m := &fedschedv1.FixedReservation{Id: rec.ID, Name: rec.Name, Procs: int32(rec.Procs), Start: toTime(rec.Start.Unix()), End: toTime(rec.End.Unix()),
		EverySeconds: rec.EverySeconds, Site: n.cfg.Site}
	if !rec.Until.IsZero() {
		m.Until = toTime(rec.Until.Unix())
	}
	for _, d := range rec.Weekdays {
		m.Weekdays = append(m.Weekdays, fromWeekday(d))
	}
	ws := slices.Collect(maps.Values(s.inst))
	slices.SortFunc(ws, func(a, b plan.Window) int { return cmp.Compare(a.Start, b.Start) })
	for _, w := range ws {
		if w.End > now {
			m.Instances = append(m.Instances, &fedschedv1.TimeWindow{Start: toTime(w.Start), End: toTime(w.End)})
		}
	}
	return m
}

// --- recovery ---------------------------------------------------------------

// recoverReservations puts the stored fixed reservations back into the
// plan, then the instances of the stored rules as far as the live jobs
// reach, before any job: jobs' reservations fit around them.
//
// The store holds fixed reservations only: a job's reservation is in the
// job's record. Earlier versions also wrote a reservation record per job,
// which nothing read back and every commit paid for (docs/PERFORMANCE.md,
// "Fewer pages per commit"); such records are deleted here, with the first
// commit after the restart.
func (n *Node) recoverReservations(ctx context.Context, live []store.JobRecord, now int64) error {
	st := n.deps.Store
	recs, err := st.ListReservations(ctx)
	if err != nil {
		return err
	}
	r := &n.resv
	for _, rec := range recs {
		if !rec.Fixed {
			n.pending.putRes(rec.ID, nil)
			continue
		}
		start, end := rec.Start.Unix(), rec.End.Unix()
		if end <= now {
			n.pending.putRes(rec.ID, nil) // over while the node was down
			continue
		}
		f := &fixedRes{id: rec.ID, name: rec.Note, procs: rec.Procs, start: start, end: end, core: r.newCore()}
		if _, err := n.site.AddFixed(now, plan.FixedSpec{ID: f.core, Name: f.id, Procs: f.procs, Start: start, End: end}, false); err != nil {
			n.log.Warn("stored fixed reservation does not fit the recovered plan; kept in the store", "reservation", rec.ID, "err", err)
			f.problem = fmt.Sprintf("not in the plan since the restart: %v", err)
			if f.procs > n.procs {
				f.problem = fmt.Sprintf("not in the plan since the restart: it holds %d processors and the site now has %d", f.procs, n.procs)
			}
			r.unfit = append(r.unfit, f)
			r.tidyAt = min(r.tidyAt, end)
			continue
		}
		r.fixed[f.id] = f
		r.byCore[f.core] = f.id
		r.tidyAt = min(r.tidyAt, end)
	}
	rules, err := st.ListStanding(ctx)
	if err != nil {
		return err
	}
	for _, rec := range rules {
		s := newStanding(rec)
		if s.over(now) {
			n.pending.putStanding(rec.ID, nil)
			continue
		}
		r.rules[rec.ID] = s
	}
	reach := now
	for _, rec := range live {
		if res := rec.Job.GetReservation(); res != nil {
			reach = max(reach, res.GetEnd().AsTime().Unix())
		}
	}
	n.layStanding(now, reach)
	return nil
}

// unlayOver removes the laid instances of standing reservations that
// overlap w (for a running job found in their way at recovery) and reports
// whether it removed any.
func (n *Node) unlayOver(w plan.Window, now int64) bool {
	removed := false
	for _, s := range n.resv.rules {
		for core, iw := range s.inst {
			if iw.Start < w.End && w.Start < iw.End {
				n.site.RemoveFixed(now, core) //nolint:errcheck // laid at recovery
				delete(s.inst, core)
				delete(n.resv.byCore, core)
				s.skipped++
				removed = true
				n.log.Warn("instance of a standing reservation skipped: a running job holds its processors", "reservation", s.rec.ID,
					"start", rfc(iw.Start), "end", rfc(iw.End))
			}
		}
	}
	return removed
}

// --- ops and handlers -------------------------------------------------------

type reservationResult struct {
	create *fedschedv1.CreateReservationResponse
	list   *fedschedv1.ListReservationsResponse
	res    *fedschedv1.FixedReservation
	err    error
}

// reservationOp runs one reservation request on the loop: create (req),
// delete (id) or list.
type reservationOp struct {
	ctx   context.Context
	req   *fedschedv1.CreateReservationRequest
	id    string
	list  bool
	reply chan reservationResult
}

func (o *reservationOp) run(n *Node, now int64) func(error) {
	var res reservationResult
	switch {
	case o.req != nil:
		res.create, res.err = n.createReservation(o.ctx, o.req, now)
	case o.list:
		res.list = n.listReservations(now)
	default:
		res.res, res.err = n.deleteReservation(o.id, now)
	}
	return func(err error) {
		if err != nil && res.err == nil && !o.list {
			res = reservationResult{err: fmt.Errorf("storing the reservation failed: %w: %w", ErrUnavailable, err)}
		}
		o.reply <- res
	}
}

func (s *service) reservation(ctx context.Context, o *reservationOp) (reservationResult, error) {
	if err := s.ready(); err != nil {
		return reservationResult{}, err
	}
	o.reply = make(chan reservationResult, 1)
	if err := s.n.send(ctx, o); err != nil {
		return reservationResult{}, ToStatus(err)
	}
	res, err := await(ctx, s.n, o.reply)
	if err != nil {
		return reservationResult{}, ToStatus(err)
	}
	if res.err != nil {
		return reservationResult{}, ToStatus(res.err)
	}
	return res, nil
}

func (s *service) CreateReservation(ctx context.Context, req *fedschedv1.CreateReservationRequest) (*fedschedv1.CreateReservationResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if err := s.n.validateReservation(req, s.n.now()); err != nil {
		return nil, ToStatus(err)
	}
	res, err := s.reservation(ctx, &reservationOp{ctx: context.WithoutCancel(ctx), req: req})
	if err != nil {
		return nil, err
	}
	return res.create, nil
}

func (s *service) ListReservations(ctx context.Context, req *fedschedv1.ListReservationsRequest) (*fedschedv1.ListReservationsResponse, error) {
	if err := noUnknownFields(req); err != nil {
		return nil, ToStatus(err)
	}
	res, err := s.reservation(ctx, &reservationOp{list: true})
	if err != nil {
		return nil, err
	}
	return res.list, nil
}

func (s *service) DeleteReservation(ctx context.Context, req *fedschedv1.DeleteReservationRequest) (*fedschedv1.DeleteReservationResponse, error) {
	if req.GetReservationId() == "" {
		return nil, ToStatus(fmt.Errorf("reservation_id is required: %w", ErrInvalidRequest))
	}
	res, err := s.reservation(ctx, &reservationOp{id: req.GetReservationId()})
	if err != nil {
		return nil, err
	}
	return &fedschedv1.DeleteReservationResponse{Reservation: res.res}, nil
}
