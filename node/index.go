package node

import (
	"container/heap"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// The loop's per-turn work must not grow with the number of live jobs
// (issue 16): the lookups below replace scans of n.live.

// liveByID finds a live job by its id. Ids of this site carry the job's
// sequence number, the key of n.live; an id that does not lead to its job
// that way (an exit reported twice, for a job already gone) falls back to
// a scan.
func (n *Node) liveByID(id string) *liveJob {
	if seq, ok := seqOf(n.cfg.Site, id); ok {
		if lj := n.live[int64(seq)]; lj != nil && lj.job().GetId() == id {
			return lj
		}
	}
	// A frozen job is not looked at: its id leads to it by its sequence
	// number (above), and peeking would decode every waiting job.
	for _, lj := range n.live {
		if !lj.frozen() && lj.j.GetId() == id {
			return lj
		}
	}
	return nil
}

// countPending recounts pendingBy from the live jobs (after recovery, which
// restores jobs without state transitions).
func (n *Node) countPending() {
	n.reach.ok = false
	n.pendingBy = make(map[string]int)
	for _, lj := range n.live {
		if lj.job().GetState() == fedschedv1.JobState_JOB_STATE_PENDING {
			n.pendingBy[lj.job().GetSpec().GetUser()]++
		}
	}
}

// notePending keeps pendingBy up to date across a transition of j.
func (n *Node) notePending(j *fedschedv1.Job, prev, state fedschedv1.JobState) {
	if n.pendingBy == nil || prev == state {
		return
	}
	user := j.GetSpec().GetUser()
	if prev == fedschedv1.JobState_JOB_STATE_PENDING {
		if n.pendingBy[user]--; n.pendingBy[user] <= 0 {
			delete(n.pendingBy, user)
		}
	}
	if state == fedschedv1.JobState_JOB_STATE_PENDING {
		n.pendingBy[user]++
		n.noteQueuedID(j.GetId(), j.GetSpec().GetEstimateSeconds())
	}
}

// expireAgreements forgets the full specs of peers' jobs whose hold ran
// out (the agent's holds expire in the agent).
func (n *Node) expireAgreements(now int64) { n.forgetHeld(now) }

// peerAgreement is the agreement under which this site runs the job it
// received from a peer as core id seq (its id is the job id the site gave
// it), or nil.
func (n *Node) peerAgreement(seq int64) *agreementRec {
	if a := n.agreements[jobID(n.cfg.Site, uint64(seq))]; a != nil && a.Role == rolePeer && a.Seq == seq {
		return a
	}
	return nil
}

// reachIndex answers queuedReach (how far the waiting jobs of a queue
// policy may reach if they start now: the largest estimate among the
// PENDING live jobs not in flight to a peer) without a walk of the live
// jobs at every turn. It is a max-heap of (estimate, core id) pushed
// whenever a job may have become such a job (it enters PENDING, or comes
// back from an offer to peers); an entry that no longer describes one is
// dropped when it reaches the top, and the heap is rebuilt from the live
// jobs when stale entries outnumber them. It is built on first use (only
// sites with standing reservations under a queue policy ask).
type reachIndex struct {
	ok bool
	h  reachHeap
}

type reachRec struct{ est, seq int64 }

type reachHeap []reachRec

func (h reachHeap) Len() int           { return len(h) }
func (h reachHeap) Less(i, j int) bool { return h[i].est > h[j].est }
func (h reachHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *reachHeap) Push(x any)        { *h = append(*h, x.(reachRec)) }
func (h *reachHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// queuedJob reports whether lj counts towards queuedReach.
func (n *Node) queuedJob(seq int64, lj *liveJob) bool {
	return lj != nil && lj.state() == fedschedv1.JobState_JOB_STATE_PENDING && !n.beingDelegated(lj)
}

// noteQueued records that job seq, of estimate est, may now count towards
// queuedReach.
func (n *Node) noteQueued(seq, est int64) {
	r := &n.reach
	if !r.ok {
		return
	}
	heap.Push(&r.h, reachRec{est: est, seq: seq})
	if len(r.h) > 2*len(n.live)+64 {
		r.ok = false // rebuilt on next use
	}
}

// noteQueuedID is noteQueued for a job known by its id; an id that does
// not carry a core id of this site drops the index (rebuilt on next use).
func (n *Node) noteQueuedID(id string, est int64) {
	if seq, ok := seqOf(n.cfg.Site, id); ok {
		n.noteQueued(int64(seq), est)
	} else {
		n.reach.ok = false
	}
}

// queuedReach is how far the waiting jobs of a queue policy may reach if
// they start now.
func (n *Node) queuedReach(now int64) int64 {
	r := &n.reach
	if !r.ok {
		r.h = r.h[:0]
		for seq, lj := range n.live {
			if n.queuedJob(seq, lj) {
				r.h = append(r.h, reachRec{est: lj.pj.Estimate, seq: seq})
			}
		}
		heap.Init(&r.h)
		r.ok = true
	}
	for len(r.h) > 0 {
		top := r.h[0]
		if lj := n.live[top.seq]; n.queuedJob(top.seq, lj) && lj.pj.Estimate == top.est {
			return max(now, now+top.est)
		}
		heap.Pop(&r.h)
	}
	return now
}
