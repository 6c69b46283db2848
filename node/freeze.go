package node

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// Frozen waiting jobs (issue 16). A job that waits for its reservation is
// usually not looked at again until it starts, but its Job message (spec,
// route, history, reservation, timestamps: some twenty small heap objects
// linked by pointers) stays in memory all that time, and the garbage
// collector follows those pointers at every cycle: with 100,000 waiting
// jobs that marking was most of what a submission cost more than with
// 1,000. So at the end of each turn the loop freezes the waiting jobs the
// turn touched: their store record (the Job message, the idempotency key
// and the body hash) is kept as one byte slice, which the collector marks
// but does not scan, and decoded again (thawed) the first time the loop
// reads the job (liveJob.job). A thawed job is frozen again at the end of
// that turn if it still waits.
//
// Only the loop's own copy is frozen: a job is frozen only when nothing
// else holds its Job message (no delegation in flight, not cancelled while
// running), and the loop is the only goroutine that reads live jobs.

// freezer lists the jobs to look at when the turn ends: those thawed, or
// written to the store, during the turn. Owned by the loop.
type freezer struct {
	due []*liveJob
}

// job is the job's authoritative state, thawing a frozen job: the message
// is the live one, which the caller may change.
func (lj *liveJob) job() *fedschedv1.Job {
	if lj.frozen() {
		lj.rec = lj.thawed()
		lj.j, lj.wire = lj.rec.Job, nil
		lj.fz.due = append(lj.fz.due, lj)
	}
	return lj.j
}

// peek is the job for reading only, without thawing it: a frozen job is
// decoded into a copy that is not kept. For walks over every live job
// (status page, watchers' initial state) that would otherwise thaw them
// all.
func (lj *liveJob) peek() *fedschedv1.Job {
	if !lj.frozen() {
		return lj.j
	}
	return lj.thawed().Job
}

// thawed decodes a frozen job's record (freezeJob's encoding): its
// idempotency key and body hash, each with its length before it, then
// the Job message.
func (lj *liveJob) thawed() store.JobRecord {
	w := lj.wire
	key, n := protowire.ConsumeString(w)
	if n >= 0 {
		w = w[n:]
	}
	hash, m := protowire.ConsumeBytes(w)
	if m >= 0 {
		w = w[m:]
	}
	j := &fedschedv1.Job{}
	err := protowire.ParseError(min(n, m))
	if err == nil {
		err = proto.Unmarshal(w, j)
	}
	if err != nil {
		// The bytes are the node's own encoding of a valid record
		// (freezeJob): failing to read them back means the process's
		// memory is corrupt, and no answer from it can be trusted.
		panic(fmt.Sprintf("node: a frozen job %d does not decode: %v", lj.seq, err))
	}
	rec := store.JobRecord{Job: j, IdempotencyKey: key}
	if len(hash) > 0 {
		rec.BodyHash = bytes.Clone(hash)
	}
	return rec
}

// state is the job's state; a frozen job is PENDING (freezable).
func (lj *liveJob) state() fedschedv1.JobState {
	if lj.frozen() {
		return fedschedv1.JobState_JOB_STATE_PENDING
	}
	return lj.j.GetState()
}

// frozen reports whether the job is kept in wire form.
func (lj *liveJob) frozen() bool { return lj.j == nil && lj.wire != nil }

// noteWritten lists the live job of a record the store has just taken
// for the end of the turn. Ids that do not lead to a live job by their
// sequence number (ended jobs) are skipped: no scan.
func (n *Node) noteWritten(id string) {
	if seq, ok := seqOf(n.cfg.Site, id); ok {
		if lj := n.live[int64(seq)]; lj != nil && lj.j != nil && lj.j.GetId() == id {
			n.fz.due = append(n.fz.due, lj)
		}
	}
}

// freezable reports whether lj may be frozen: it is live, waits, and no
// one but the loop's liveJob holds its message.
func (n *Node) freezable(lj *liveJob) bool {
	return lj.j != nil && n.live[lj.seq] == lj && lj.j.GetState() == fedschedv1.JobState_JOB_STATE_PENDING &&
		!lj.cancelled && !offering(lj)
}

// freezeDue freezes the jobs the turn thawed or wrote that may be frozen.
func (n *Node) freezeDue() {
	for i, lj := range n.fz.due {
		n.freezeJob(lj)
		n.fz.due[i] = nil
	}
	n.fz.due = n.fz.due[:0]
}

// freezeJob freezes lj if it may be; a job whose message does not encode
// (it cannot happen to a message the node built) stays thawed.
func (n *Node) freezeJob(lj *liveJob) {
	if !n.freezable(lj) {
		return
	}
	b := protowire.AppendString(nil, lj.rec.IdempotencyKey)
	b = protowire.AppendBytes(b, lj.rec.BodyHash)
	b, err := proto.MarshalOptions{}.MarshalAppend(b, lj.j)
	if err != nil {
		n.log.Warn("waiting job kept thawed: it does not encode", "job", lj.j.GetId(), "err", err)
		return
	}
	lj.wire, lj.j, lj.rec, lj.fz = b, nil, store.JobRecord{}, &n.fz
}
