package sim

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/site"
)

// FedSite is one site of a federated replay: its processors, its policy,
// its SLA admission and the jobs its own community submits to it.
type FedSite struct {
	Name   string
	Procs  int
	Policy plan.Policy
	// Overbooking, if not nil, lets the site's admission overbook (the
	// node's overbooking block); it requires the conservative policy.
	Overbooking *site.Overbooking
	// Fixed are fixed reservations the site holds from the start.
	Fixed []plan.FixedSpec
	// Standing are standing reservations the site holds from the start.
	Standing []plan.Standing
	// Prefer lists peers asked first, one at a time (ordered spill-over).
	Prefer []string
	// CommunityShare is the share of processors kept for local users.
	CommunityShare float64
	// Rules are the site's EFS rule bases, one per partner. Under
	// transfer EFS a site with rule bases applies them and a site without
	// runs ACF (the study's newcomer, and the partner a site is trained
	// against); under any other transfer they must be empty.
	Rules delegation.RuleBases
	// Pricing prices the site's quotes (nil: free).
	Pricing delegation.Pricing
	// Failures, if both rates are set, makes the site's processors fail
	// and be repaired during the replay (failures.go; rates per processor
	// per hour), drawn from FailureSeed(FedConfig.Seed, the site's index):
	// the federated replay and the site alone see the same draws.
	Failures overbook.FailureModel
	Jobs     []Job // sorted by Submit
}

// FailureSeed is the seed of the failure draws of site k in a federated
// replay with the given seed: one independent stream per site, and per
// replication (whose seeds differ).
func FailureSeed(seed uint64, k int) uint64 {
	return splitmix(seed ^ (uint64(k)+1)*0xfa11fa11fa11fa11)
}

// FedConfig configures a federated replay.
type FedConfig struct {
	Sites []FedSite
	// Federate turns delegation on; off, every site runs alone (the
	// baseline of every comparison).
	Federate bool
	// Transfer is the transfer policy: OnReject, ACF (offer every job the
	// site's own policy would not start now; a peer takes it only if its
	// own policy would start it now) or RQF (idle sites pull jobs from
	// peers' queues).
	Transfer delegation.TransferMode
	// Location bounds and spreads the peers asked for quotes.
	Location delegation.LocationConfig
	// MaxHops limits how often a job is delegated (0 means 1).
	MaxHops int
	// Seed seeds the location policy's jitter (one stream per decision)
	// and message loss.
	Seed uint64
	// Latency is how long a message between two sites takes, in seconds
	// (default 0: delivered at the time it is sent, after everything
	// already due then).
	Latency int64
	// Loss is the probability that a message is lost (tests of the
	// protocol's timeouts and retries); 0 for none.
	Loss float64
	// PullSeconds is RQF's interval (site.Config.PullSeconds, a node's
	// delegation.pull_interval; 0 means 60): an idle site asks its peers
	// for work at most once per interval when something happens to it,
	// and by itself at every multiple of it. Every site is taken to have
	// been up and asking before the replay's first event.
	PullSeconds int64
	// Pool, when set, replaces the delegation protocol by the federation
	// study's central passive pool (RunPool): a simulator-only strategy,
	// which no live site can run. Transfer, Location, MaxHops, Latency
	// and Loss do not apply to it.
	Pool *PoolConfig
	// Central, when set, replaces the delegation protocol by the study's
	// central active coordinator (RunCentral); Shaking by its Shaking-G
	// (RunShaking). Simulator-only, like Pool.
	Central *CentralConfig
	Shaking *ShakingConfig
	// Lease, when set, replaces the delegation protocol by the study's
	// resource leasing, BLOS or CLOS (RunLease). Simulator-only, like
	// Pool.
	Lease *LeaseConfig
	// Abort, if set, stops a delegating replay with ErrAborted as soon
	// as the AWRT of the jobs submitted at one site is certain to exceed
	// a bound: EFS training (TrainEFS) cuts short the replays of rule
	// bases that cannot be selected.
	Abort *AbortAWRT
}

// AbortAWRT is FedConfig.Abort: stop once site Site's AWRT must exceed
// Above. The bound counts every job submitted at the site with the area it
// will have if it runs to the end of its runtime or estimate (the replay's
// own metrics count what ran), and at time t a job not yet ended as
// responding in at least t − submit.
type AbortAWRT struct {
	Site  int
	Above float64
}

// PoolConfig configures a pooled federation (RunPool).
type PoolConfig struct {
	// Policy is the queue policy every site applies to its local queue
	// and to the pool: FCFS, EASY or LIST (P-FCFS, P-EASY, P-LIST).
	Policy plan.Policy
}

// FedRecord is what happened to one job of a federated replay.
type FedRecord struct {
	Record
	Origin int // index of the submitting site
	Exec   int // index of the executing site
	Route  delegation.Route
	// Leased is how many of the job's processors site Lender leased to
	// its executing site for the job's run (the study's leasing, RunLease:
	// the job spans the two sites); 0 for none.
	Leased int
	Lender int
	// Price is what site Payer agreed to pay site Exec for running the
	// job (the peer's quote, delegation.QuotePrice; a priced agreement
	// when Price > 0 and Payer != Exec). 0: the executing site takes the
	// job on the user's terms (FedResult.SLA).
	Price float64
	Payer int
}

// FedResult is the outcome of a federated replay. Its metrics methods keep
// what they compute (indexes, per-site metrics): one goroutine at a time.
type FedResult struct {
	Sites   []FedSite
	Records []FedRecord // grouped by origin site, in each site's job order
	// Leasing is each site's leasing (RunLease); nil without leasing.
	Leasing []LeaseStats
	// Messages counts the messages the sites sent each other, by kind
	// (site.Kind's names: quote-request, quote, agree, ...), lost or not.
	Messages map[string]int64
	// Offered[k] counts the jobs submitted at site k that it offered to
	// peers (asked at least one for a quote: delegated, kept, or refused
	// by every site) and Kept[k] those of them it then ran itself, no
	// quote having won; KeptStartable[k] those of the
	// kept ones that a peer it did not ask could have started at once
	// (that peer's own policy would have started the job at the moment
	// the origin kept it: plan.Site.CanStartNow), the cost of asking only
	// max_candidates peers.
	Offered, Kept, KeptStartable []int
	// byOrigin[k] and byExec[k] index the records submitted at and run at
	// site k, in record order; built on the first metrics call, so that
	// per-site metrics do not each scan every record.
	byOrigin, byExec, byLender [][]int32
	origin, exec               []*Metrics // OriginMetrics and ExecMetrics, computed once per site
}

// OriginMetrics returns the metrics of the jobs submitted at site k,
// wherever they ran: AWRT_k as the federation digest defines it.
func (r *FedResult) OriginMetrics(k int) Metrics {
	r.index()
	if r.origin == nil {
		r.origin = make([]*Metrics, len(r.Sites))
	}
	if r.origin[k] == nil {
		idx := r.byOrigin[k]
		m := metricsOf(len(idx), func(i int) *Record { return &r.Records[idx[i]].Record }, r.Sites[k].Procs)
		r.origin[k] = &m
	}
	return *r.origin[k]
}

// ExecMetrics returns the metrics of the jobs executed at site k; its
// utilisation is that of site k. A job that ran partly on processors
// leased from another site counts at each site with the processors it
// used there (the study's SA_k with the fractions of jobs that ran
// locally, Eqs. 6.12-6.16), and not at all where it used none.
func (r *FedResult) ExecMetrics(k int) Metrics {
	r.index()
	if r.exec == nil {
		r.exec = make([]*Metrics, len(r.Sites))
	}
	if r.exec[k] == nil {
		m := r.execMetrics(k)
		r.exec[k] = &m
	}
	return *r.exec[k]
}

func (r *FedResult) execMetrics(k int) Metrics {
	exec, lent := make([]int32, 0, len(r.byExec[k])), r.byLender[k]
	for _, x := range r.byExec[k] {
		if f := &r.Records[x]; f.Leased == 0 || f.Leased != f.Procs {
			exec = append(exec, x)
		}
	}
	var rec Record // a record with the processors used here, when leased
	at := func(i int) *Record {
		if i < len(exec) {
			f := &r.Records[exec[i]]
			if f.Leased == 0 {
				return &f.Record
			}
			rec = f.Record
			rec.Procs -= f.Leased
			return &rec
		}
		f := &r.Records[lent[i-len(exec)]]
		rec = f.Record
		rec.Procs = f.Leased
		return &rec
	}
	return metricsOf(len(exec)+len(lent), at, r.Sites[k].Procs)
}

// LeasedArea returns the squashed area site k ran on processors it leased
// from others (in) and that others ran on processors it leased to them
// (out): the study's SA^λ (Eq. 6.13), in processor-seconds.
func (r *FedResult) LeasedArea(k int) (in, out float64) {
	for i := range r.Records {
		f := &r.Records[i]
		if f.Exec == k {
			in += f.leasedArea()
		}
		if f.Lender == k {
			out += f.leasedArea()
		}
	}
	return in, out
}

// leasedArea is the area the job ran on leased processors.
func (f *FedRecord) leasedArea() float64 {
	if f.Leased == 0 || !f.Started {
		return 0
	}
	return float64(f.Leased) * float64(f.Ran())
}

func (r *FedResult) index() {
	if r.byOrigin != nil {
		return
	}
	r.byOrigin, r.byExec, r.byLender = make([][]int32, len(r.Sites)), make([][]int32, len(r.Sites)), make([][]int32, len(r.Sites))
	for i := range r.Records {
		f := &r.Records[i]
		r.byOrigin[f.Origin] = append(r.byOrigin[f.Origin], int32(i))
		r.byExec[f.Exec] = append(r.byExec[f.Exec], int32(i))
		if f.Leased > 0 {
			r.byLender[f.Lender] = append(r.byLender[f.Lender], int32(i))
		}
	}
}

// Migrations returns the migration matrices of the digest (Eq. 6.1): M_n[k][l]
// is the share of jobs submitted at k that ran at l, M_SA[k][l] the same
// weighted by squashed area. A job that ran partly on processors leased
// from site l counts in M_n at its executing site, and its leased area in
// M_SA at l.
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
		if f.Leased > 0 {
			la := float64(f.Leased) * float64(f.Ran())
			msa[f.Origin][f.Exec] -= la
			msa[f.Origin][f.Lender] += la
		}
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

// delivery is a message in flight.
type delivery struct {
	at  int64
	msg site.Message
}

// network is the messages in flight, in the order they are due. Every
// message takes the same latency and is sent at the current time, which
// never goes back, so the order they are sent in is the order they are due
// in (ties at one time go in the order sent): a queue, not a heap.
type network struct {
	q    []delivery
	head int
}

func (n *network) empty() bool { return n.head == len(n.q) }

// next is the first message due (the network must not be empty).
func (n *network) next() *delivery { return &n.q[n.head] }

func (n *network) push(d delivery) {
	if n.head > 0 && n.head == len(n.q) {
		n.q, n.head = n.q[:0], 0 // drained: reuse the array from its start
	} else if n.head >= 1024 && n.head >= len(n.q)/2 {
		// Mostly delivered: move the rest to the front rather than grow.
		k := copy(n.q, n.q[n.head:])
		clear(n.q[k:])
		n.q, n.head = n.q[:k], 0
	}
	n.q = append(n.q, d)
}

func (n *network) pop() site.Message {
	d := &n.q[n.head]
	m := d.msg
	*d = delivery{} // let the message's route and offer go
	n.head++
	return m
}

// exactView is the simulator's membership: every other site, with its
// outlook at the moment of asking, rounded as the node's gossip rounds it
// (delegation.CoarseFree); the node's gossip is also seconds old
// (docs/architecture.md lists the difference). The outlooks are shared by
// every site's view (outlooks) and the slice it returns is reused at its
// next call, as site.PeerView allows.
type exactView struct {
	all  *outlooks
	self int
	buf  []delegation.Candidate
}

func (v *exactView) Candidates(now int64) []delegation.Candidate {
	v.all.refresh(now)
	v.buf = append(append(v.buf[:0], v.all.cands[:v.self]...), v.all.cands[v.self+1:]...)
	return v.buf
}

// outlookAt are the times after now at which a peer's free processors are
// read (delegation.Candidate's FreeNow, Free1h, Free4h, Free24h).
var outlookAt = [4]int64{0, 3600, 4 * 3600, 24 * 3600}

// outlooks are every site's Candidate as of the last refresh, each kept
// until its site's profile changes (plan.Profile.Version) or time reaches
// a breakpoint of one of the four figures (plan.Profile.FreeSpan): most
// offers find most of 169 peers unchanged since the last offer. A refresh
// looks only at the sites touched since the last one (the driver touches
// a site after every call of its agent: only those change a profile) and
// at those whose figures expire (a heap of until), not at every site.
type outlooks struct {
	agents  []*site.Agent
	cands   []delegation.Candidate
	version []uint64
	until   []int64 // the figures hold for now < until
	// expiry holds each site's until as a completion of the site (idx)
	// at its until (at); an entry whose site has another until since is
	// stale.
	expiry completions
	dirty  siteSet // the sites touched since the last refresh
	last   int64   // the time of the last refresh (plan.Never: none yet)
}

func newOutlooks(agents []*site.Agent, sites []FedSite) *outlooks {
	o := &outlooks{agents: agents, cands: make([]delegation.Candidate, len(sites)),
		version: make([]uint64, len(sites)), until: make([]int64, len(sites)), dirty: newSiteSet(len(sites)), last: plan.Never}
	for k, s := range sites {
		o.cands[k] = delegation.Candidate{Site: s.Name, Procs: s.Procs}
	}
	return o
}

// touch tells the outlooks that site k's agent was called: its profile
// may have changed.
func (o *outlooks) touch(k int) { o.dirty.add(k) }

func (o *outlooks) refresh(now int64) {
	if now < o.last || o.last == plan.Never {
		// The first read (or time went back, which a replay never
		// does): every site afresh.
		o.dirty.take()
		o.expiry = o.expiry[:0]
		for k := range o.agents {
			o.read(k, now)
		}
		o.last = now
		return
	}
	o.last = now
	for _, k := range o.dirty.take() {
		if o.agents[k].Site().Plan().Profile().Version() != o.version[k] {
			o.read(k, now)
		}
	}
	for len(o.expiry) > 0 && o.expiry[0].at <= now {
		if e := o.expiry.pop(); o.until[e.idx] == e.at {
			o.read(int(e.idx), now)
		}
	}
}

// read reads site k's four figures at now.
func (o *outlooks) read(k int, now int64) {
	p := o.agents[k].Site().Plan().Profile()
	c := &o.cands[k]
	until := plan.Forever
	var free [4]int
	for i, d := range outlookAt {
		f, u := p.FreeSpan(now + d)
		free[i] = delegation.CoarseFree(f, c.Procs)
		until = min(until, u-d)
	}
	c.FreeNow, c.Free1h, c.Free4h, c.Free24h = free[0], free[1], free[2], free[3]
	o.version[k], o.until[k] = p.Version(), until
	if until < plan.Forever {
		o.expiry.push(completion{at: until, idx: int32(k)})
	}
}

// RunFederation replays every site's jobs on one virtual clock, each site
// run by its own site.Agent: the same agent a node runs, with the
// simulator as its driver. Messages between agents go through an
// in-memory network with cfg.Latency (and cfg.Loss); with Federate off,
// every site runs alone.
//
// Event order at each time t: ends at every site (in record order), a
// tick of every site where a job ended (it re-plans, as a node's turn
// does), then node failures and repairs (site order; FedSite.Failures),
// then submissions (site order, then each site's job order), then messages due
// at t in the order they were sent, then a tick of every site that has
// work (site order); repeated until nothing more is due at t.
func RunFederation(ctx context.Context, cfg FedConfig) (*FedResult, error) {
	if cfg.Federate && cfg.Pool != nil {
		return RunPool(ctx, cfg.Sites, cfg.Pool.Policy)
	}
	if cfg.Federate && cfg.Central != nil {
		return RunCentral(ctx, cfg.Sites, *cfg.Central)
	}
	if cfg.Federate && cfg.Shaking != nil {
		return RunShaking(ctx, cfg.Sites, *cfg.Shaking)
	}
	if cfg.Federate && cfg.Lease != nil {
		return RunLease(ctx, cfg.Sites, *cfg.Lease)
	}
	n := len(cfg.Sites)
	if cfg.Latency < 0 || !(cfg.Loss >= 0 && cfg.Loss < 1) {
		return nil, fmt.Errorf("sim: latency %d, loss %v: %w", cfg.Latency, cfg.Loss, ErrBadConfig)
	}
	agents := make([]*site.Agent, n)
	views := make([]*exactView, n)
	fails := make([]*failureProcess, n)
	byName := make(map[string]int, n)
	res := &FedResult{Sites: cfg.Sites, Offered: make([]int, n), Kept: make([]int, n), KeptStartable: make([]int, n)}
	var sent [site.NumKinds]int64
	jobs := 0
	for _, s := range cfg.Sites {
		jobs += len(s.Jobs)
	}
	res.Records = make([]FedRecord, 0, jobs)
	subs := make([]fedSubmit, 0, jobs)
	for k, s := range cfg.Sites {
		byName[s.Name] = k
		// NoGrowBack as the node: its executor enforces the kill time it
		// was given at start, so running jobs never grow back.
		ac := site.Config{Name: s.Name, Procs: s.Procs, Policy: s.Policy, Overbooking: s.Overbooking, Fixed: s.Fixed, Standing: s.Standing, NoGrowBack: true,
			Transfer: cfg.Transfer, Prefer: s.Prefer, Location: cfg.Location, MaxHops: cfg.MaxHops,
			CommunityShare: s.CommunityShare, Pricing: s.Pricing, Seed: cfg.Seed, PullSeconds: cfg.PullSeconds}
		if cfg.Federate {
			views[k] = &exactView{}
			ac.Peers = views[k]
		}
		if cfg.Transfer == delegation.EFS {
			if ac.Rules = s.Rules; len(ac.Rules) == 0 {
				ac.Transfer = delegation.ACF
			}
		} else if len(s.Rules) > 0 {
			return nil, fmt.Errorf("sim: site %s has EFS rule bases but the transfer is %v: %w", s.Name, cfg.Transfer, ErrBadConfig)
		}
		if !cfg.Federate {
			ac.Transfer, ac.Rules = delegation.OnReject, nil
		}
		if err := s.Failures.Validate(); err != nil {
			return nil, fmt.Errorf("sim: site %s: failures: %w", s.Name, err)
		}
		a, err := site.New(ac)
		if err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
		agents[k] = a
		fails[k] = newFailureProcess(FailureConfig{Lambda: s.Failures.Lambda, Mu: s.Failures.Mu, Seed: FailureSeed(cfg.Seed, k)}, s.Procs)
		for i, j := range s.Jobs {
			if i > 0 && j.Submit < s.Jobs[i-1].Submit {
				return nil, fmt.Errorf("site %s: job %d: %w", s.Name, j.ID, ErrUnsorted)
			}
			idx := int32(len(res.Records))
			res.Records = append(res.Records, FedRecord{Record: Record{Job: j}, Origin: k, Exec: k})
			subs = append(subs, fedSubmit{at: j.Submit, site: k, idx: idx})
		}
	}
	sortSubmits(subs)
	ab := newAbortBound(cfg.Abort, res.Records)
	gens := make([]int32, len(res.Records))
	var pending completions
	var net network
	loss := rand.New(rand.NewPCG(cfg.Seed, 0x1055))
	var t int64
	// drain carries out what agent k decided and puts its messages on the
	// network.
	ticks := newTickQueue(n)
	var all *outlooks // the federated views' outlooks
	if cfg.Federate {
		all = newOutlooks(agents, cfg.Sites)
		for k, v := range views {
			v.all, v.self = all, k
		}
	}
	// touch marks site k as called: it may need a tick, and its outlook
	// may have changed.
	touch := func(k int) {
		ticks.touch(k)
		if all != nil {
			all.touch(k)
		}
	}
	drain := func(k int) {
		touch(k)
		r := agents[k].Ready()
		for _, d := range r.Decisions {
			i := int32(d.Job.ID)
			f := &res.Records[i]
			switch d.Kind {
			case site.DecideAccept:
				if k == f.Origin && d.Peer == "" && offered(d.Route) {
					res.Kept[k]++
					if cfg.Federate && startableUnasked(agents, cfg.Sites, k, d.Route, t, f.planJob()) {
						res.KeptStartable[k]++
					}
				}
				f.Exec, f.Decision = k, d.Placement
				if len(f.Route) == 0 || !f.Route.Visited(cfg.Sites[k].Name) {
					f.Route = d.Route
				}
			case site.DecideReject:
				if k == f.Origin && offered(d.Route) {
					res.Offered[k]++ // offered, taken by no peer, and refused here
				}
				f.Exec, f.Decision, f.Route = k, d.Placement, d.Route
				ab.dropped(f) // it will never end
			case site.DecideDelegate:
				f.Route = d.Route
				f.Price, f.Payer = d.Price, k
			case site.DecideStart:
				pending.apply(&f.Record, i, plan.Decision{Kind: plan.DecideStart, JobID: int64(i), Start: d.Start, End: d.End}, t, gens)
			case site.DecideExtend:
				pending.apply(&f.Record, i, plan.Decision{Kind: plan.DecideExtend, JobID: int64(i), Start: d.Start, End: d.End}, t, gens)
			case site.DecideFailed:
				// As the single-site replay (Run): a running job stops
				// now, killed; placed again, it runs from the start.
				f.NodeFailed = true
				switch {
				case f.Started:
					gens[i]++ // its completion will not come
					f.End, f.Killed = t, true
					if d.Placement.OK() {
						f.Restarts++
						f.Started = false
					} else {
						ab.ended(f) // lost: this was its end
					}
				case !d.Placement.OK():
					ab.dropped(f) // lost while waiting: it will never end
				}
			}
		}
		for _, m := range r.Messages {
			sent[m.Kind]++
			if cfg.Loss > 0 && loss.Float64() < cfg.Loss {
				continue
			}
			net.push(delivery{at: t + cfg.Latency, msg: m})
		}
		agents[k].Recycle(r)
	}
	next := 0
	events := 0
	if cfg.Federate && cfg.Transfer == delegation.RQF && len(subs) > 0 {
		// The sites were up before the first event: an idle site's last
		// round was at the interval's last multiple before it, as a
		// node's that has been asking since its start.
		every := cmp.Or(cfg.PullSeconds, 60)
		for k, a := range agents {
			ticks.setWake(k, a.NextWake(subs[0].at-every))
		}
	}
	var failing []int // the sites whose processors fail
	for k, fp := range fails {
		if fp.on {
			failing = append(failing, k)
		}
	}
	for {
		t = ticks.earliest()
		if next < len(subs) {
			t = min(t, subs[next].at)
		}
		if len(pending) > 0 {
			t = min(t, pending[0].at)
		}
		if !net.empty() {
			t = min(t, net.next().at)
		}
		if t == plan.Forever || next == len(subs) && len(pending) == 0 && net.empty() && !busy(agents) {
			break
		}
		// Failures and repairs only happen while there is work to do.
		for _, k := range failing {
			t = min(t, fails[k].next())
		}
		if events++; events&0x3ff == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("sim: %w", err)
			}
		}
		if ab.exceeded(t) {
			return nil, fmt.Errorf("sim: site %s: AWRT above %.0f s at %d: %w", cfg.Sites[cfg.Abort.Site].Name, cfg.Abort.Above, t, ErrAborted)
		}
		for {
			ended := false
			pending.popDue(t, gens, func(i int32) {
				f := &res.Records[i]
				f.ended(t)
				ab.ended(f)
				agents[f.Exec].End(t, site.JobKey{Site: cfg.Sites[f.Origin].Name, ID: int64(i)}, !f.Killed)
				drain(f.Exec)
				ended = true
			})
			if ended || ticks.earliest() <= t {
				// As a node's turn does, a site re-plans after the ends,
				// and does what was due by now (its wake), before it takes
				// the second's submissions and messages.
				for _, k := range ticks.due(t) {
					if a := agents[k]; a.Stepped() || ticks.wakes[k] <= t {
						a.Tick(t)
						drain(k)
						ticks.setWake(k, a.NextWake(t))
					}
				}
			}
			for _, k := range failing {
				for fp := fails[k]; fp.due(t); {
					if fp.isRepair() {
						agents[k].NodeUp(t)
						touch(k)
						fp.repaired(t)
						continue
					}
					agents[k].NodeDown(t, fp.pick(agents[k].Down()))
					fp.failed(t)
					drain(k)
				}
			}
			// A submission waits until the messages due by now have
			// settled (delivered below, with all they cause in this
			// second, and the pass again): the outcome reports of the
			// second's ends, the quotes of a request sent a latency ago,
			// an RQF round asked at a wake, and what the previous
			// submission started. So a site has every message that has
			// reached it before it takes a job, as a node has, and the
			// second's jobs go in one at a time, each settled, as the
			// stepped live replay submits them (docs/architecture.md).
			for next < len(subs) && subs[next].at == t && (net.empty() || net.next().at > t) {
				s := subs[next]
				next++
				f := &res.Records[s.idx]
				f.Route = delegation.Route{{Site: cfg.Sites[s.site].Name, Action: delegation.ActionSubmitted, At: t}}
				ab.submitted(f)
				agents[s.site].Submit(t, int64(s.idx), f.planJob())
				drain(s.site)
			}
			for !net.empty() && net.next().at == t {
				m := net.pop()
				k, ok := byName[m.To]
				if !ok {
					continue
				}
				agents[k].Step(t, m)
				drain(k)
			}
			ticked := false
			for _, k := range ticks.due(t) {
				if a := agents[k]; a.Stepped() || ticks.wakes[k] <= t {
					a.Tick(t)
					drain(k)
					ticks.setWake(k, a.NextWake(t))
					ticked = true
				}
			}
			if !ticked && (net.empty() || net.next().at > t) && (len(pending) == 0 || pending[0].at > t) && (next == len(subs) || subs[next].at > t) {
				break
			}
		}
	}
	res.Messages = make(map[string]int64)
	for kind, c := range sent {
		if c > 0 {
			res.Messages[site.Kind(kind).String()] = c
		}
	}
	for i := range res.Records {
		if f := &res.Records[i]; f.Origin != f.Exec && offered(f.Route) {
			res.Offered[f.Origin]++
		}
	}
	for k := range res.Offered {
		res.Offered[k] += res.Kept[k]
	}
	return res, nil
}

// tickQueue finds the sites to tick at a time without looking at every
// site: those an event reached since they were last looked at (touched:
// every call of an agent's methods but Tick may leave it Stepped), and
// those whose wake is due (a heap of wakes; an entry whose site has set
// another wake since is stale and skipped). Both lists come out in site
// order, the order every site was ticked in when all were looked at.
type tickQueue struct {
	wakes []int64 // each site's wake (plan.Forever: none)
	// heap holds the wakes set, as completions of the site (idx) at its
	// wake (at): the same min-heap, in (time, site) order.
	heap    completions
	touched siteSet
	out     []int // scratch
}

func newTickQueue(n int) *tickQueue {
	q := &tickQueue{wakes: make([]int64, n), touched: newSiteSet(n)}
	for k := range q.wakes {
		q.wakes[k] = plan.Forever
	}
	return q
}

func (q *tickQueue) touch(k int) { q.touched.add(k) }

func (q *tickQueue) setWake(k int, w int64) {
	q.wakes[k] = w
	if w < plan.Forever {
		q.heap.push(completion{at: w, idx: int32(k)})
	}
}

// earliest is the earliest wake of any site, plan.Forever if none.
func (q *tickQueue) earliest() int64 {
	for len(q.heap) > 0 {
		if e := q.heap[0]; q.wakes[e.idx] == e.at {
			return e.at
		}
		q.heap.pop()
	}
	return plan.Forever
}

// stepped returns the sites touched since the last call of stepped or due,
// in site order, and forgets them: the caller looks at each.
func (q *tickQueue) stepped() []int {
	q.out = append(q.out[:0], q.touched.take()...)
	slices.Sort(q.out)
	return q.out
}

// due is stepped with every site whose wake is at or before t: the caller
// ticks each of them that needs it and sets its wake again.
func (q *tickQueue) due(t int64) []int {
	out := q.stepped()
	for len(q.heap) > 0 && q.heap[0].at <= t {
		if e := q.heap.pop(); q.wakes[e.idx] == e.at {
			out = append(out, int(e.idx))
		}
	}
	slices.Sort(out)
	q.out = slices.Compact(out)
	return q.out
}

// siteSet is a set of sites (by index), listed in the order they were
// added: the sites touched since the tick queue or the outlooks last
// looked.
type siteSet struct {
	in   []bool
	list []int
}

func newSiteSet(n int) siteSet { return siteSet{in: make([]bool, n)} }

func (s *siteSet) add(k int) {
	if !s.in[k] {
		s.in[k] = true
		s.list = append(s.list, k)
	}
}

// take empties the set and returns what it held, in the order added; the
// slice is the set's own, valid until the next add.
func (s *siteSet) take() []int {
	l := s.list
	for _, k := range l {
		s.in[k] = false
	}
	s.list = s.list[:0]
	return l
}

// offered reports whether the origin asked a peer for a quote on the route.
func offered(r delegation.Route) bool {
	for _, h := range r {
		if h.Action == delegation.ActionQuoted || h.Action == delegation.ActionRefused {
			return true
		}
	}
	return false
}

// startableUnasked reports whether a peer of site k that the route does
// not show as asked would start j at now under its own policy.
func startableUnasked(agents []*site.Agent, sites []FedSite, k int, r delegation.Route, now int64, j plan.Job) bool {
	for l, a := range agents {
		if l == k || j.Procs > sites[l].Procs || r.Visited(sites[l].Name) {
			continue
		}
		if a.Site().CanStartNow(now, j) {
			return true
		}
	}
	return false
}

func sortSubmits(s []fedSubmit) {
	// By time, then in the order built: site by site in job order, as
	// the record index (idx) grows. (That is the stable sort by time, in
	// a third of its time: 188,000 submissions in the grid proxy.)
	slices.SortFunc(s, func(a, b fedSubmit) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.idx, b.idx)) })
}

// abortBound is the running lower bound of AbortAWRT (nil: none).
type abortBound struct {
	site   int
	limit  float64 // Above × the site's total area
	done   float64 // Σ area·(end − submit) over the jobs ended
	open   float64 // Σ area over the jobs submitted and not ended
	openAt float64 // Σ area·submit over them
}

func newAbortBound(a *AbortAWRT, recs []FedRecord) *abortBound {
	if a == nil {
		return nil
	}
	b := &abortBound{site: a.Site}
	var total float64
	for i := range recs {
		if recs[i].Origin == a.Site {
			total += recs[i].area()
		}
	}
	b.limit = a.Above * total
	return b
}

// area is the job's squashed area if it runs to the end of its runtime or
// of its estimate, whichever comes first.
func (f *FedRecord) area() float64 { return float64(f.Procs) * float64(min(f.Runtime, f.Estimate)) }

func (b *abortBound) submitted(f *FedRecord) {
	if b != nil && f.Origin == b.site {
		b.open += f.area()
		b.openAt += f.area() * float64(f.Submit)
	}
}

func (b *abortBound) ended(f *FedRecord) {
	if b != nil && f.Origin == b.site {
		b.open -= f.area()
		b.openAt -= f.area() * float64(f.Submit)
		b.done += float64(f.Procs) * float64(f.Ran()) * float64(f.End-f.Submit)
	}
}

// dropped takes out of the bound a job that will never end (rejected, or
// lost while waiting), which would otherwise count as waiting for ever.
func (b *abortBound) dropped(f *FedRecord) {
	if b != nil && f.Origin == b.site {
		b.open -= f.area()
		b.openAt -= f.area() * float64(f.Submit)
	}
}

func (b *abortBound) exceeded(t int64) bool {
	return b != nil && b.done+b.open*float64(t)-b.openAt > b.limit
}

// busy reports whether any agent has something to do but ask peers for
// work (site.Agent.Busy).
func busy(agents []*site.Agent) bool {
	for _, a := range agents {
		if a.Busy() {
			return true
		}
	}
	return false
}
