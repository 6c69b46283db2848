package node

import (
	"errors"

	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/plan"
)

// killRetrySeconds is how long (site time) the node waits before it asks
// the executor again to kill a cancelled job whose kill failed.
const killRetrySeconds = 10

// kill asks the executor to kill lj, a cancelled job that is still
// running. A job the executor no longer tracks has ended: it is recorded so
// and its processors are freed. Any other failure is retried every
// killRetrySeconds until the kill goes through or the job ends (at the
// latest at its reservation's end, when its supervisor kills it).
func (n *Node) kill(lj *liveJob, now int64) {
	id := lj.job().GetId()
	err := n.deps.Executor.Kill(id)
	switch {
	case errors.Is(err, executor.ErrUnknownJob):
		// Its end was reported already (and is still on its way) or is
		// lost: no exit will free the processors, so the job ends now; a
		// late report of its exit is ignored.
		delete(n.killRetry, lj.seq)
		n.handleExit(executor.Exit{JobID: id, Lost: true}, now)
	case err != nil:
		n.log.Warn("kill of a cancelled job failed; retrying", "job", id, "err", err, "retry_in_seconds", killRetrySeconds)
		n.killRetry[lj.seq] = now + killRetrySeconds
	default:
		delete(n.killRetry, lj.seq)
	}
}

// retryKills tries again the kills that are due.
func (n *Node) retryKills(now int64) {
	for seq, at := range n.killRetry {
		if at > now {
			continue
		}
		lj := n.live[seq]
		if lj == nil || !lj.cancelled {
			delete(n.killRetry, seq) // ended meanwhile
			continue
		}
		n.kill(lj, now)
	}
}

// killRetryWake is when the next kill is due again.
func (n *Node) killRetryWake() int64 {
	wake := plan.Forever
	for _, at := range n.killRetry {
		wake = min(wake, at)
	}
	return wake
}
