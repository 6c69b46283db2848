package plan

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
)

// Config configures a Site.
type Config struct {
	// Procs is the number of identical processors. Must be > 0.
	Procs int
	// Policy is the queue policy. The zero value is Conservative.
	Policy Policy
	// Admission places jobs under Conservative. Nil means FullEstimate.
	Admission Admission
	// KeepUntilEstimate keeps a job's processors reserved until the end of
	// its reservation even when it ends early, so early finishes are never
	// exploited. This is the thesis's conservative-backfilling baseline
	// (Birkenheuer 2012, §2.7); it turns off re-planning.
	KeepUntilEstimate bool
	// TrackMoves makes the site remember which waiting reservations
	// re-planning moved, for Moved. Drivers that store reservations set it.
	TrackMoves bool
	// NoGrowBack stops re-planning from extending the reservations of
	// overbooked jobs back towards their full estimate.
	NoGrowBack bool
	// Fixed lists fixed reservations the site holds from the start, as if
	// added with AddFixed (without displacement) before the first event.
	// NewSite fails if one is refused. Default: none.
	Fixed []FixedSpec
}

// DecisionKind is what a Decision tells the driver to do.
type DecisionKind int

// Decision kinds.
const (
	// Start the job now; kill it at End if it has not finished.
	DecideStart DecisionKind = iota
	// Extend a running job's kill time to End (an overbooked job grew back).
	DecideExtend
	// Expire a waiting job whose window has closed: under FCFS, EASY and
	// LIST (hard deadlines) it can no longer run its estimate before its
	// deadline. The core has dropped it; the driver ends it (its SLA is
	// violated: the provider accepted it and did not run it in time).
	DecideExpire
)

// Decision is an instruction of the core to its driver.
type Decision struct {
	Kind  DecisionKind
	JobID int64
	Start int64
	End   int64
}

type entry struct {
	job   Job
	place Placement
	seq   int64 // submission order
	pos   int64 // order of joining the queue (due.go)
	dead  bool  // left the queue through the due index, still in the slice (due.go)
}

// Site is the scheduling core of one site: a deterministic state machine
// that takes events (a job submitted, a job ended, time passing) in order
// and answers with decisions. It never reads a clock and never does I/O;
// the simulator and the node drive it with their own clocks.
//
// Event order at equal times is the driver's job: End every job that ended
// at t, then Submit the jobs released at t, then call Pass(t).
//
// A Site is not safe for concurrent use: one goroutine owns it.
type Site struct {
	cfg     Config
	adm     Admission
	plan    *Plan
	waiting []*entry // submission order; key order under EDF and LTTR (deadline.go)
	running map[int64]*entry
	ghosts  ghostHeap // reservations kept until their end (KeepUntilEstimate)
	seq     int64
	inOrder int64           // seq values handed out by paths that keep the queue in key order (deadline.go)
	dirty   bool            // a job ended early since the last pass: re-plan
	short   []*entry        // scratch: running jobs shorter than their estimate
	holds   map[int64]*hold // tentative reservations backing quotes (hold.go)
	moved   []int64         // waiting jobs whose reservation re-planning changed
	down    []int64         // reservations holding failed processors (failure.go)
	downs   int64           // failed-processor reservations made so far
	out     []Decision
	fixed   fixedSet // fixed reservations (fixed.go)
	// expireAt is a lower bound of the earliest time a waiting job's window
	// closes under a queue policy with hard deadlines (expire.go).
	expireAt int64
	// quietFrom: from then on, no job that joined the queue is released
	// later or has a window that closes later (noteWake).
	quietFrom int64
	// due indexes the waiting jobs by id and start under Conservative;
	// dead counts the entries of waiting that left the queue through it,
	// npos the entries that joined (due.go).
	due  dueIndex
	dead int
	npos int64
	// head keeps the head's earliest fit across passes (EASY, EDF, LTTR).
	head headFit
	// spare holds the entries of jobs that ended, for Submit to reuse
	// under the queue policies: there nothing keeps a pointer to an entry
	// once its job left the running set (Conservative's due index may
	// still hold stale ones, so it never reuses them).
	spare []*entry
}

// headFit is the earliest fit of a queue's head as last computed: the
// start (ok false: none) of procs processors for est seconds, from onOrAfter
// on, in the profile at version ver. Which job asked does not matter. The
// answer still holds while the profile is at ver and the time asked from
// has not passed start: the same walk from a later time up to start finds
// no earlier fit in the same profile. A reservation the pass admits beside
// the head's slot (headSlot.admits) takes processors only where the head
// leaves enough, so the head still fits at start and nothing earlier can
// open: the pass moves ver on with it (keep). Anything else that changes
// the profile (a job ending, a release, a failure, a fixed reservation)
// invalidates it.
type headFit struct {
	procs          int
	est, onOrAfter int64
	start          int64
	ok             bool
	ver            uint64
	valid          bool
}

// earliest returns j's earliest fit from onOrAfter on in prof, from the
// cache when it is current.
func (h *headFit) earliest(prof *Profile, j *Job, onOrAfter int64) (int64, bool) {
	if h.valid && h.ver == prof.version && h.procs == j.Procs && h.est == j.Estimate &&
		h.onOrAfter <= onOrAfter && (!h.ok || onOrAfter <= h.start) {
		return h.start, h.ok
	}
	st, ok := prof.EarliestFit(j.Procs, j.Estimate, onOrAfter, Forever)
	*h = headFit{procs: j.Procs, est: j.Estimate, onOrAfter: onOrAfter, start: st, ok: ok, ver: prof.version, valid: true}
	return st, ok
}

// keep records that the profile changed from version was to its current
// one only by a reservation admitted beside the head's slot.
func (h *headFit) keep(prof *Profile, was uint64) {
	if h.valid && h.ver == was {
		h.ver = prof.version
	}
}

// NewSite returns the core of an empty site.
func NewSite(cfg Config) (*Site, error) {
	if cfg.Procs <= 0 {
		return nil, fmt.Errorf("site with %d processors: %w", cfg.Procs, ErrInvalid)
	}
	if cfg.Policy < Conservative || cfg.Policy > LTTR {
		return nil, fmt.Errorf("site policy %v: %w", cfg.Policy, ErrInvalid)
	}
	adm := cfg.Admission
	if adm == nil {
		adm = FullEstimate{}
	}
	s := &Site{cfg: cfg, adm: adm, plan: New(cfg.Procs), running: make(map[int64]*entry), expireAt: Forever, quietFrom: Never}
	for _, f := range cfg.Fixed {
		if _, err := s.AddFixed(Never, f, false); err != nil {
			return nil, fmt.Errorf("site: %w", err)
		}
	}
	return s, nil
}

// Plan returns the site's plan. Callers must not modify it.
func (s *Site) Plan() *Plan { return s.plan }

// Config returns the site's configuration.
func (s *Site) Config() Config { return s.cfg }

// Waiting is the number of accepted jobs that have not started.
func (s *Site) Waiting() int { return len(s.waiting) - s.dead }

// Running is the number of running jobs.
func (s *Site) Running() int { return len(s.running) }

// Submit offers job j at time now. Under Conservative the admission test
// places it or rejects it at once; the other policies queue it (or reject
// it if it can never run). The job must not be known to the site.
func (s *Site) Submit(now int64, j Job) Placement {
	switch {
	case j.Procs <= 0 || j.Estimate <= 0 || j.Deadline-max(now, j.Release) <= 0:
		return Placement{Reason: ReasonRejectedInvalid}
	case j.Procs > s.cfg.Procs:
		return Placement{Reason: ReasonRejectedTooWide}
	case s.cfg.Policy.hardQueue() && closed(&j, now):
		// Queued, it could only expire: its window is shorter than its
		// estimate.
		return Placement{Reason: ReasonRejectedNoGap}
	}
	s.seq++
	s.inOrder++
	e := s.newEntry(j)
	if s.cfg.Policy != Conservative {
		e.place = Placement{Reason: ReasonQueued}
		s.enqueue(e)
		return e.place
	}
	pl := s.adm.Admit(s.plan, &e.job, now)
	if !pl.OK() {
		return pl
	}
	if err := s.reserve(e, pl); err != nil {
		// The admission test broke its contract; refuse rather than corrupt.
		return Placement{Reason: ReasonRejectedNoGap}
	}
	s.appendWaiting(e)
	return pl
}

// newEntry returns an entry for j with the next sequence number (s.seq),
// reusing one of a job that ended if there is one.
func (s *Site) newEntry(j Job) *entry {
	if n := len(s.spare); n > 0 {
		e := s.spare[n-1]
		s.spare[n-1] = nil
		s.spare = s.spare[:n-1]
		*e = entry{job: j, seq: s.seq}
		return e
	}
	return &entry{job: j, seq: s.seq}
}

func (s *Site) reserve(e *entry, pl Placement) error {
	return s.reserveFitted(e, pl, false)
}

// reserveFitted is reserve; fitted says the caller has just checked that
// the processors are free over pl, so the plan need not check it again.
func (s *Site) reserveFitted(e *entry, pl Placement, fitted bool) error {
	err := s.plan.reserve(Reservation{ID: e.job.ID, Procs: e.job.Procs, Start: pl.Start, End: pl.End, Release: e.job.Release, Deadline: e.job.Deadline}, fitted)
	if err == nil {
		e.place = pl
		s.replaced(e)
	}
	return err
}

// End tells the core that job id stopped at now (finished, or was killed at
// the end of its reservation). Unknown ids are ignored and reported false.
func (s *Site) End(now int64, id int64) bool {
	e, ok := s.running[id]
	if !ok {
		return false
	}
	delete(s.running, id)
	if s.cfg.Policy != Conservative {
		*e = entry{}
		s.spare = append(s.spare, e)
	}
	r, _ := s.plan.Get(id)
	if s.cfg.KeepUntilEstimate && r.End > now {
		heap.Push(&s.ghosts, ghost{id: id, end: r.End})
		return true
	}
	if _, err := s.plan.Release(id); err == nil && r.End > now {
		s.dirty = true
	}
	return true
}

// Cancel removes a waiting job. It reports false if the job is not waiting.
func (s *Site) Cancel(now int64, id int64) bool {
	if s.indexed() {
		e := s.due.byID[id]
		if e == nil {
			return false
		}
		s.unqueue(e)
		if _, err := s.plan.Release(id); err == nil {
			s.dirty = true
		}
		return true
	}
	for i, e := range s.waiting {
		if e.job.ID == id {
			s.waiting = append(s.waiting[:i], s.waiting[i+1:]...)
			if _, err := s.plan.Release(id); err == nil {
				s.dirty = true
			}
			return true
		}
	}
	return false
}

// Pass runs the scheduling pass at now and returns the decisions: jobs to
// start and kill times to extend. The returned slice is valid until the next
// call.
//
// Stages, in order: drop kept and fixed reservations that have run out;
// re-plan if a job ended early (Conservative), never moving a fixed
// reservation; start what is due (all policies).
func (s *Site) Pass(now int64) []Decision {
	s.out = s.out[:0]
	s.fixed.expire(s.plan, now)
	s.expireHolds(now)
	for len(s.ghosts) > 0 && s.ghosts[0].end <= now {
		g := heap.Pop(&s.ghosts).(ghost)
		s.plan.Release(g.id) //nolint:errcheck // ghosts are in the plan by construction
	}
	switch s.cfg.Policy {
	case Conservative:
		if s.dirty && !s.cfg.KeepUntilEstimate {
			s.replan(now)
		}
		s.startDue(now)
	case FCFS:
		s.expireQueued(now)
		s.startQueued(now, false, false, false)
	case EASY:
		s.expireQueued(now)
		s.startQueued(now, true, true, false)
	case LIST:
		s.expireQueued(now)
		s.startQueued(now, true, false, false)
	case EDF, LTTR:
		s.sortQueue()
		s.startQueued(now, true, true, true)
	}
	s.dirty = false
	return s.out
}

// replan moves waiting reservations earlier, one at a time in submission
// order, each to its earliest feasible slot while all others stay where
// they are; then lets running overbooked jobs grow back.
func (s *Site) replan(now int64) {
	prof := s.plan.prof
	var queue []*entry
	if _, plain := s.adm.(FullEstimate); plain && s.indexed() && len(s.due.movable) < (len(s.waiting)-s.dead)/4 {
		// Under FullEstimate a job whose reservation starts at its
		// release can never move earlier (canMoveEarlier below says no
		// to it): walk only the others.
		queue = s.movableInOrder()
	} else {
		s.tidy()
		queue = s.waiting
	}
	_, plain := s.adm.(FullEstimate)
	// The free count now changes only when a reservation moves; it is read
	// again then, not for every waiting job.
	freeNow := prof.Free(now)
	for _, e := range queue {
		cur := e.place
		full := cur.End-cur.Start >= e.job.Estimate
		// A reservation can only move earlier if at least its processors
		// are free somewhere before its start: skip it cheaply otherwise.
		if full && freeNow < e.job.Procs && prof.firstAfter(now, int32(e.job.Procs), true) >= cur.Start {
			continue
		}
		if plain && !s.canMoveEarlier(e, now) {
			continue
		}
		if _, err := s.plan.Release(e.job.ID); err != nil {
			continue
		}
		// FullEstimate's Replan returns an earliest fit in the plan as it
		// is: the plan need not check that it fits.
		pl := s.adm.Replan(s.plan, &e.job, now, cur)
		if !pl.OK() || s.reserveFitted(e, pl, plain) != nil {
			s.reserveFitted(e, cur, true) //nolint:errcheck // cur was free a moment ago
		}
		freeNow = prof.Free(now)
		if s.cfg.TrackMoves && (e.place.Start != cur.Start || e.place.End != cur.End) {
			s.moved = append(s.moved, e.job.ID)
		}
	}
	if s.cfg.NoGrowBack {
		return
	}
	// Running jobs live in a map; grow the short ones back in submission
	// order so that the outcome never depends on map order.
	short := s.short[:0]
	for _, e := range s.running {
		if e.place.End-e.place.Start < e.job.Estimate {
			short = append(short, e)
		}
	}
	slices.SortFunc(short, func(a, b *entry) int { return cmp.Compare(a.seq, b.seq) })
	for _, e := range short {
		want := min(e.place.Start+e.job.Estimate, e.job.Deadline)
		to := s.plan.FreeUntil(e.job.Procs, e.place.End, want)
		if to > e.place.End && s.plan.Extend(e.job.ID, to) == nil {
			e.place.End = to
			s.out = append(s.out, Decision{Kind: DecideExtend, JobID: e.job.ID, Start: e.place.Start, End: to})
		}
	}
	clear(short)
	s.short = short[:0]
}

// canMoveEarlier reports whether waiting job e has a slot of its current
// length that starts earlier, found without taking its reservation out of
// the plan (two Adds per waiting job per re-plan otherwise). A slot that
// ends by the current start does not touch the job's own reservation; one
// that overlaps it needs, besides the job's own processors, only the second
// before the current start free.
func (s *Site) canMoveEarlier(e *entry, now int64) bool {
	cur := e.place
	from, _ := e.job.window(now)
	if cur.Start-1 < from {
		return false
	}
	if s.plan.prof.Free(cur.Start-1) >= e.job.Procs {
		return true
	}
	_, ok := s.plan.prof.EarliestFit(e.job.Procs, cur.End-cur.Start, from, cur.Start)
	return ok
}

// startDue starts every waiting reservation that begins at or before now.
func (s *Site) startDue(now int64) {
	if s.indexed() {
		s.startDueIndexed(now)
		return
	}
	k := 0
	for _, e := range s.waiting {
		if e.place.Start <= now {
			s.start(e)
			continue
		}
		s.waiting[k] = e
		k++
	}
	clear(s.waiting[k:])
	s.waiting = s.waiting[:k]
}

func (s *Site) start(e *entry) {
	s.running[e.job.ID] = e
	s.out = append(s.out, Decision{Kind: DecideStart, JobID: e.job.ID, Start: e.place.Start, End: e.place.End})
}

// startQueued runs the queue policies. The head starts while it fits now.
// If backfill, later jobs that fit now start too; if protectHead (EASY, EDF,
// LTTR), the head first gets a reservation at its earliest fit so that
// nobody who starts out of order can delay it. If soft (EDF, LTTR), the
// jobs' deadlines do not bound their reservations: a job that can no longer
// meet its deadline still starts.
func (s *Site) startQueued(now int64, backfill, protectHead, soft bool) {
	prof := s.plan.prof
	k := 0
	head := true
	var shadow headSlot // the head's protecting reservation, once placed
	var pending *entry  // head still to be protected by a reservation
	// The free count now changes only when a job starts or the head is
	// reserved; it is kept up to date then, not read for every waiting job.
	free := prof.Free(now)
	for i, e := range s.waiting {
		j := &e.job
		if free == 0 && !head {
			// Nothing can start; keep the rest as they are.
			k += keep(s.waiting, k, i)
			break
		}
		fits := j.Procs <= free && prof.fitsFrom(int32(j.Procs), now, now+j.Estimate)
		if fits && pending != nil {
			// The head's reservation only matters to a job that could
			// start now; most passes on a full machine have none, so it is
			// placed here, before the first, rather than after the head.
			shadow = s.protectHead(&pending.job, now)
			pending = nil
			if shadow.on && shadow.start <= now {
				free -= shadow.procs
			}
		}
		if fits && shadow.on {
			fits = j.Procs <= free && shadow.admits(prof, j.Procs, now, now+j.Estimate)
		}
		if fits {
			pl := Placement{Start: now, End: now + j.Estimate, Reason: ReasonPlacedInFull}
			was := prof.version
			var err error
			if soft {
				err = s.reserveSoft(e, pl, true)
			} else {
				err = s.reserveFitted(e, pl, true)
			}
			if err == nil {
				if shadow.on {
					// Admitted beside the head's slot: its earliest fit
					// stays where it is.
					s.head.keep(prof, was)
				}
				s.start(e)
				// Its reservation starts now: exactly its processors
				// are no longer free now.
				free -= j.Procs
				continue
			}
		}
		s.waiting[k] = e
		k++
		if head {
			head = false
			if !backfill {
				k += keep(s.waiting, k, i+1)
				break
			}
			if protectHead {
				pending = e
			}
		}
	}
	clear(s.waiting[k:])
	s.waiting = s.waiting[:k]
}

// headSlot is the reservation that protects the head of the queue under
// EASY, EDF and LTTR during one pass. It is never added to the profile
// (that would be an Add to place it and another to take it out, on every
// pass that backfills): a job fits beside it when it fits in the profile
// and, where the two overlap in time, also leaves the head's processors
// free. That is exactly the test the profile would answer with the head
// reserved in it.
type headSlot struct {
	on         bool
	start, end int64
	procs      int
}

// admits reports whether procs processors free throughout [start, end) in p
// stay free with the head's reservation laid over p as well. The caller has
// checked that they fit in p alone.
func (h headSlot) admits(p *Profile, procs int, start, end int64) bool {
	from, to := max(start, h.start), min(end, h.end)
	if from >= to {
		return true
	}
	return p.Fits(procs+h.procs, from, to)
}

// protectHead places the head job j's reservation at its earliest fit so
// that no job started out of order can delay it, and returns it (on false
// if it has none: no fit, or its id is already in the plan).
func (s *Site) protectHead(j *Job, now int64) headSlot {
	st, ok := s.head.earliest(s.plan.prof, j, max(now, j.Release))
	if !ok {
		return headSlot{}
	}
	r := Reservation{ID: j.ID, Procs: j.Procs, Start: st, End: st + j.Estimate, Release: j.Release, Deadline: Forever}
	if _, dup := s.plan.res[j.ID]; dup || s.plan.check(r) != nil {
		return headSlot{}
	}
	return headSlot{on: true, start: r.Start, end: r.End, procs: r.Procs}
}

// keep moves q[from:] to q[k:] and returns how many entries it kept; when
// nothing was removed before from (k == from) there is nothing to move.
func keep(q []*entry, k, from int) int {
	if k == from {
		return len(q) - from
	}
	return copy(q[k:], q[from:])
}

// NextWake returns the earliest time after now at which a pass may decide
// something new without any new event, or Forever: a reservation begins, a
// kept reservation runs out, a hold expires; under the queue policies with
// jobs waiting, a fixed reservation ends, a waiting job is released, or a
// waiting job's window closes (it expires).
func (s *Site) NextWake(now int64) int64 {
	t := Forever
	if s.indexed() {
		t = s.nextStart(now)
	} else {
		t = s.queueWake(now)
	}
	if len(s.ghosts) > 0 && s.ghosts[0].end < t {
		t = s.ghosts[0].end
	}
	// Queued jobs (no reservations) may be blocked only by a fixed
	// reservation; nothing else wakes the site when it ends.
	if s.cfg.Policy != Conservative && len(s.waiting) > 0 {
		t = min(t, s.fixed.nextEnd(now))
	}
	return min(t, s.nextHoldExpiry())
}

// Placement returns the placement of an accepted job that is waiting or
// running.
func (s *Site) Placement(id int64) (Placement, bool) {
	if e, ok := s.running[id]; ok {
		return e.place, true
	}
	if s.indexed() {
		if e := s.due.byID[id]; e != nil {
			return e.place, true
		}
		return Placement{}, false
	}
	for _, e := range s.waiting {
		if e.job.ID == id {
			return e.place, true
		}
	}
	return Placement{}, false
}

type ghost struct {
	id  int64
	end int64
}

type ghostHeap []ghost

func (h ghostHeap) Len() int { return len(h) }
func (h ghostHeap) Less(i, j int) bool {
	if h[i].end != h[j].end {
		return h[i].end < h[j].end
	}
	return h[i].id < h[j].id
}
func (h ghostHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *ghostHeap) Push(x any)   { *h = append(*h, x.(ghost)) }
func (h *ghostHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
