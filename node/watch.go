package node

import (
	"google.golang.org/protobuf/proto"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// watchBuffer is how many events a watcher may fall behind before the node
// drops it; a dropped watcher reconnects with send_initial.
const watchBuffer = 1024

// watcher is one WatchJobs stream. The loop owns the map of watchers and is
// the only sender on ch; it closes ch when it drops the watcher.
type watcher struct {
	jobID string
	user  string // only this user's jobs, when not empty
	ch    chan *fedschedv1.JobEvent
	// lagged is set (before ch is closed) when the watcher fell behind.
	lagged bool
}

// watchOp registers or removes a watcher.
type watchOp struct {
	w       *watcher
	initial bool
	remove  int
	reply   chan watchReply
}

type watchReply struct {
	id      int
	initial []*fedschedv1.JobEvent
}

func (o *watchOp) run(n *Node, now int64) func(error) {
	if o.w == nil {
		if w, ok := n.watchers[o.remove]; ok {
			delete(n.watchers, o.remove)
			close(w.ch)
		}
		return nil
	}
	n.nextW++
	id := n.nextW
	n.watchers[id] = o.w
	var initial []*fedschedv1.JobEvent
	if o.initial {
		for _, lj := range n.live {
			if j := lj.peek(); o.w.wants(j) {
				initial = append(initial, &fedschedv1.JobEvent{Job: proto.Clone(j).(*fedschedv1.Job), Time: toTime(now), Sequence: n.eventSeq})
			}
		}
	}
	return func(error) { o.reply <- watchReply{id: id, initial: initial} }
}

// watched reports whether a watcher selects j: only then does a
// transition of j make an event (a copy of the job).
func (n *Node) watched(j *fedschedv1.Job) bool {
	for _, w := range n.watchers {
		if w.wants(j) {
			return true
		}
	}
	return false
}

// publishPending sends the events of the changes just committed to
// watchers.
func (n *Node) publishPending() {
	evs := n.pending.events
	n.pending.events = nil
	for _, ev := range evs {
		for id, w := range n.watchers {
			if !w.wants(ev.GetJob()) {
				continue
			}
			select {
			case w.ch <- ev:
			default:
				w.lagged = true
				delete(n.watchers, id)
				close(w.ch)
			}
		}
	}
}

func (n *Node) closeWatchers() {
	for id, w := range n.watchers {
		delete(n.watchers, id)
		close(w.ch)
	}
}

// wants reports whether the watcher selects a job.
func (w *watcher) wants(j *fedschedv1.Job) bool {
	return (w.jobID == "" || w.jobID == j.GetId()) && (w.user == "" || w.user == j.GetSpec().GetUser())
}
