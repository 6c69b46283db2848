package plan

import (
	"cmp"
	"container/heap"
	"slices"
)

// Under Conservative every waiting job holds a reservation, and the per-event
// work of a driver (the node calls Pass and NextWake every turn, Placement
// and Cancel per job) must not grow with the queue. dueIndex indexes the
// waiting jobs by id and by reservation start, so that starting the due
// jobs, the next wake-up, a placement and a cancellation cost O(log n) per
// job they touch instead of a scan of the queue.
//
// The queue slice stays the order of record (submission order). Jobs that
// leave it through the index (started, cancelled) are marked dead and left
// in the slice; every path that walks the queue calls tidy first, and the
// slice is compacted once dead entries are half of it, so the walks see
// exactly the old queue and the compaction costs O(1) per removal. Paths
// that rewrite the queue wholesale (node failures, displacement by a fixed
// reservation, restores) drop the index; it is rebuilt from the queue the
// next time it is needed, in O(n), no more than those paths cost.
//
// A start recorded in the heap is valid while the job is still indexed and
// its reservation still starts there; reserve pushes a job again whenever
// its reservation changes, and stale records are dropped as they surface
// (and the heap is rebuilt when they outnumber the live ones).
type dueIndex struct {
	ok   bool
	byID map[int64]*entry
	h    dueHeap
	// movable are the jobs whose reservation starts after their release:
	// the only ones re-planning can move earlier under FullEstimate.
	movable map[*entry]struct{}
}

type dueRec struct {
	start int64
	e     *entry
}

type dueHeap []dueRec

func (h dueHeap) Len() int { return len(h) }
func (h dueHeap) Less(i, j int) bool {
	if h[i].start != h[j].start {
		return h[i].start < h[j].start
	}
	return h[i].e.pos < h[j].e.pos
}
func (h dueHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)   { *h = append(*h, x.(dueRec)) }
func (h *dueHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// indexed reports whether the site keeps the due index (Conservative),
// building it if a wholesale change of the queue dropped it.
func (s *Site) indexed() bool {
	if s.cfg.Policy != Conservative {
		return false
	}
	if !s.due.ok {
		s.tidy()
		d := &s.due
		d.byID = make(map[int64]*entry, len(s.waiting))
		d.movable = make(map[*entry]struct{})
		d.h = make(dueHeap, 0, len(s.waiting))
		for _, e := range s.waiting {
			d.byID[e.job.ID] = e
			d.h = append(d.h, dueRec{start: e.place.Start, e: e})
			d.noteMove(e)
		}
		heap.Init(&d.h)
		d.ok = true
	}
	return true
}

// dropIndex forgets the index after a wholesale change of the queue.
func (s *Site) dropIndex() {
	s.due = dueIndex{}
}

// appendWaiting adds e at the end of the queue.
func (s *Site) appendWaiting(e *entry) {
	s.npos++
	e.pos = s.npos
	s.noteWake(e)
	s.waiting = append(s.waiting, e)
	if s.due.ok {
		s.due.byID[e.job.ID] = e
		heap.Push(&s.due.h, dueRec{start: e.place.Start, e: e})
		s.due.noteMove(e)
	}
}

// replaced records that waiting job e now has a new reservation.
func (s *Site) replaced(e *entry) {
	d := &s.due
	if !d.ok || d.byID[e.job.ID] != e {
		return
	}
	heap.Push(&d.h, dueRec{start: e.place.Start, e: e})
	d.noteMove(e)
	if len(d.h) > 2*len(d.byID)+64 {
		d.h = d.h[:0]
		for _, e := range d.byID {
			d.h = append(d.h, dueRec{start: e.place.Start, e: e})
		}
		heap.Init(&d.h)
	}
}

func (d *dueIndex) noteMove(e *entry) {
	if e.place.Start > e.job.Release {
		d.movable[e] = struct{}{}
	} else {
		delete(d.movable, e)
	}
}

func (d *dueIndex) valid(r dueRec) bool {
	return d.byID[r.e.job.ID] == r.e && r.e.place.Start == r.start
}

// unqueue takes indexed waiting job e out of the queue: it stays in the
// slice, dead, until the next tidy.
func (s *Site) unqueue(e *entry) {
	delete(s.due.byID, e.job.ID)
	delete(s.due.movable, e)
	e.dead = true
	s.dead++
	if s.dead > len(s.waiting)/2 {
		s.tidy()
	}
}

// tidy drops the dead entries from the queue slice.
func (s *Site) tidy() {
	if s.dead == 0 {
		return
	}
	s.waiting = slices.DeleteFunc(s.waiting, func(e *entry) bool { return e.dead })
	s.dead = 0
}

// startDueIndexed starts, in queue order, every waiting reservation that
// begins at or before now.
func (s *Site) startDueIndexed(now int64) {
	d := &s.due
	due := s.short[:0]
	for len(d.h) > 0 && d.h[0].start <= now {
		r := heap.Pop(&d.h).(dueRec)
		if d.valid(r) {
			due = append(due, r.e)
			s.unqueue(r.e)
		}
	}
	slices.SortFunc(due, func(a, b *entry) int { return cmp.Compare(a.pos, b.pos) })
	for _, e := range due {
		s.start(e)
	}
	clear(due)
	s.short = due[:0]
}

// nextStart is the earliest start after now of a waiting reservation, or
// Forever.
func (s *Site) nextStart(now int64) int64 {
	d := &s.due
	var early []dueRec // valid starts at or before now: not yet started
	t := Forever
	for len(d.h) > 0 {
		r := d.h[0]
		if !d.valid(r) {
			heap.Pop(&d.h)
			continue
		}
		if r.start > now {
			t = r.start
			break
		}
		early = append(early, heap.Pop(&d.h).(dueRec))
	}
	for _, r := range early {
		heap.Push(&d.h, r)
	}
	return t
}

// movableInOrder lists the waiting jobs that re-planning may move earlier
// under FullEstimate, in queue order.
func (s *Site) movableInOrder() []*entry {
	out := make([]*entry, 0, len(s.due.movable))
	for e := range s.due.movable {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b *entry) int { return cmp.Compare(a.pos, b.pos) })
	return out
}
