package sim

import (
	"context"
	"fmt"
	"slices"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

// CentralMode is how much control the federation study's central active
// coordinator has (Papaspyrou 2013, §5.2).
type CentralMode int

const (
	// CentralFull: the coordinator sees every site's queue and schedule
	// and the sites cannot decline. Every job goes to the coordinator on
	// arrival and is dispatched at once (it keeps no queue): by BestFit to
	// the site where it leaves the fewest processors idle among the sites
	// that can start it now, or, if none can, to the site that would
	// complete it first (the ECT of Shaking-G's virtual schedule), at the
	// end of whose queue it waits.
	CentralFull CentralMode = iota + 1
	// CentralSERF: no control. The coordinator knows only each site's
	// size. A site starts a new job itself if its EASY would start it now,
	// and delegates it to the coordinator otherwise. The coordinator keeps
	// delegated jobs in a private buffer (first come, first served) and
	// offers each, at every event, to the sites in ascending order of
	// AWWT^d_{k,l} (Eq. 5.1: the average weighted wait of the jobs the
	// coordinator already placed from the job's origin k at site l);
	// a site accepts only a job it can start now.
	CentralSERF
)

func (m CentralMode) String() string {
	switch m {
	case CentralFull:
		return "central-full"
	case CentralSERF:
		return "serf"
	}
	return fmt.Sprintf("CentralMode(%d)", int(m))
}

// CentralConfig configures a federation run by a central active
// coordinator (RunCentral).
type CentralConfig struct {
	Mode CentralMode
}

// RunCentral replays a federation under the study's central active
// coordinator (§5.2), every site running EASY on its own queue. A site
// "can start a job now" if it has the processors free and either its queue
// is empty or the job passes EASY's backfilling test against its queue
// head's reservation (it ends before the head's shadow time, or uses only
// processors the head leaves spare).
//
// Ties: BestFit and the earliest completion prefer the job's origin, then
// site order; SERF sorts sites with equal AWWT^d (a site that has received
// no job of the origin yet counts 0: the study does not say how it starts)
// by site order, the origin first.
//
// Event order at each time t: ends at every site, then an EASY pass at
// every site over its queue (site order), then submissions (site order,
// then each site's job order), then (SERF) the coordinator's buffer in
// order; repeated at t while jobs with a zero runtime end.
func RunCentral(ctx context.Context, sites []FedSite, cfg CentralConfig) (*FedResult, error) {
	if cfg.Mode != CentralFull && cfg.Mode != CentralSERF {
		return nil, fmt.Errorf("central: mode %v: want central-full or serf: %w", cfg.Mode, ErrBadConfig)
	}
	res, ps, subs, err := studyRecords("central", sites)
	if err != nil {
		return nil, err
	}
	n := len(sites)
	c := centralRun{poolRun: poolRun{pol: plan.EASY, res: res, sites: ps}, mode: cfg.Mode,
		wwt: make([][]float64, n), wsa: make([][]float64, n)}
	for k := range n {
		c.wwt[k], c.wsa[k] = make([]float64, n), make([]float64, n)
	}
	c.placed = make([]bool, len(res.Records))
	c.onEnd = c.learn
	next, events := 0, 0
	for next < len(subs) || len(c.ends) > 0 || len(c.buffer) > 0 {
		t := plan.Forever
		if next < len(subs) {
			t = subs[next].at
		}
		if len(c.ends) > 0 {
			t = min(t, c.ends[0].at)
		}
		if t == plan.Forever {
			// Only buffered jobs are left and nothing runs: every site is
			// idle, so every buffered job fits somewhere; unreachable.
			return nil, fmt.Errorf("central: %d jobs left in the coordinator's buffer with every site idle", len(c.buffer))
		}
		if events++; events&0x3ff == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("central: %w", err)
			}
		}
		c.endDue(t)
		for {
			c.easyLocal(t)
			for next < len(subs) && subs[next].at == t {
				c.submit(t, subs[next].site, subs[next].idx)
				next++
			}
			c.offerBuffer(t)
			if len(c.ends) == 0 || c.ends[0].at != t {
				break
			}
			c.endDue(t)
		}
	}
	return res, nil
}

type centralRun struct {
	poolRun
	mode   CentralMode
	buffer []int32 // the coordinator's private buffer, first come first served
	// wwt[k][l] and wsa[k][l] are the sums of SA_j*wait_j and SA_j over the
	// jobs of origin k the coordinator placed at l that have ended
	// (Eq. 5.1's numerator and denominator: SA_j needs p_j, known at the end).
	wwt, wsa [][]float64
	placed   []bool // placed by the coordinator: counts for AWWT^d
	order    []int  // scratch
}

func (c *centralRun) submit(t int64, k int, i int32) {
	f := &c.res.Records[i]
	if c.mode == CentralSERF {
		if c.canStartNow(t, k, i) {
			c.start(t, k, i)
			return
		}
		f.Route = f.Route.With(delegation.Hop{Site: "coordinator", Action: delegation.ActionDelegated, At: t,
			Reason: "cannot start now at its site"})
		c.buffer = append(c.buffer, i)
		return
	}
	// Full control: BestFit among the sites that can start it now.
	best, left := -1, 0
	for _, l := range c.originFirst(f.Origin) {
		if c.sites[l].procs < f.Procs || !c.canStartNow(t, l, i) {
			continue
		}
		if idle := c.sites[l].free - f.Procs; best < 0 || idle < left {
			best, left = l, idle
		}
	}
	if best >= 0 {
		c.hop(t, i, best, "best fit: starts now")
		c.start(t, best, i)
		return
	}
	// No site can start it now: the one that completes it first.
	var bestECT int64
	for _, l := range c.originFirst(f.Origin) {
		if c.sites[l].procs < f.Procs {
			continue
		}
		v, _ := c.sites[l].virtual(t, c.res.Records, c.sites[l].local)
		if e := v.ect(f.Procs, f.Estimate); best < 0 || e < bestECT {
			best, bestECT = l, e
		}
	}
	c.hop(t, i, best, "earliest expected completion")
	c.sites[best].local = append(c.sites[best].local, i)
}

// offerBuffer offers every buffered job, in order, to the sites in SERF
// order; the first that can start it now does.
func (c *centralRun) offerBuffer(t int64) {
	if len(c.buffer) == 0 {
		return
	}
	kept := c.buffer[:0]
	for _, i := range c.buffer {
		f := &c.res.Records[i]
		placed := false
		for _, l := range c.serfOrder(f.Origin) {
			if c.sites[l].procs >= f.Procs && c.canStartNow(t, l, i) {
				c.hop(t, i, l, "coordinator: smallest expected response first")
				c.placed[i] = true
				c.start(t, l, i)
				placed = true
				break
			}
		}
		if !placed {
			kept = append(kept, i)
		}
	}
	c.buffer = kept
}

// serfOrder is the sites in ascending order of AWWT^d from origin k (the
// origin first among equals, then site order).
func (c *centralRun) serfOrder(k int) []int {
	c.order = c.originFirst(k)
	awwt := func(l int) float64 {
		if c.wsa[k][l] == 0 {
			return 0
		}
		return c.wwt[k][l] / c.wsa[k][l]
	}
	slices.SortStableFunc(c.order, func(a, b int) int {
		switch x, y := awwt(a), awwt(b); {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	return c.order
}

// originFirst is the sites, the origin k first, then the others in site
// order.
func (c *centralRun) originFirst(k int) []int {
	c.order = append(c.order[:0], k)
	for l := range c.sites {
		if l != k {
			c.order = append(c.order, l)
		}
	}
	return c.order
}

// learn adds a job the coordinator placed to AWWT^d once it has ended.
func (c *centralRun) learn(i int32) {
	if !c.placed[i] {
		return
	}
	f := &c.res.Records[i]
	sa := float64(f.Procs) * float64(f.Ran())
	c.wwt[f.Origin][f.Exec] += sa * float64(f.Start-f.Submit)
	c.wsa[f.Origin][f.Exec] += sa
}

// hop records that job i goes to site l (nothing if l is its origin and it
// has not left it).
func (c *centralRun) hop(t int64, i int32, l int, why string) {
	f := &c.res.Records[i]
	if l == f.Origin && len(f.Route) == 1 {
		return
	}
	f.Route = f.Route.With(delegation.Hop{Site: c.res.Sites[l].Name, Action: delegation.ActionDelegated, At: t, Reason: why})
}
