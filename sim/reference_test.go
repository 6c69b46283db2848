package sim

import (
	"slices"
	"sort"

	"github.com/fedsched/fedsched/plan"
)

// refSim is a deliberately simple reference scheduler, written the textbook
// way with plain lists and no profile tree, to check the real core against.
// It returns each job's start time, by job index.
type refSim struct {
	procs int
	jobs  []Job
}

type refRun struct {
	idx      int
	start    int64
	estEnd   int64 // start + estimate: where the scheduler believes it ends
	realEnd  int64 // start + min(runtime, estimate)
	procs    int
	reserved bool
}

// reservations answers free-capacity questions by scanning every slot.
type reservations []refRun

func (rs reservations) free(procs int, t int64) int {
	f := procs
	for _, r := range rs {
		if r.start <= t && t < r.estEnd {
			f -= r.procs
		}
	}
	return f
}

func (rs reservations) fits(procs, q int, s, e int64) bool {
	if rs.free(procs, s) < q {
		return false
	}
	for _, r := range rs {
		for _, t := range []int64{r.start, r.estEnd} {
			if t > s && t < e && rs.free(procs, t) < q {
				return false
			}
		}
	}
	return true
}

func (rs reservations) earliest(procs, q int, d, on int64) int64 {
	cands := []int64{on}
	for _, r := range rs {
		if r.estEnd > on {
			cands = append(cands, r.estEnd)
		}
	}
	slices.Sort(cands)
	for _, s := range cands {
		if rs.fits(procs, q, s, s+d) {
			return s
		}
	}
	panic("no fit on an unbounded plan")
}

// run replays under policy and returns start times by job index.
func (rf refSim) run(policy plan.Policy) []int64 {
	starts := make([]int64, len(rf.jobs))
	var running reservations // running jobs (and, for conservative, waiting reservations)
	var queue []int          // waiting job indexes, submission order
	next := 0
	for {
		// Next event: a submission, an end, or (conservative) a reservation start.
		t := plan.Forever
		if next < len(rf.jobs) {
			t = rf.jobs[next].Submit
		}
		for _, r := range running {
			if r.reserved && r.start < t {
				t = r.start
			}
			if !r.reserved && r.realEnd < t {
				t = r.realEnd
			}
		}
		if t == plan.Forever {
			break
		}
		ended := false
		kept := running[:0]
		for _, r := range running {
			if !r.reserved && r.realEnd == t {
				ended = ended || r.realEnd < r.estEnd
				continue
			}
			kept = append(kept, r)
		}
		running = kept
		for next < len(rf.jobs) && rf.jobs[next].Submit == t {
			j := rf.jobs[next]
			if policy == plan.Conservative {
				s := running.earliest(rf.procs, j.Procs, j.Estimate, t)
				running = append(running, refRun{idx: next, start: s, estEnd: s + j.Estimate, procs: j.Procs, reserved: true})
			} else {
				queue = append(queue, next)
			}
			next++
		}
		switch policy {
		case plan.Conservative:
			if ended {
				// Take each waiting reservation out, in submission order,
				// and put it back at its earliest start.
				order := []int{}
				for i, r := range running {
					if r.reserved {
						order = append(order, i)
					}
				}
				sort.Slice(order, func(a, b int) bool { return running[order[a]].idx < running[order[b]].idx })
				for _, i := range order {
					r := running[i]
					others := append(append(reservations{}, running[:i]...), running[i+1:]...)
					s := others.earliest(rf.procs, r.procs, r.estEnd-r.start, t)
					if s < r.start {
						running[i].start, running[i].estEnd = s, s+(r.estEnd-r.start)
					}
				}
			}
			for i, r := range running {
				if r.reserved && r.start == t {
					j := rf.jobs[r.idx]
					running[i].reserved = false
					running[i].realEnd = t + min(j.Runtime, j.Estimate)
					starts[r.idx] = t
				}
			}
		default:
			queue = rf.startQueued(t, policy, queue, &running, starts)
		}
	}
	return starts
}

// startQueued is textbook FCFS, LIST and EASY (shadow time and extra
// processors) over the running list.
func (rf refSim) startQueued(t int64, policy plan.Policy, queue []int, running *reservations, starts []int64) []int {
	start := func(i int) {
		j := rf.jobs[i]
		*running = append(*running, refRun{idx: i, start: t, estEnd: t + j.Estimate, realEnd: t + min(j.Runtime, j.Estimate), procs: j.Procs})
		starts[i] = t
	}
	for len(queue) > 0 && running.free(rf.procs, t) >= rf.jobs[queue[0]].Procs {
		start(queue[0])
		queue = queue[1:]
	}
	if len(queue) == 0 || policy == plan.FCFS {
		return queue
	}
	rest := []int{queue[0]}
	var shadow int64
	var extra int
	if policy == plan.EASY {
		head := rf.jobs[queue[0]]
		ends := slices.Clone(*running)
		sort.Slice(ends, func(a, b int) bool { return ends[a].estEnd < ends[b].estEnd })
		free := running.free(rf.procs, t)
		shadow = t
		for _, r := range ends {
			// Stop once the head fits, but count every job that ends at
			// the shadow time itself: they all free processors there.
			if free >= head.Procs && r.estEnd > shadow {
				break
			}
			free += r.procs
			shadow = r.estEnd
		}
		extra = free - head.Procs
	}
	for _, i := range queue[1:] {
		j := rf.jobs[i]
		free := running.free(rf.procs, t)
		ok := j.Procs <= free
		if ok && policy == plan.EASY {
			switch {
			case t+j.Estimate <= shadow:
			case j.Procs <= extra:
				extra -= j.Procs
			default:
				ok = false
			}
		}
		if ok {
			start(i)
			continue
		}
		rest = append(rest, i)
	}
	return rest
}
