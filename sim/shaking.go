package sim

import (
	"context"
	"fmt"
	"slices"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

// RunShaking replays a federation under the study's Shaking-G (Papaspyrou
// 2013, §5.3; Grimme et al. 2010), every site running EASY on its own
// queue (the study's reference), its broker holding the jobs that queue
// holds.
//
// Starting phase: a job submitted at site k that k can start now (see
// canStartNow) starts there; otherwise the other sites wide enough are
// asked, in site order, whether they can start it now, and the first that
// can takes it.
//
// Shaking phase, once, when the job j stays queued at k: k joins the
// shaking pool; for each job l queued before j at k, in queue order, every
// site not in the pool and wide enough is asked for l's expected completion
// time (ECT: the completion of l appended to that site's virtual schedule,
// vsched); if one beats l's ECT at k, l moves to the one with the smallest.
// If none does, each such candidate s is shaken: its queued jobs are
// offered, in queue order and in the same way, to the sites outside the
// pool and s, and each moves where its ECT improves; if that gives l an ECT
// at s below its ECT at k, that plan is a candidate. The candidate plan that
// gives l the smallest ECT is carried out, and every candidate shaken joins
// the pool (it is not shaken again for j). Every plan moves l out of k, so
// each reduces j's ECT at k by the same amount, the study's criterion; the
// smallest ECT for l breaks the tie.
//
// Recursion goes at most one level deep (cfg.Depth 2, the default): a
// candidate's jobs move only where their ECT improves directly. With three
// sites that is the whole search (the pool then holds every site); with
// more it is a depth limit of 2 (the study used none). Depth 1 makes only
// direct moves, depth 0 skips the shaking phase.
//
// Event order at each time t: ends at every site, then an EASY pass at
// every site over its queue, then submissions (site order, then each site's
// job order), then an EASY pass again (a job moved by shaking may start at
// once); repeated at t while jobs with a zero runtime end.
func RunShaking(ctx context.Context, sites []FedSite, cfg ShakingConfig) (*FedResult, error) {
	if cfg.Depth < 0 || cfg.Depth > DefaultShakingDepth {
		return nil, fmt.Errorf("shaking-g: depth %d: want 0, 1 or 2: %w", cfg.Depth, ErrBadConfig)
	}
	res, ps, subs, err := studyRecords("shaking-g", sites)
	if err != nil {
		return nil, err
	}
	r := shakingRun{poolRun: poolRun{pol: plan.EASY, res: res, sites: ps}, depth: cfg.Depth}
	err = r.replay(ctx, "shaking-g", subs, func(t int64, due []fedSubmit) {
		r.easyLocal(t)
		for _, sub := range due {
			r.submit(t, sub.site, sub.idx)
		}
		r.easyLocal(t)
	})
	if err != nil {
		return nil, err
	}
	// Every queue drains once nothing runs: a queued job fits its site.
	return res, nil
}

// ShakingConfig configures Shaking-G (RunShaking).
type ShakingConfig struct {
	// Depth limits the search: 0 no shaking phase (the starting phase
	// alone), 1 direct moves only, 2 one level of shaking at the
	// candidates (DefaultShakingDepth; the whole search with three sites).
	Depth int
}

// DefaultShakingDepth is the deepest search implemented.
const DefaultShakingDepth = 2

type shakingRun struct {
	poolRun
	depth  int
	inPool []bool // the shaking pool of the current shake
}

// move is one job's migration in a shaking plan.
type move struct {
	job      int32
	from, to int
}

func (r *shakingRun) submit(t int64, k int, i int32) {
	f := &r.res.Records[i]
	if r.canStartNow(t, k, i) {
		r.start(t, k, i)
		return
	}
	for l := range r.sites {
		if l != k && r.sites[l].procs >= f.Procs && r.canStartNow(t, l, i) {
			r.migrate(t, move{job: i, from: k, to: l}, "shaking-g: starts now")
			r.start(t, l, i)
			return
		}
	}
	r.sites[k].local = append(r.sites[k].local, i)
	if r.depth > 0 {
		r.shake(t, k, i)
	}
}

// shake is the shaking phase for job j, just queued at site k.
func (r *shakingRun) shake(t int64, k int, j int32) {
	recs := r.res.Records
	r.inPool = slices.Grow(r.inPool[:0], len(r.sites))[:len(r.sites)]
	clear(r.inPool)
	r.inPool[k] = true
	s := &r.sites[k]
	closure := slices.Clone(s.local[:len(s.local)-1]) // j is last
	var ectsK []int64
	dirty := true
	for _, l := range closure {
		if !slices.Contains(r.inPool, false) {
			return // every site is in the pool: nowhere left to ask
		}
		if dirty {
			_, ectsK = s.virtual(t, recs, s.local)
			dirty = false
		}
		pos := slices.Index(s.local, l)
		local := ectsK[pos]
		best, bestECT := -1, local
		for u := range r.sites {
			if r.inPool[u] || r.sites[u].procs < recs[l].Procs {
				continue
			}
			v, _ := r.sites[u].virtual(t, recs, r.sites[u].local)
			if e := v.ect(recs[l].Procs, recs[l].Estimate); e < bestECT {
				best, bestECT = u, e
			}
		}
		if best >= 0 {
			r.migrate(t, move{job: l, from: k, to: best}, "shaking-g: smaller expected completion")
			dirty = true
			continue
		}
		if r.depth < 2 {
			continue
		}
		// Shake the candidates: can moving their queued jobs away give l
		// a better ECT there?
		var plan []move
		for u := range r.sites {
			if r.inPool[u] || r.sites[u].procs < recs[l].Procs {
				continue
			}
			moves, e := r.planAt(t, u, l)
			if e < bestECT {
				best, bestECT, plan = u, e, moves
			}
		}
		for u := range r.sites {
			if !r.inPool[u] && r.sites[u].procs >= recs[l].Procs {
				r.inPool[u] = true // shaken: not shaken again for j
			}
		}
		if best < 0 {
			continue
		}
		for _, m := range plan {
			r.migrate(t, m, "shaking-g: shaken to make room")
		}
		r.migrate(t, move{job: l, from: k, to: best}, "shaking-g: smaller expected completion after shaking")
		dirty = true
	}
}

// planAt shakes candidate site u for job l: it moves u's queued jobs, in
// queue order, to the sites outside the pool (and u) where their ECT
// improves, on copies of the queues, and returns those moves with l's ECT
// appended at u afterwards.
func (r *shakingRun) planAt(t int64, u int, l int32) ([]move, int64) {
	recs := r.res.Records
	queues := map[int][]int32{u: slices.Clone(r.sites[u].local)}
	queue := func(x int) []int32 {
		if q, ok := queues[x]; ok {
			return q
		}
		return r.sites[x].local
	}
	var moves []move
	for _, x := range r.sites[u].local {
		q := queues[u]
		_, ects := r.sites[u].virtual(t, recs, q)
		pos := slices.Index(q, x)
		best, bestECT := -1, ects[pos]
		for w := range r.sites {
			if w == u || r.inPool[w] || r.sites[w].procs < recs[x].Procs {
				continue
			}
			v, _ := r.sites[w].virtual(t, recs, queue(w))
			if e := v.ect(recs[x].Procs, recs[x].Estimate); e < bestECT {
				best, bestECT = w, e
			}
		}
		if best < 0 {
			continue
		}
		moves = append(moves, move{job: x, from: u, to: best})
		queues[u] = slices.Delete(q, pos, pos+1)
		queues[best] = append(slices.Clone(queue(best)), x)
	}
	v, _ := r.sites[u].virtual(t, recs, queues[u])
	return moves, v.ect(recs[l].Procs, recs[l].Estimate)
}

// migrate moves job m.job from the queue of m.from (if it is there) to the
// end of the queue of m.to, and records the hop.
func (r *shakingRun) migrate(t int64, m move, why string) {
	from := &r.sites[m.from]
	if p := slices.Index(from.local, m.job); p >= 0 {
		from.local = slices.Delete(from.local, p, p+1)
		r.sites[m.to].local = append(r.sites[m.to].local, m.job)
	}
	f := &r.res.Records[m.job]
	f.Route = f.Route.With(delegation.Hop{Site: r.res.Sites[m.to].Name, Action: delegation.ActionDelegated, At: t, Reason: why})
}
