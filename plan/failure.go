package plan

import (
	"cmp"
	"slices"
)

// downIDBase is where the ids of failed-processor reservations start; they
// count down from it, far from job ids and from fixed reservations' ids.
const downIDBase int64 = -1 << 52

// NodeDown takes one processor out of service at now (a node failure). pick
// chooses which, in a canonical order so that a driver's random draw decides
// it deterministically: processors [0, busy) belong to the running jobs in
// submission order, each holding as many as its procs; [busy, up) are idle.
//
// The job running on the processor, if any, is stopped: it leaves the core
// and hit names it (the driver kills it and settles or resubmits it; 0 if
// the processor was idle). The processor is then held by a fixed
// reservation until NodeUp. Waiting reservations that no longer fit are
// taken out and placed again from now inside their windows by the
// admission test; lost lists those that could not be (the driver settles
// their SLAs as violated: the provider failed them).
func (s *Site) NodeDown(now int64, pick int) (hit int64, lost []int64) {
	running := make([]*entry, 0, len(s.running))
	for _, e := range s.running {
		running = append(running, e)
	}
	slices.SortFunc(running, func(a, b *entry) int { return cmp.Compare(a.seq, b.seq) })
	cum := 0
	for _, e := range running {
		cum += e.job.Procs
		if pick < cum {
			hit = e.job.ID
			delete(s.running, hit)
			s.plan.Release(hit) //nolint:errcheck // running jobs hold a reservation
			s.dirty = true
			break
		}
	}
	s.downs++
	id := downIDBase - s.downs
	down := Reservation{ID: id, Procs: 1, Start: now, End: Forever, Release: now, Deadline: Forever, Fixed: true}
	if s.plan.Reserve(down) != nil {
		// Waiting reservations stand in the way: take them all out, hold
		// the processor, and place them again, in submission order.
		s.tidy()
		out := make([]*entry, 0, len(s.waiting))
		for _, e := range s.waiting {
			if _, err := s.plan.Release(e.job.ID); err == nil {
				out = append(out, e)
			}
		}
		if s.plan.Reserve(down) != nil {
			// Only fixed reservations and holds are left, and they take
			// every processor: the failure cannot be represented; put the
			// jobs back where they were.
			for _, e := range out {
				s.reserve(e, e.place) //nolint:errcheck // their slots were free a moment ago
			}
			s.downs--
			return hit, nil
		}
		keep := s.waiting[:0]
		for _, e := range s.waiting {
			if !slices.Contains(out, e) {
				keep = append(keep, e)
				continue
			}
			pl := s.adm.Admit(s.plan, &e.job, now)
			if !pl.OK() || s.reserve(e, pl) != nil {
				lost = append(lost, e.job.ID)
				continue
			}
			if s.cfg.TrackMoves {
				s.moved = append(s.moved, e.job.ID)
			}
			keep = append(keep, e)
		}
		clear(s.waiting[len(keep):])
		s.waiting = keep
		s.dropIndex()
	}
	s.down = append(s.down, id)
	return hit, lost
}

// NodeUp returns the longest-failed processor to service at now; later
// reservations may then move earlier at the next pass. It reports false if
// no processor is down.
func (s *Site) NodeUp(now int64) bool {
	if len(s.down) == 0 {
		return false
	}
	id := s.down[0]
	s.down = s.down[1:]
	if _, err := s.plan.Release(id); err == nil {
		s.dirty = true
	}
	return true
}

// Down is the number of processors out of service.
func (s *Site) Down() int { return len(s.down) }

// Busy is the number of processors running jobs.
func (s *Site) Busy() int {
	b := 0
	for _, e := range s.running {
		b += e.job.Procs
	}
	return b
}
