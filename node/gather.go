package node

import (
	"context"
	"time"
)

// maxGatherWait bounds how long a turn waits for the clients of the last
// commit to send their next request.
const maxGatherWait = time.Millisecond

// groupCommit lets a turn wait, briefly, for the requests its commit could
// carry. Without it, clients that each keep one request in flight split
// into two groups that alternate between commits: while one commit is
// fsynced, the clients it answers wait for it and the others queue for the
// next, so each commit carries about half of them (docs/PERFORMANCE.md,
// "Group commit"). A turn that starts with fewer requests than the last
// commit answered plus those that queued while it ran waits for the rest,
// at most half as long as that commit took (maxGatherWait at most), so
// that one commit carries them all. A client alone, or clients that do not
// come back in time, lose at most that wait.
//
// Owned by the loop goroutine.
type groupCommit struct {
	limit  time.Duration // the longest wait (maxGatherWait; tests lengthen it)
	target int           // requests expected for the next commit
	wait   time.Duration // how long to wait for them
	wrote  bool          // this turn's commits wrote to the store
	dur    time.Duration // how long those writes took
}

// turn starts a turn, before its requests are decided and gathered.
func (g *groupCommit) turn() { g.wrote, g.dur = false, 0 }

// applied records a store commit of the turn that wrote changes.
func (g *groupCommit) applied(d time.Duration) { g.wrote, g.dur = true, g.dur+d }

// answered records that the turn's replies went out with its durable
// changes: n requests were answered, and queued more were already waiting
// for the next turn. A turn that wrote nothing sets no target: there was no
// fsync to share.
func (g *groupCommit) answered(n, queued int) {
	if !g.wrote {
		g.target, g.wait = 0, 0
		return
	}
	g.target, g.wait = min(n+queued, maxBatch), min(g.dur/2, g.limit)
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
	deadline := time.Now().Add(g.wait)
	t := time.NewTimer(g.wait)
	defer t.Stop()
	for len(batch) < g.target {
		select {
		case o := <-ops:
			batch = append(batch, o)
			t0 := time.Now()
			decide(o)
			deadline = deadline.Add(time.Since(t0))
			t.Reset(time.Until(deadline))
		case <-t.C:
			return batch
		case <-ctx.Done():
			return batch
		}
	}
	return batch
}
