package node

import (
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
