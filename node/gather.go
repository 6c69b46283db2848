package node

import (
	"context"
	"time"
)

// maxGatherWait bounds how long a turn waits for the clients of the last
// commit to send their next request.
const maxGatherWait = time.Millisecond

// When more than maxMisses of the recent waits ran out before their
// target arrived, the requests do not come back in step with the commits
// (independent submitters, clients that think between requests), and
// waiting only delays the requests a turn holds: a turn then waits only
// once in probeEvery, to notice when clients come back in step again.
const (
	maxMisses  = 0.5
	probeEvery = 8
)

// groupCommit lets a turn wait, briefly, for the requests its commit could
// carry. Without it, clients that each keep one request in flight split
// into two groups that alternate between commits: while one commit is
// fsynced, the clients it answers wait for it and the others queue for the
// next, so each commit carries about half of them (docs/PERFORMANCE.md,
// "Group commit"). A turn that starts with fewer requests than the last
// commit answered plus those that queued while it ran waits for the rest.
//
// How long: the answered clients come back over a spread of time set by
// their round trips (gRPC, the scheduler of a loaded machine), not by the
// commit. A gather that saw its target arrive measures how long it waited
// for it; the wait is the smoothed spread plus four times its smoothed
// deviation (the rule of TCP's retransmission timer, RFC 6298), or half
// the last commit's time if that is longer, and never more than
// maxGatherWait. A client alone (1 answered, 0 queued) never waits;
// clients that do not come back in time lose at most the wait; and when
// most waits run out (maxMisses), turns stop waiting but for a probe. A
// wait that runs out while the process has nothing else to do lasts about
// 1 ms whatever its length: Go's runtime then sleeps in epoll_wait, whose
// timeout is in milliseconds (docs/PERFORMANCE.md, "The gather, tuned for
// the log").
//
// Owned by the loop goroutine.
type groupCommit struct {
	limit  time.Duration // the longest wait (maxGatherWait; tests lengthen it)
	target int           // requests expected for the next commit
	wait   time.Duration // how long to wait for them
	spread time.Duration // smoothed time the gathers that saw their target waited
	dev    time.Duration // smoothed deviation of that time
	misses float64       // smoothed share of waits that ran out
	probe  int           // waits skipped since the last, while misses > maxMisses
	wrote  bool          // this turn's commits wrote to the store
	dur    time.Duration // how long those writes took
	waited bool          // this turn's gather waited
	full   bool          // and its target arrived
	used   time.Duration // how long it waited (deciding excluded)
}

// turn starts a turn, before its requests are decided and gathered.
func (g *groupCommit) turn() { g.wrote, g.dur, g.waited = false, 0, false }

// applied records a store commit of the turn that wrote changes.
func (g *groupCommit) applied(d time.Duration) { g.wrote, g.dur = true, g.dur+d }

// answered records that the turn's replies went out with its durable
// changes: n requests were answered, and queued more were already waiting
// for the next turn. A turn that wrote nothing sets no target: there was no
// fsync to share.
func (g *groupCommit) answered(n, queued int) {
	if g.waited {
		miss := 1.0
		if g.full {
			miss = 0
			e := g.used - g.spread
			g.spread += e / 8
			g.dev += (max(e, -e) - g.dev) / 4
		}
		g.misses += (miss - g.misses) / 8
	}
	if !g.wrote {
		g.target, g.wait = 0, 0
		return
	}
	g.target, g.wait = min(n+queued, maxBatch), min(max(g.dur/2, g.spread+4*g.dev), g.limit)
}

// gather adds to batch the requests that arrive on ops until it holds the
// target or the wait is over, and hands each to decide as it arrives: the
// turn decides the first requests while the last are still on their way
// (in DurableSubmit, the 8 clients' requests arrive over ~90 µs, and
// deciding one takes ~10 µs). The time spent deciding does not count
// against the wait.
func (g *groupCommit) gather(ctx context.Context, ops <-chan op, batch []op, decide func(op)) []op {
	if len(batch) >= g.target || g.wait <= 0 {
		return batch
	}
	if g.misses > maxMisses {
		if g.probe++; g.probe < probeEvery {
			return batch
		}
		g.probe = 0
	}
	start := time.Now()
	deadline := start.Add(g.wait)
	var deciding time.Duration
	defer func() {
		g.waited, g.full = true, len(batch) >= g.target
		g.used = min(time.Since(start)-deciding, g.wait)
	}()
	t := time.NewTimer(g.wait)
	defer t.Stop()
	for len(batch) < g.target {
		select {
		case o := <-ops:
			batch = append(batch, o)
			t0 := time.Now()
			decide(o)
			d := time.Since(t0)
			deciding += d
			deadline = deadline.Add(d)
			t.Reset(time.Until(deadline))
		case <-t.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}
