package node

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// RQF, the pull transfer policy, live: the site agent decides (site/rqf.go)
// and the node carries its messages (agentfed.go). A site with idle
// processors and nothing waiting asks the location policy's ranking of its
// peers for the jobs waiting in their queues (PeerQueue, one peer after the
// other), holds a slot for each job its own policy would start now, and
// asks to take it (Take); the origin takes the job out of its plan and
// agrees to the taker's hold (Agree), written ahead: from then on
// outcome reports, termination, status and explain work as for any
// delegated job. A node answers queue requests and takes only if its
// operator opted in (delegation.disclose_queue): the answer discloses its
// waiting jobs.

// rqfHandingOver starts the state message of a job handed over to a peer
// that took it from the queue (the hop of its agree is marked taken).
const rqfHandingOver = "taken from the queue (RQF) by"

// rqfState is when the site last asked its peers for work (the agent's
// Ready.PulledAt) and whether a round is on its way; the loop owns it.
type rqfState struct {
	last int64 // site.NeverPulled: never
	wake int64 // pullWake as of the last pass (plan.Forever: none)
	// out counts the site agent's queue requests and takes whose answer
	// has not come back (agentfed.go).
	out int
}

func newRQFState() rqfState { return rqfState{last: site.NeverPulled, wake: plan.Forever} }

// pullEvery is RQF's interval in seconds of the site's clock.
func (n *Node) pullEvery() int64 { return max(int64(n.fed.PullInterval/time.Second), 1) }

// pullWake is when the site asks its peers by itself (site.NextPull): on
// the interval's grid of the site's clock while it stays idle, so that a
// scaled or held clock (the stepped replay) triggers it, as the agent's
// NextWake does in the simulator.
func (n *Node) pullWake(now int64) int64 {
	if n.fed.Transfer != delegation.RQF || !n.federating() || n.pulling() {
		return plan.Forever
	}
	every := n.pullEvery()
	return site.NextPull(n.idle(now), n.rqf.last, now, every, site.PullOffset(n.cfg.Site, every))
}

// pulling reports whether an RQF round is on its way: the agent's queue
// requests and takes not answered yet.
func (n *Node) pulling() bool { return n.rqf.out > 0 }

// nextPullTime is the loop's pull wake for GetSite (at or before now: the
// site asks at the end of this turn): nil when the site does not ask by
// itself.
func (n *Node) nextPullTime() *timestamppb.Timestamp {
	if w := n.rqf.wake; w < plan.Forever {
		return timestamppb.New(time.Unix(w, 0))
	}
	return nil
}

// idle is the free processors of a site that has nothing waiting, 0 when
// it is not idle: the agent's condition for pulling (site.IdleProcs).
func (n *Node) idle(now int64) int { return site.IdleProcs(n.site, now) }

func cloneRoute(r []*fedschedv1.RouteHop) []*fedschedv1.RouteHop {
	out := make([]*fedschedv1.RouteHop, len(r))
	for i, h := range r {
		out[i] = proto.Clone(h).(*fedschedv1.RouteHop)
	}
	return out
}

// PeerQueue and Take, the RQF calls of FederationService.

func (s *fedService) PeerQueue(ctx context.Context, req *fedschedv1.PeerQueueRequest) (*fedschedv1.PeerQueueResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if req.GetSite() == "" || req.GetFreeProcs() < 0 {
		return nil, ToStatus(fmt.Errorf("site is required and free_procs must be >= 0: %w", ErrInvalidRequest))
	}
	return stepAs[*fedschedv1.PeerQueueResponse](ctx, s, req)
}

func (s *fedService) Take(ctx context.Context, req *fedschedv1.TakeRequest) (*fedschedv1.TakeResponse, error) {
	if err := s.ready(); err != nil {
		return nil, err
	}
	if req.GetSite() == "" || req.GetJobId() == "" || req.GetHoldId() == "" {
		return nil, ToStatus(fmt.Errorf("site, job_id and hold_id are required: %w", ErrInvalidRequest))
	}
	return stepAs[*fedschedv1.TakeResponse](ctx, s, req)
}
