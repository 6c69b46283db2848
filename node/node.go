package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/discovery"
	"github.com/fedsched/fedsched/node/auth"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// statsBlob names the runtime statistics in the store.
const statsBlob = "overbook"

// maxBatch bounds how many requests one turn of the event loop decides and
// makes durable together (group commit).
const maxBatch = 256

// Deps are the parts a node drives. All are required.
type Deps struct {
	Store    store.Store
	Executor executor.Executor
	Clock    clock.Clock
	Logger   *slog.Logger
	// Version is reported by GetSite.
	Version string
	// Federation configures delegation; its zero value (no Peers) runs the
	// site alone.
	Federation FederationConfig
	// StandingHorizon is how far ahead the node keeps the instances of
	// standing reservations in its plan (whole seconds); 0 means
	// DefaultStandingHorizon (7 days).
	StandingHorizon time.Duration
}

// Node is one site: it owns the scheduling core and is its only writer. Run
// is its event loop; gRPC handlers, the executor and timers talk to it by
// messages. Every state change a reply acknowledges is durable before the
// reply.
type Node struct {
	cfg  config.Config
	deps Deps
	log  *slog.Logger

	site  *plan.Site
	adm   *overbook.Admission // nil when the site does not overbook
	stats *overbook.Stats
	pol   plan.Policy

	// scaled: the site's clock is a scaled one (nil: the wall clock, or a
	// test's manual clock); every commit records its reading for a
	// restart to resume from.
	scaled interface{ Factor() float64 }

	ops   chan op
	ready atomic.Bool
	done  chan struct{} // closed when Run returns

	// Owned by the loop goroutine:
	live map[int64]*liveJob // pending and running jobs, by core id
	// killRetry: cancelled jobs still running whose kill failed, by core
	// id, with the time of the next try (kills.go).
	killRetry map[int64]int64
	nextSeq   uint64
	pending   changes
	watchers  map[int]*watcher
	nextW     int
	eventSeq  uint64
	procs     int
	usable    int // processors the executor's batch system offers (slurm.go)

	// Federation (federation.go, agentfed.go). agreements and byOrigin
	// are owned by the loop; conns is shared with the sending goroutines
	// under its mutex.
	fed        FederationConfig
	agreements map[string]*agreementRec
	byOrigin   map[string]string
	connMu     sync.Mutex
	conns      map[string]*grpc.ClientConn
	rqf        rqfState // RQF's pull timing (rqf.go), owned by the loop
	bg         sync.WaitGroup
	digest     atomic.Pointer[discovery.Digest]

	// Operators' fixed and standing reservations (reservations.go), owned
	// by the loop.
	resv reservations

	// keys counts users' idempotency keys (idemlimit.go).
	keys keyCounter
	// authz authorizes every call (authz.go).
	authOnce sync.Once
	authz    *auth.Interceptor
	// metrics are the node's Prometheus series (metrics.go).
	metrics *metrics
	// recent are the last jobs that ended or were delegated, oldest first,
	// for the status page (snapshot.go); owned by the loop.
	recent []*fedschedv1.Job
	// group is the loop's estimate of how many requests the next commit
	// can carry (gather.go). Owned by the loop.
	group groupCommit
	// pendingBy counts the PENDING live jobs of each user, kept by
	// setState and recounted after recovery (limits.max_pending_jobs is
	// checked on every submission; a scan of all live jobs would make each
	// submission cost O(live)). Owned by the loop.
	pendingBy map[string]int
	// fz freezes the waiting jobs each turn touched (freeze.go). Owned by
	// the loop.
	fz freezer
	// agent, if not nil, decides for the node (agentdrive.go); born is
	// the job being submitted to it, and displacedBy the jobs an
	// operator's reservation displaced in the current op. Owned by the
	// loop.
	agent       *site.Agent
	born        *liveJob
	displacedBy []*fedschedv1.DisplacedJob
	// The federation through the agent (agentfed.go), owned by the loop
	// but for sendq: held are the full specs of peers' jobs held here;
	// stepReq and stepResp the RPC request or response being Stepped;
	// outq the messages to send after the next commit, by sendq's
	// goroutines; settled the replies that wait for that commit; deferred
	// the submissions whose reply waits for the end of their offer.
	held     map[site.JobKey]heldJob
	stepReq  proto.Message
	stepResp proto.Message
	outq     []site.Message
	sendq    chan outCall
	settled  []func(error)
	deferred map[int64]func(submitResult)
	// absent is, per job, the peer its agree is resent to and since when
	// it has not been an alive member (memory only: a restart counts
	// afresh).
	absent map[site.JobKey]absence
	// sweepAt is when reportsGivenUp next looks for reports to give up;
	// awaited holds the ids of the agreements whose report is awaited
	// (awaitsReport), kept by putAgreement and recovery (noteAwaited), so
	// that the sweep does not walk every agreement.
	sweepAt int64
	awaited map[string]struct{}
	// coreWake is when the core next has work without a new event, as of
	// the last pass: the agent Ticks only then or after an event, as the
	// simulator ticks it.
	coreWake int64
}

// liveJob is a job that still holds or may hold processors.
type liveJob struct {
	seq int64
	// j is the job's authoritative state, as stored; nil while the job is
	// frozen (freeze.go): read it through job().
	j *fedschedv1.Job
	// wire is the frozen job's record in protobuf wire form (nil while
	// thawed), and fz the freezer that froze it, told when it thaws.
	wire []byte
	fz   *freezer
	// rec is the job's store record, rec.Job being j; the zero record
	// while frozen (its key and hash are frozen with the job).
	rec store.JobRecord
	pj  plan.Job
	sla bool // the job has an SLA (a deadline)
	// cancelled: the user cancelled the job while it ran; it stays until
	// its process has ended so that its processors stay reserved.
	cancelled bool
}

// op is a message to the event loop: run is called on the loop goroutine
// with the loop's time; it records changes and returns a function that
// delivers the reply once the changes are durable (or fails it).
type op interface {
	run(n *Node, now int64) (deliver func(err error))
}

// New builds a node from a validated configuration. It starts nothing; call
// Run.
func New(cfg config.Config, deps Deps) (*Node, error) {
	if deps.Store == nil || deps.Executor == nil || deps.Clock == nil {
		return nil, fmt.Errorf("node: store, executor and clock are required: %w", ErrInvalidRequest)
	}
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	pol, err := plan.ParsePolicy(cfg.Policy)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	n := &Node{cfg: cfg, deps: deps, log: deps.Logger.With("site", cfg.Site), pol: pol, procs: cfg.Procs, usable: cfg.Procs,
		ops: make(chan op, 4*maxBatch), done: make(chan struct{}), live: make(map[int64]*liveJob), killRetry: make(map[int64]int64), watchers: make(map[int]*watcher),
		fed: deps.Federation, agreements: make(map[string]*agreementRec), awaited: make(map[string]struct{}), byOrigin: make(map[string]string),
		conns: make(map[string]*grpc.ClientConn), rqf: newRQFState(),
		resv: newReservations(deps.StandingHorizon), group: groupCommit{limit: maxGatherWait},
		held: make(map[site.JobKey]heldJob), deferred: make(map[int64]func(submitResult)), sendq: make(chan outCall, sendQueue),
		absent: make(map[site.JobKey]absence)}
	n.scaled, _ = deps.Clock.(interface{ Factor() float64 })
	n.fed.defaults()
	n.metrics = newMetrics(n)
	if n.fed.Peers != nil && n.fed.Dial == nil {
		return nil, fmt.Errorf("node: federation needs a dialer: %w", ErrInvalidRequest)
	}
	if n.stats, err = overbook.NewStats(statsConfig(cfg.Overbooking)); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	sc := plan.Config{Procs: cfg.Procs, Policy: pol, TrackMoves: true,
		// The executor's supervisor enforces the kill time it was given at
		// start, even while the node is down; it cannot be moved later, so
		// running jobs never grow back (waiting ones still do).
		NoGrowBack: true}
	if cfg.Overbooking.Enabled {
		ms, _, _ := cfg.Overbooking.Learning()
		n.adm = &overbook.Admission{Stats: n.stats, MinSamples: ms} // recovery's plan; startAgent gives it the agent's statistics
		if cfg.Overbooking.Mode == "comprehensive" {
			n.adm.Mode = overbook.Comprehensive
		}
		if cfg.Overbooking.RiskTest == "risk" {
			n.adm.Test = overbook.Risk{SecurityFactor: cfg.Overbooking.EffectiveSecurityFactor()}
		} else {
			n.adm.Test = overbook.Threshold{PoFMax: cfg.Overbooking.PoFMax}
		}
		sc.Admission = n.adm
	}
	if n.site, err = plan.NewSite(sc); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return n, nil
}

// Ready reports whether recovery is complete and the node serves requests.
func (n *Node) Ready() bool { return n.ready.Load() }

// now is the core's time: whole seconds of the node's clock.
func (n *Node) now() int64 { return n.deps.Clock.Now().Unix() }

func toTime(sec int64) *timestamppb.Timestamp { return timestamppb.New(time.Unix(sec, 0)) }

// Run recovers the node's state from its store and then runs the event loop
// until ctx is cancelled. It returns an error if recovery fails or a write
// to the store fails: the node's memory would no longer match its durable
// state, so it stops, and a restart recovers from the store.
func (n *Node) Run(ctx context.Context) error {
	defer close(n.done)
	if err := n.recover(ctx); err != nil {
		return fmt.Errorf("node: recover: %w", err)
	}
	if err := n.startAgent(ctx, n.now()); err != nil {
		return fmt.Errorf("node: recover: %w", err)
	}
	if err := n.commit(ctx); err != nil {
		return fmt.Errorf("node: recover: %w", err)
	}
	n.countPending()
	for _, lj := range n.live {
		n.fz.due = append(n.fz.due, lj)
	}
	n.freezeDue()
	n.publishDigest(n.now())
	n.ready.Store(true)
	n.log.Info("node ready", "procs", n.procs, "policy", n.pol.String(), "live_jobs", len(n.live), "federated", n.federating(), "site_agent", true)
	defer n.closeConns()
	defer n.bg.Wait()
	n.bg.Add(1)
	go func() { defer n.bg.Done(); n.pruneKeys(ctx) }()
	if n.federating() {
		// The agent's messages: sent by the node's goroutines, its
		// resends its own (agentfed.go).
		for range sendWorkers {
			n.bg.Add(1)
			go func() { defer n.bg.Done(); n.sendLoop(ctx) }()
		}
		n.bg.Add(1)
		go func() { defer n.bg.Done(); n.rememberMembers(ctx, 2*time.Second) }()
		n.flushOut() // what the restore sent, committed with it
	}
	var timer clock.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	batch := make([]op, 0, maxBatch)
	exits := make([]executor.Exit, 0, maxBatch)
	var capacity <-chan int
	if cr, ok := n.deps.Executor.(executor.CapacityReporter); ok {
		capacity = cr.Capacity()
	}
	// passed is the time of the last pass: the core's NextWake answers
	// what comes after it, so that a wake-up the clock has already reached
	// while the turn ran is not skipped. (None yet: the first turn passes
	// at once.)
	passed := n.now() - 1
	for {
		if timer != nil {
			timer.Stop()
		}
		var tick <-chan time.Time
		n.rqf.wake = n.pullWake(passed)
		n.coreWake = n.nextWake(passed)
		wake := min(n.coreWake, n.reservationWake(), n.killRetryWake(), n.rqf.wake, n.reportWake())
		if wake < plan.Forever {
			timer = n.deps.Clock.NewTimer(max(time.Unix(wake, 0).Sub(n.deps.Clock.Now()), 0))
			tick = timer.C()
		}
		batch, exits = batch[:0], exits[:0]
		select {
		case <-ctx.Done():
			err := n.commit(context.WithoutCancel(ctx)) // what a turn left for the next
			n.closeWatchers()
			if err != nil {
				return fmt.Errorf("node: commit: %w", err)
			}
			return nil
		case o := <-n.ops:
			batch = append(batch, o)
		case e := <-n.deps.Executor.Exits():
			exits = append(exits, e)
		case n.usable = <-capacity:
		case <-tick:
		}
		// One turn takes every request and exit already waiting (up to
		// maxBatch of each), so that they share the turn's commit: a
		// burst of job ends costs one fsync, not one each.
		for more := true; more; {
			more = false
			if len(batch) < maxBatch {
				select {
				case o := <-n.ops:
					batch, more = append(batch, o), true
				default:
				}
			}
			if len(exits) < maxBatch {
				select {
				case e := <-n.deps.Executor.Exits():
					exits, more = append(exits, e), true
				default:
				}
			}
		}
		n.group.turn()
		now := n.now()
		for _, e := range exits {
			n.handleExit(e, now)
		}
		n.capacity(now)
		n.retryKills(now)
		n.expireAgreements(now)
		n.reportsGivenUp(now)
		deliver := make([]func(error), 0, max(len(batch), n.group.target))
		decide := func(o op) { deliver = append(deliver, o.run(n, now)) }
		for _, o := range batch {
			decide(o)
		}
		if len(batch) > 0 {
			// The requests the last commit's clients are still sending
			// are decided as they arrive (groupCommit.gather).
			batch = n.group.gather(ctx, n.ops, batch, decide)
		}
		n.tickReservations(now)
		delivered := false
		replies := func(err error) {
			for _, d := range deliver {
				if d != nil {
					d(err)
				}
			}
			delivered = true
			if err == nil {
				n.group.answered(len(batch), len(n.ops))
			}
		}
		err := n.pass(ctx, now, replies)
		passed = now
		// When the pass committed the turn's requests (to start jobs) and
		// more requests or exits wait, what is left (the starts' records)
		// goes with the next turn's commit instead of an fsync of its own:
		// nobody waits for it, and a crash before it finds the jobs PENDING
		// and follows their processes (Reattach), as it would a moment
		// after the start. Otherwise it is committed now.
		if err == nil && !(delivered && (len(n.ops) > 0 || len(n.deps.Executor.Exits()) > 0)) {
			err = n.commit(ctx)
		}
		if !delivered {
			replies(err)
		}
		if err != nil {
			n.closeWatchers()
			return fmt.Errorf("node: commit: %w", err)
		}
		n.freezeDue()
		n.publishDigest(now)
	}
}

// keyRetention is how long idempotency keys are remembered (the API
// promises at least 24 hours), in the site's clock.
const keyRetention = 25 * time.Hour

// pruneKeys forgets old idempotency keys now and then, until ctx ends.
func (n *Node) pruneKeys(ctx context.Context) {
	t := time.NewTicker(10 * time.Minute)
	defer t.Stop()
	for {
		if k, err := n.deps.Store.PruneIdempotencyKeys(ctx, n.deps.Clock.Now().Add(-keyRetention)); err != nil && ctx.Err() == nil {
			n.log.Warn("pruning idempotency keys failed", "err", err)
		} else if k > 0 {
			n.keys.gen.Add(1)
			n.log.Debug("pruned idempotency keys", "keys", k)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// publishDigest refreshes the capability digest gossip reads: processors
// free now and in 1, 4 and 24 hours, rounded down to a sixteenth of the
// site so that small changes do not flood the federation.
func (n *Node) publishDigest(now int64) {
	o := n.site.Outlook(now, 3600, 4*3600, 24*3600)
	round := func(v int) int32 { return int32(delegation.CoarseFree(v, n.procs)) }
	d := discovery.Digest{Version: discovery.ProtocolVersion, Site: n.cfg.Site, Addr: n.advertise(), Procs: int32(n.procs), Policy: n.pol.String(),
		FreeNow: round(o[0]), Free1h: round(o[1]), Free4h: round(o[2]), Free24h: round(o[3]), Overbooking: n.adm != nil}
	if old := n.digest.Load(); old != nil && *old == d {
		return
	}
	n.digest.Store(&d)
}

// Digest is the site's current capability digest, for gossip. Safe for
// use by any goroutine.
func (n *Node) Digest() discovery.Digest {
	if d := n.digest.Load(); d != nil {
		return *d
	}
	return discovery.Digest{Version: discovery.ProtocolVersion, Site: n.cfg.Site, Addr: n.advertise(), Procs: int32(n.procs), Policy: n.pol.String()}
}

// advertise is the API address peers dial.
func (n *Node) advertise() string {
	if n.cfg.Gossip.Advertise != "" {
		return n.cfg.Gossip.Advertise
	}
	return n.cfg.Listen
}

func (n *Node) closeConns() {
	n.connMu.Lock()
	defer n.connMu.Unlock()
	for addr, c := range n.conns {
		c.Close()
		delete(n.conns, addr)
	}
}

// send hands an op to the loop, waiting as long as ctx allows.
func (n *Node) send(ctx context.Context, o op) error {
	if !n.ready.Load() {
		return fmt.Errorf("node is recovering its state: %w", ErrUnavailable)
	}
	select {
	case n.ops <- o:
		return nil
	case <-n.done:
		return fmt.Errorf("the site stopped: %w", ErrUnavailable)
	case <-ctx.Done():
		return fmt.Errorf("site busy: %w: %w", ErrOverloaded, ctx.Err())
	}
}

// await waits for an op's reply, giving up when ctx ends or the loop stops.
func await[T any](ctx context.Context, n *Node, ch <-chan T) (T, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-n.done:
		var zero T
		select {
		case v := <-ch:
			return v, nil
		default:
		}
		return zero, fmt.Errorf("the site stopped: %w", ErrUnavailable)
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
	}
}

// changes are the writes of one loop turn, last write wins per key.
type changes struct {
	jobs   map[string]store.JobRecord
	res    map[string]*store.ReservationRecord // fixed reservations; nil value: delete
	sla    map[string]store.SLARecord
	agree  map[string]*agreementRec
	stand  map[string]*store.StandingRecord // nil value: delete
	stats  bool
	events []*fedschedv1.JobEvent
}

func (c *changes) putJob(rec store.JobRecord) {
	if c.jobs == nil {
		c.jobs = make(map[string]store.JobRecord)
	}
	c.jobs[rec.ID()] = rec
}

func (c *changes) putRes(id string, r *store.ReservationRecord) {
	if c.res == nil {
		c.res = make(map[string]*store.ReservationRecord)
	}
	c.res[id] = r
}

func (c *changes) putStanding(id string, r *store.StandingRecord) {
	if c.stand == nil {
		c.stand = make(map[string]*store.StandingRecord)
	}
	c.stand[id] = r
}

func (c *changes) putSLA(r store.SLARecord) {
	if c.sla == nil {
		c.sla = make(map[string]store.SLARecord)
	}
	c.sla[r.JobID] = r
}

func (c *changes) empty() bool {
	return len(c.jobs) == 0 && len(c.res) == 0 && len(c.sla) == 0 && len(c.agree) == 0 && len(c.stand) == 0 && !c.stats
}

// commit makes the pending changes durable in one transaction, then sends
// the events of the changes to the watchers.
func (n *Node) commit(ctx context.Context) error {
	c := &n.pending
	if c.empty() {
		n.publishPending()
		n.afterCommit(nil)
		return nil
	}
	var ch store.Changes
	for _, id := range slices.Sorted(maps.Keys(c.jobs)) {
		ch.PutJobs = append(ch.PutJobs, c.jobs[id])
	}
	for _, id := range slices.Sorted(maps.Keys(c.res)) {
		if r := c.res[id]; r != nil {
			ch.PutReservations = append(ch.PutReservations, *r)
		} else {
			ch.DeleteReservations = append(ch.DeleteReservations, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.sla)) {
		ch.PutSLAOutcomes = append(ch.PutSLAOutcomes, c.sla[id])
	}
	for _, id := range slices.Sorted(maps.Keys(c.stand)) {
		if r := c.stand[id]; r != nil {
			ch.PutStanding = append(ch.PutStanding, *r)
		} else {
			ch.DeleteStanding = append(ch.DeleteStanding, id)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(c.agree)) {
		rec, err := encodeAgreement(c.agree[id])
		if err != nil {
			return fmt.Errorf("encode agreement %s: %w", id, err)
		}
		ch.PutAgreements = append(ch.PutAgreements, rec)
	}
	if c.stats {
		if b, err := n.stats.MarshalJSON(); err == nil {
			ch.PutStats = map[string][]byte{statsBlob: b}
		} else {
			n.log.Warn("runtime statistics not saved", "err", err)
		}
	}
	if n.scaled != nil {
		ch.SiteClock = &store.SiteClock{Site: n.deps.Clock.Now(), Wall: time.Now(), Scale: n.scaled.Factor()}
	}
	// A commit must not be abandoned half way because the node is
	// stopping: the replies waiting on it were promised durability.
	t0 := time.Now()
	err := n.deps.Store.Apply(context.WithoutCancel(ctx), ch)
	n.group.applied(time.Since(t0))
	since(n.metrics.commit, t0)
	if err == nil {
		for _, rec := range ch.PutJobs {
			n.noteWritten(rec.ID())
		}
	}
	c.jobs, c.res, c.sla, c.agree, c.stand, c.stats = nil, nil, nil, nil, nil, false
	if err == nil {
		n.publishPending()
	}
	n.afterCommit(err)
	return err
}

// setState moves a live or new job to state with reason and message at now,
// records the transition, queues the write and the event.
func (n *Node) setState(j *fedschedv1.Job, rec store.JobRecord, state fedschedv1.JobState, reason fedschedv1.Reason, msg string, now int64) store.JobRecord {
	prev := j.GetState()
	n.notePending(j, prev, state)
	j.State, j.Reason, j.Message = state, reason, msg
	j.UpdateTime = toTime(now)
	j.History = append(j.History, &fedschedv1.Transition{From: prev, To: state, Reason: reason, Message: msg, Time: toTime(now)})
	rec.Job = j
	n.pending.putJob(rec)
	n.eventSeq++
	if n.watched(j) {
		n.pending.events = append(n.pending.events, &fedschedv1.JobEvent{Job: proto.Clone(j).(*fedschedv1.Job), PreviousState: prev, Time: toTime(now), Sequence: n.eventSeq})
	}
	n.observeTransition(j, prev)
	return rec
}

// reservationOf returns the API message of a job's placement, and whether
// the placement is overbooked (shorter than the estimate). A job's
// reservation is stored in its record only: the store's reservations are
// the operators' fixed ones (see recoverReservations).
func (n *Node) reservationOf(procs int, pl plan.Placement, estimate int64) (*fedschedv1.Reservation, bool) {
	return &fedschedv1.Reservation{Start: toTime(pl.Start), End: toTime(pl.End), Procs: int32(procs), Site: n.cfg.Site}, pl.End-pl.Start < estimate
}

// pass runs the scheduling pass and carries out its decisions: start jobs,
// and store reservations that re-planning moved. A job is handed to the
// executor only once it is durable: if this turn has unwritten changes (a
// job submitted in this turn), they are committed first, so that no process
// runs for a job a crash would make the store forget (and its id be given
// again). That commit holds everything the turn's requests decided, so
// their replies (replies) go out with it, before the starts and without
// waiting for the commit of the starts.
func (n *Node) pass(ctx context.Context, now int64, replies func(error)) error {
	t0 := time.Now()
	defer since(n.metrics.pass, t0)
	return n.agentTick(ctx, now, replies)
}

// nextWake is when the core next has work without a new event.
func (n *Node) nextWake(passed int64) int64 {
	return n.agent.NextWake(passed)
}

// expire rejects a waiting job the queue could not start in its window.
func (n *Node) expire(lj *liveJob, now int64) {
	n.finish(lj, fedschedv1.JobState_JOB_STATE_REJECTED, fedschedv1.Reason_REASON_REJECTED_DEADLINE_UNREACHABLE,
		fmt.Sprintf("the queue could not start the job by %s, the last start that runs its %d s estimate before its deadline %s",
			time.Unix(lj.pj.Deadline-lj.pj.Estimate, 0).UTC().Format(time.RFC3339), lj.pj.Estimate, time.Unix(lj.pj.Deadline, 0).UTC().Format(time.RFC3339)),
		fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, now)
}

// moved stores a waiting job's reservation that re-planning moved to pl.
func (n *Node) moved(lj *liveJob, pl plan.Placement, now int64) {
	api, over := n.reservationOf(lj.pj.Procs, pl, lj.pj.Estimate)
	lj.job().Reservation, lj.job().Pof, lj.job().Overbooked = api, pl.PoF, over
	lj.job().UpdateTime = toTime(now)
	lj.rec.Job = lj.job()
	n.pending.putJob(lj.rec)
}

// start hands a job whose reservation begins to the executor.
func (n *Node) start(ctx context.Context, lj *liveJob, d plan.Decision, now int64) {
	spec := lj.job().GetSpec()
	// The core's time is whole seconds and the loop may be late: the job
	// gets the whole length of its slot, measured from its actual start
	// (by the executor too: Spec.Limit; it may overlap the next reservation on its processors by that
	// lateness, rather than lose part of what its SLA promised).
	//
	// The kill comes only after the kill's whole second: at equal times a
	// job's own end comes first (plan.Killed), so a job that ends in the
	// second its reservation ends has finished, not been killed.
	at := n.deps.Clock.Now().Unix() // after this turn's commit (see pass)
	kill := at + d.End - min(d.Start, now)
	es := executor.Spec{JobID: lj.job().GetId(), Argv: spec.GetCommand(), Env: spec.GetEnv(), Workdir: spec.GetWorkdir(),
		Deadline: time.Unix(kill+1, 0), Limit: time.Duration(kill+1-at) * time.Second, Estimate: time.Duration(spec.GetEstimateSeconds()) * time.Second,
		Runtime: time.Duration(spec.GetSimRuntimeSeconds()) * time.Second, Started: time.Unix(at, 0)}
	n.batchSpec(&es, lj)
	err := n.deps.Executor.Start(ctx, es)
	if errors.Is(err, executor.ErrAlreadyStarted) {
		// The node died after starting the job and before storing that:
		// the job runs (or ran) under its supervisor; follow it.
		err = n.deps.Executor.Reattach(es.JobID)
	}
	if err != nil && ctx.Err() != nil {
		// The node is stopping (ctx ended under the start): that says
		// nothing about the job. It stays PENDING, as a crash a moment
		// before would have left it: the next run starts it, or follows
		// its process if the executor had started it (adoptStarted).
		n.log.Info("job start cut short: the node is stopping; the next run starts it, or follows its process", "job", es.JobID, "err", err)
		return
	}
	if err != nil {
		n.log.Warn("job failed to start", "job", es.JobID, "err", err)
		lj.job().StartTime, lj.job().EndTime = toTime(now), toTime(now)
		// The supervisor's convention (a shell's too) for a command that
		// could not be run.
		code := int32(executor.ExitStartFailed)
		lj.job().ExitCode = &code
		n.agent.Fail(now, n.keyOf(lj))
		n.applyOwn(now)
		n.finish(lj, fedschedv1.JobState_JOB_STATE_FAILED, fedschedv1.Reason_REASON_FAILED_START,
			fmt.Sprintf("the executor could not start the command: %v", err), fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, now)
		return
	}
	// The record says when the job really started, from which its slot is
	// measured, not when the turn began.
	lj.job().StartTime = toTime(max(now, at))
	lj.job().Reservation, _ = n.reservationOf(lj.pj.Procs, plan.Placement{Start: d.Start, End: d.End}, lj.pj.Estimate)
	lj.rec = n.setState(lj.job(), lj.rec, fedschedv1.JobState_JOB_STATE_RUNNING, fedschedv1.Reason_REASON_STARTED,
		fmt.Sprintf("started on %d processors; killed at %s if still running%s", lj.pj.Procs, time.Unix(d.End, 0).UTC().Format(time.RFC3339), n.runsAs(es.JobID)), now)
}

// finish ends a live job: it leaves the core, and its SLA is settled with
// outcome (for jobs with an SLA).
func (n *Node) finish(lj *liveJob, state fedschedv1.JobState, reason fedschedv1.Reason, msg string, outcome fedschedv1.SlaOutcome, now int64) {
	id := lj.job().GetId()
	delete(n.live, lj.seq)
	if lj.sla {
		lj.job().SlaOutcome = outcome
		n.pending.putSLA(store.SLARecord{JobID: id, Outcome: outcome, Fee: lj.pj.Fee, Penalty: lj.pj.Penalty, PoF: lj.job().GetPof(), DecidedAt: time.Unix(now, 0)})
	}
	if lj.job().GetEndTime() == nil {
		lj.job().EndTime = toTime(now)
	}
	lj.rec = n.setState(lj.job(), lj.rec, state, reason, msg, now)
	if lj.job().GetOriginSite() != n.cfg.Site {
		n.peerJobEnded(lj, now)
	}
}

// handleExit turns an executor's report into the end of a job.
func (n *Node) handleExit(e executor.Exit, now int64) {
	lj := n.liveByID(e.JobID)
	if lj == nil {
		// Exits can be reported twice across restarts; the job is done.
		return
	}
	end := e.At.Unix()
	if e.At.IsZero() || end > now {
		end = now
	}
	n.agentEnd(lj, e, now)
	if lj.cancelled {
		// Cancelled while running: the job is already CANCELLED; now its
		// processors are free.
		if !e.Lost {
			code := int32(e.ExitCode)
			lj.job().ExitCode = &code
		}
		lj.job().EndTime = toTime(end)
		delete(n.live, lj.seq)
		lj.rec.Job = lj.job()
		n.pending.putJob(lj.rec)
		if lj.job().GetOriginSite() != n.cfg.Site {
			n.peerJobEnded(lj, now)
		}
		return
	}
	lj.job().EndTime = toTime(end)
	start := lj.job().GetStartTime().AsTime().Unix()
	ran := end - start
	if !e.Lost {
		code := int32(e.ExitCode)
		lj.job().ExitCode = &code
	}
	switch {
	case e.Lost:
		msg := "the job was running when the node stopped and its outcome could not be recovered"
		if e.Detail != "" {
			msg = "the job's outcome could not be recovered: " + e.Detail
		}
		n.finish(lj, fedschedv1.JobState_JOB_STATE_FAILED, fedschedv1.Reason_REASON_FAILED_LOST_ON_RESTART, msg, fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, now)
	case e.ProviderFailed:
		n.finish(lj, fedschedv1.JobState_JOB_STATE_FAILED, fedschedv1.Reason_REASON_FAILED_NODE,
			"the site failed the job: "+e.Detail, fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, now)
	case e.Killed && e.Cause == executor.CauseDeadline:
		outcome, msg := fedschedv1.SlaOutcome_SLA_OUTCOME_MET, "killed at the end of its reservation after receiving its full estimate (the estimate was short)"
		// The kill comes just after the reservation's last second (start):
		// the job got its slot, not the extra second.
		if r := lj.job().GetReservation(); r != nil {
			ran = min(ran, r.GetEnd().AsTime().Unix()-r.GetStart().AsTime().Unix())
		}
		if ran < lj.pj.Estimate {
			outcome, msg = fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, fmt.Sprintf("killed at the end of its overbooked reservation after %d of %d estimated seconds", ran, lj.pj.Estimate)
		}
		n.finish(lj, fedschedv1.JobState_JOB_STATE_KILLED, fedschedv1.Reason_REASON_KILLED_END_OF_RESERVATION, msg, outcome, now)
	case e.Killed:
		n.finish(lj, fedschedv1.JobState_JOB_STATE_CANCELLED, fedschedv1.Reason_REASON_CANCELLED_BY_USER,
			"killed on request", fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED, now)
	default:
		// A non-zero status is the job's own failure: FAILED, and the SLA
		// is MET because the site ran it as promised (docs/policies.md).
		state, msg := fedschedv1.JobState_JOB_STATE_COMPLETED, fmt.Sprintf("exited with status %d after %d s", e.ExitCode, ran)
		if e.ExitCode != 0 {
			state, msg = fedschedv1.JobState_JOB_STATE_FAILED, fmt.Sprintf("the command failed: it exited with status %d after %d s", e.ExitCode, ran)
			if e.Signaled {
				msg = fmt.Sprintf("the command failed: signal %d ended it after %d s", e.Signal, ran)
			}
		}
		n.finish(lj, state, fedschedv1.Reason_REASON_EXITED, msg, fedschedv1.SlaOutcome_SLA_OUTCOME_MET, now)
	}
}
