package node

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/site"
	"github.com/fedsched/fedsched/swf"
)

// The site agent's configuration of a node (the switch's second step,
// docs/architecture.md "The node as the agent's driver"): the
// settings the node's own loop reads today, as site.Config.

// nodeView is the node's membership as the agent's PeerView: the alive
// members' gossip digests (peerCandidates).
type nodeView struct{ n *Node }

func (v nodeView) Candidates(int64) []delegation.Candidate { return v.n.peerCandidates() }

// siteSeconds is a wall-time duration in whole seconds of the site's
// clock (scaled by time_scale), at least 1.
func (n *Node) siteSeconds(wallSeconds float64) int64 {
	f := 1.0
	if n.scaled != nil {
		f = n.scaled.Factor()
	}
	return max(int64(math.Ceil(wallSeconds*f)), 1)
}

// agentConfig is the agent this node would drive: its site, policy,
// overbooking (or only learning, as a node learns whether or not it
// overbooks), federation settings and standing rules. The reply period is
// the quote timeout in the site's clock. history is the site's past jobs
// (pastJobs).
func (n *Node) agentConfig(history []site.PastJob) site.Config {
	o := n.cfg.Overbooking
	ms, af, ae := o.Learning()
	ob := &site.Overbooking{LearnOnly: !o.Enabled, MinSamples: ms, AgeFactor: af, AgeEvery: ae, History: history}
	if n.adm != nil {
		ob.Mode, ob.Test = n.adm.Mode, n.adm.Test
	}
	c := site.Config{Name: n.cfg.Site, Procs: n.procs, Policy: n.pol, Overbooking: ob, Standing: n.standingRules(),
		StandingHorizon: n.resv.horizon, TrackMoves: true, NoGrowBack: true}
	if n.federating() {
		f := n.fed
		c.Peers, c.Transfer, c.Prefer = nodeView{n}, f.Transfer, f.Prefer
		c.Location = delegation.LocationConfig{MaxCandidates: f.MaxCandidates, Jitter: f.Jitter}
		c.MaxHops, c.HoldSeconds, c.PullSeconds = f.MaxHops, f.HoldSeconds, n.pullEvery()
		c.ReplySeconds = n.siteSeconds(f.QuoteTimeout.Seconds())
		c.CommunityShare, c.Pricing = f.CommunityShare, f.Pricing
	}
	return c
}

// pastJobs reads an SWF file of the site's past jobs (overbooking.history)
// in the order they ended: a job with an estimate and a runtime is a
// sample; one the trace marks cancelled (status 5) short of its estimate
// is censored, as on a live site. Users and applications are ignored.
// Skipped counts the trace's jobs without an estimate or a runtime.
func pastJobs(path string) (past []pastJob, skipped int, err error) {
	tr, err := swf.ReadFile(path, swf.Options{})
	if err != nil {
		return nil, 0, fmt.Errorf("overbooking.history: %w", err)
	}
	jobs := slices.DeleteFunc(slices.Clone(tr.Jobs), func(j swf.Job) bool { return j.ReqTime <= 0 || j.Runtime < 0 })
	slices.SortStableFunc(jobs, func(a, b swf.Job) int {
		return cmp.Compare(a.Submit+max(a.Wait, 0)+a.Runtime, b.Submit+max(b.Wait, 0)+b.Runtime)
	})
	if len(jobs) == 0 {
		return nil, 0, fmt.Errorf("overbooking.history %s: no job with an estimate and a runtime", path)
	}
	past = make([]pastJob, len(jobs))
	for i, j := range jobs {
		past[i] = pastJob{PastJob: site.PastJob{Job: overbook.JobInfo{Procs: int(j.Procs()), Estimate: j.ReqTime}, Ran: j.Runtime,
			Censored: j.Status == 5 && j.Runtime < j.ReqTime}, Line: j.Line}
	}
	return past, len(tr.Jobs) - len(jobs), nil
}

// pastJob is a past job and its line in the history file.
type pastJob struct {
	site.PastJob
	Line int
}
