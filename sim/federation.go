package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
)

// FedSite is one site of a federated replay: its processors, its policy and
// the jobs its own community submits to it.
type FedSite struct {
	Name   string
	Procs  int
	Policy plan.Policy
	Jobs   []Job // sorted by Submit
}

// FedConfig configures a federated replay.
type FedConfig struct {
	Sites []FedSite
	// Federate turns delegation on; off, every site runs alone (the
	// baseline of every comparison).
	Federate bool
	// Transfer is the transfer policy: OnReject, or ACF (offer every job
	// that cannot start at once; a peer takes it only if it can start it
	// at once).
	Transfer delegation.TransferMode
	// Location bounds and spreads the peers asked for quotes.
	Location delegation.LocationConfig
	// MaxHops limits how often a job is delegated (0 means 1).
	MaxHops int
	// Seed seeds the location policy's jitter, one stream per site.
	Seed uint64
}

// FedRecord is what happened to one job of a federated replay.
type FedRecord struct {
	Record
	Origin int // index of the submitting site
	Exec   int // index of the executing site
	Route  delegation.Route
}

// FedResult is the outcome of a federated replay.
type FedResult struct {
	Sites   []FedSite
	Records []FedRecord // grouped by origin site, in each site's job order
}

// OriginMetrics returns the metrics of the jobs submitted at site k,
// wherever they ran: AWRT_k as the federation digest defines it.
func (r *FedResult) OriginMetrics(k int) Metrics {
	return ComputeMetrics(r.filter(func(f *FedRecord) bool { return f.Origin == k }), r.Sites[k].Procs)
}

// ExecMetrics returns the metrics of the jobs executed at site k; its
// utilisation is that of site k.
func (r *FedResult) ExecMetrics(k int) Metrics {
	return ComputeMetrics(r.filter(func(f *FedRecord) bool { return f.Exec == k }), r.Sites[k].Procs)
}

func (r *FedResult) filter(keep func(*FedRecord) bool) []Record {
	var out []Record
	for i := range r.Records {
		if keep(&r.Records[i]) {
			out = append(out, r.Records[i].Record)
		}
	}
	return out
}

// Migrations returns the migration matrices of the digest (Eq. 6.1): M_n[k][l]
// is the share of jobs submitted at k that ran at l, M_SA[k][l] the same
// weighted by squashed area.
func (r *FedResult) Migrations() (mn, msa [][]float64) {
	n := len(r.Sites)
	mn, msa = make([][]float64, n), make([][]float64, n)
	cnt, area := make([]float64, n), make([]float64, n)
	for k := range n {
		mn[k], msa[k] = make([]float64, n), make([]float64, n)
	}
	for i := range r.Records {
		f := &r.Records[i]
		if !f.Started {
			continue
		}
		a := float64(f.Procs) * float64(f.Ran())
		mn[f.Origin][f.Exec]++
		msa[f.Origin][f.Exec] += a
		cnt[f.Origin]++
		area[f.Origin] += a
	}
	for k := range n {
		for l := range n {
			if cnt[k] > 0 {
				mn[k][l] /= cnt[k]
			}
			if area[k] > 0 {
				msa[k][l] /= area[k]
			}
		}
	}
	return mn, msa
}

type fedSubmit struct {
	at   int64
	site int
	idx  int32 // global record index
}

// RunFederation replays every site's jobs on one virtual clock. With
// Federate, each submission follows the delegation protocol in memory: the
// transfer policy decides whether to look for a peer, the location policy
// ranks the candidates from their outlook (the gossip digest's content),
// each candidate quotes with its own admission test (Site.Probe), and the
// best quote — earliest end, the same Best rule the node uses — wins if it
// beats the local answer; the job is then submitted at the peer. Jobs are
// never delegated back to a site on their route.
//
// Event order at each time t: ends at every site, then submissions (site
// order, then each site's job order), then one pass per site in site order.
func RunFederation(ctx context.Context, cfg FedConfig) (*FedResult, error) {
	n := len(cfg.Sites)
	sites := make([]*plan.Site, n)
	rngs := make([]*rand.Rand, n)
	hist := make([]map[string]delegation.History, n)
	res := &FedResult{Sites: cfg.Sites}
	var subs []fedSubmit
	for k, s := range cfg.Sites {
		st, err := plan.NewSite(plan.Config{Procs: s.Procs, Policy: s.Policy})
		if err != nil {
			return nil, fmt.Errorf("site %s: %w", s.Name, err)
		}
		sites[k] = st
		rngs[k] = rand.New(rand.NewPCG(cfg.Seed, uint64(k)))
		hist[k] = make(map[string]delegation.History)
		for i, j := range s.Jobs {
			if i > 0 && j.Submit < s.Jobs[i-1].Submit {
				return nil, fmt.Errorf("site %s: job %d: %w", s.Name, j.ID, ErrUnsorted)
			}
			idx := int32(len(res.Records))
			res.Records = append(res.Records, FedRecord{Record: Record{Job: j}, Origin: k, Exec: k})
			subs = append(subs, fedSubmit{at: j.Submit, site: k, idx: idx})
		}
	}
	// All submissions in time order; site order then job order at ties.
	sortSubmits(subs)
	gens := make([]int32, len(res.Records))
	var pending completions
	next := 0
	wakes := make([]int64, n)
	for k := range wakes {
		wakes[k] = plan.Forever
	}
	events := 0
	for {
		t := plan.Forever
		for _, w := range wakes {
			t = min(t, w)
		}
		if next < len(subs) {
			t = min(t, subs[next].at)
		}
		if len(pending) > 0 {
			t = min(t, pending[0].at)
		}
		if t == plan.Forever {
			break
		}
		if events++; events&0x3ff == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("sim: %w", err)
			}
		}
		pending.popDue(t, gens, func(i int32) {
			f := &res.Records[i]
			f.ended(t)
			sites[f.Exec].End(t, int64(i))
			if f.Exec != f.Origin && f.Estimate > 0 {
				h := hist[f.Origin][cfg.Sites[f.Exec].Name]
				h.Observe(float64(f.End-f.Submit) / float64(f.Estimate))
				hist[f.Origin][cfg.Sites[f.Exec].Name] = h
			}
		})
		for next < len(subs) && subs[next].at == t {
			s := subs[next]
			next++
			f := &res.Records[s.idx]
			pj := f.planJob()
			pj.ID = int64(s.idx)
			f.Route = delegation.Route{{Site: cfg.Sites[s.site].Name, Action: delegation.ActionSubmitted, At: t}}
			exec := s.site
			if cfg.Federate {
				exec = delegate(cfg, sites, s.site, pj, f, rngs[s.site], hist[s.site], t)
			}
			f.Exec = exec
			f.Decision = sites[exec].Submit(t, pj)
		}
		for k, st := range sites {
			for _, d := range st.Pass(t) {
				pending.apply(&res.Records[d.JobID].Record, int32(d.JobID), d, t, gens)
			}
			wakes[k] = st.NextWake(t)
		}
	}
	return res, nil
}

// delegate runs the in-memory delegation protocol for one submission and
// returns the index of the site that takes the job.
func delegate(cfg FedConfig, sites []*plan.Site, origin int, pj plan.Job, f *FedRecord, rng *rand.Rand, hist map[string]delegation.History, t int64) int {
	local := sites[origin].Probe(t, pj)
	localEnd := local.End
	if !local.OK() {
		localEnd = plan.Forever
	}
	// A queued job (queue policies) is accepted with no start yet: Start
	// is Forever, so only ACF offers it.
	if !delegation.ShouldDelegate(cfg.Transfer, local.OK(), local.Start, t) || !f.Route.CanDelegate(cfg.MaxHops) {
		return origin
	}
	cands := make([]delegation.Candidate, 0, len(sites)-1)
	for k, st := range sites {
		if k == origin {
			continue
		}
		o := st.Outlook(t, 3600, 4*3600, 24*3600)
		cands = append(cands, delegation.Candidate{Site: cfg.Sites[k].Name, Procs: cfg.Sites[k].Procs,
			FreeNow: o[0], Free1h: o[1], Free4h: o[2], Free24h: o[3]})
	}
	ranked := delegation.Rank(cands, pj.Procs, f.Route, hist, cfg.Location, rng)
	quotes := make([]delegation.Quote, 0, len(ranked))
	where := make([]int, 0, len(ranked))
	for _, c := range ranked {
		k := siteIndex(cfg.Sites, c.Site)
		p := sites[k].Probe(t, pj)
		// A quote must beat what the origin can do itself; under ACF a
		// peer takes a job only if it can start it at once.
		if !p.OK() || p.Reason == plan.ReasonQueued || p.End >= localEnd || cfg.Transfer == delegation.ACF && p.Start > t {
			f.Route = f.Route.With(delegation.Hop{Site: c.Site, Action: delegation.ActionRefused, At: t})
			continue
		}
		f.Route = f.Route.With(delegation.Hop{Site: c.Site, Action: delegation.ActionQuoted, At: t})
		quotes = append(quotes, delegation.Quote{Site: c.Site, Start: p.Start, End: p.End, PoF: p.PoF, Expires: t + 1})
		where = append(where, k)
	}
	b := delegation.Best(quotes, pj.Fee, pj.Penalty, t)
	if b < 0 {
		return origin
	}
	f.Route = f.Route.With(delegation.Hop{Site: quotes[b].Site, Action: delegation.ActionDelegated, At: t,
		Reason: "the peer's quote ends earlier than the local placement"})
	return where[b]
}

func siteIndex(sites []FedSite, name string) int {
	for k, s := range sites {
		if s.Name == name {
			return k
		}
	}
	return -1
}

func sortSubmits(s []fedSubmit) {
	// Stable by time: the input is built site by site in job order, so a
	// stable sort keeps site order, then job order, at equal times.
	slices.SortStableFunc(s, func(a, b fedSubmit) int {
		switch {
		case a.at < b.at:
			return -1
		case a.at > b.at:
			return 1
		}
		return 0
	})
}
