package node

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// metrics are a node's Prometheus series (docs/metrics.md lists them).
// Counters and histograms are updated where the event happens: by the loop
// (state changes, the scheduling pass, the store commit) or by the
// delegation goroutines (quotes asked); the client library makes that safe.
// Everything that describes the plan (pending jobs by what they wait for,
// agreements, outcome reports not yet delivered, gossip members) is read on
// scrape from one snapshot the loop takes, so that a scrape costs the loop
// one O(live jobs) walk and a turn of the loop costs nothing more than a
// few counter increments. Each node has its own registry: no global state.
type metrics struct {
	reg *prometheus.Registry

	jobs        *prometheus.GaugeVec // by state, every stored job
	jobsByState map[fedschedv1.JobState]prometheus.Gauge
	wait        prometheus.Histogram
	slowdown    prometheus.Histogram
	outcomes    *prometheus.CounterVec
	fees        prometheus.Counter
	penalties   prometheus.Counter
	priceEarned prometheus.Counter
	pricePaid   prometheus.Counter
	admissions  *prometheus.CounterVec
	rejections  *prometheus.CounterVec
	pof         prometheus.Histogram
	delegations *prometheus.CounterVec
	quotesAsked *prometheus.CounterVec
	quotesGiven *prometheus.CounterVec
	queuesAsked *prometheus.CounterVec
	takes       *prometheus.CounterVec
	pass        prometheus.Histogram
	commit      prometheus.Histogram
}

// waitBuckets span a second to a week, in seconds.
var waitBuckets = []float64{1, 10, 60, 300, 900, 1800, 3600, 2 * 3600, 4 * 3600, 8 * 3600, 16 * 3600, 24 * 3600, 2 * 86400, 7 * 86400}

// latencyBuckets span 10 µs to 2.5 s, in seconds.
var latencyBuckets = prometheus.ExponentialBuckets(10e-6, 4, 10)

func newMetrics(n *Node) *metrics {
	m := &metrics{reg: prometheus.NewRegistry(), jobsByState: map[fedschedv1.JobState]prometheus.Gauge{}}
	m.jobs = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "fedsched_jobs",
		Help: "Jobs the site stores, by state (ended ones included): the sum is what `fedsched jobs --all` lists."}, []string{"state"})
	for v := range fedschedv1.JobState_name {
		if s := fedschedv1.JobState(v); s != fedschedv1.JobState_JOB_STATE_UNSPECIFIED {
			m.jobsByState[s] = m.jobs.WithLabelValues(stateName(s))
		}
	}
	m.wait = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fedsched_job_wait_seconds",
		Help: "Time from submission to start of the jobs started at this site, in seconds.", Buckets: waitBuckets})
	m.slowdown = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fedsched_job_bounded_slowdown",
		Help:    "Bounded slowdown (wait + run) / max(run, 10 s) of the jobs that ran at this site, at their end.",
		Buckets: []float64{1, 1.5, 2, 3, 5, 10, 20, 50, 100, 1000}})
	m.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedsched_sla_outcomes_total",
		Help: "Settled SLAs of the site's jobs (delegated ones included), by outcome: met, violated, cancelled."}, []string{"outcome"})
	m.fees = prometheus.NewCounter(prometheus.CounterOpts{Name: "fedsched_sla_fees_earned_total",
		Help: "Users' fees of the met SLAs this site earned, in the jobs' currency (coins): of the jobs it executed on the users' terms, and of the jobs it delegated under an agreed price."})
	m.priceEarned = prometheus.NewCounter(prometheus.CounterOpts{Name: "fedsched_sla_prices_earned_total",
		Help: "Agreed prices of the met SLAs of jobs this site executed for a peer that priced them (Libra+$), in coins."})
	m.pricePaid = prometheus.NewCounter(prometheus.CounterOpts{Name: "fedsched_sla_prices_paid_total",
		Help: "Agreed prices this site paid peers for the met SLAs of the jobs it delegated to them under a price, in coins."})
	m.penalties = prometheus.NewCounter(prometheus.CounterOpts{Name: "fedsched_sla_penalties_owed_total",
		Help: "Penalties of the SLAs violated by jobs executed at this site, in coins."})
	m.admissions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedsched_admissions_total",
		Help: "Jobs accepted into the plan, by placement: full (a reservation for the whole estimate), overbooked (a shorter gap), queued (queue policies)."},
		[]string{"placement"})
	m.rejections = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedsched_rejections_total",
		Help: "Jobs rejected, by reason."}, []string{"reason"})
	m.pof = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fedsched_overbooked_pof",
		Help: "Probability of failure of each overbooked admission.", Buckets: []float64{0.001, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1}})
	m.delegations = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedsched_delegations_total",
		Help: "Jobs delegated under an agreement, by direction (out: to a peer; in: from a peer) and peer site."}, []string{"direction", "peer"})
	m.quotesAsked = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedsched_quotes_requested_total",
		Help: "Quotes this site asked of peers, by peer and answer (offered, a refusal reason, unreachable)."}, []string{"peer", "answer"})
	m.quotesGiven = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedsched_quotes_served_total",
		Help: "Quotes peers asked of this site, by origin peer and answer (offered or a refusal reason)."}, []string{"peer", "answer"})
	m.queuesAsked = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedsched_rqf_queue_requests_total",
		Help: "Queue requests this RQF site sent to peers, by peer and answer (ok, refused: the peer does not disclose its queue or did not answer)."}, []string{"peer", "answer"})
	m.takes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "fedsched_rqf_takes_total",
		Help: "Waiting jobs this RQF site asked peers to hand over, by peer and answer (ok, refused)."}, []string{"peer", "answer"})
	m.pass = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fedsched_scheduling_pass_seconds",
		Help: "Duration of one scheduling pass of the event loop, in seconds.", Buckets: latencyBuckets})
	m.commit = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "fedsched_store_commit_seconds",
		Help: "Duration of one store transaction of the event loop (group commit), in seconds.", Buckets: latencyBuckets})
	m.reg.MustRegister(m.jobs, m.wait, m.slowdown, m.outcomes, m.fees, m.penalties, m.priceEarned, m.pricePaid, m.admissions, m.rejections, m.pof,
		m.delegations, m.quotesAsked, m.quotesGiven, m.queuesAsked, m.takes, m.pass, m.commit,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "fedsched_loop_queue_depth",
			Help: "Requests waiting for the event loop."}, func() float64 { return float64(len(n.ops)) }),
		snapshotCollector{n},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is the node's metrics registry, for an HTTP handler.
func (n *Node) Registry() *prometheus.Registry { return n.metrics.reg }

// stored counts a job found in the store at recovery.
func (m *metrics) stored(s fedschedv1.JobState) {
	if g := m.jobsByState[s]; g != nil {
		g.Inc()
	}
}

// transition counts a job's state change (prev is UNSPECIFIED for a new
// job); j is the job after the change, and price the price agreed for it
// with a peer (0: none, or the peer took the job on the user's terms).
//
// Money follows the agreement (as the simulator's sim.FedSLA): a job run
// on the user's terms earns its executing site the fee when met and costs
// it the penalty when violated. Under an agreed price the executing peer
// earns the price instead of the fee (and still owes the penalty), and the
// origin earns the fee and pays the price; a violation leaves the origin
// nothing (it passes the peer's penalty on to the user).
func (m *metrics) transition(site string, j *fedschedv1.Job, prev fedschedv1.JobState, price float64) {
	s := j.GetState()
	if s == prev {
		return
	}
	if g := m.jobsByState[prev]; g != nil {
		g.Dec()
	}
	if g := m.jobsByState[s]; g != nil {
		g.Inc()
	}
	switch s {
	case fedschedv1.JobState_JOB_STATE_PENDING:
		if prev != fedschedv1.JobState_JOB_STATE_UNSPECIFIED {
			return
		}
		switch j.GetReason() {
		case fedschedv1.Reason_REASON_OVERBOOKED:
			m.admissions.WithLabelValues("overbooked").Inc()
			m.pof.Observe(j.GetPof())
		case fedschedv1.Reason_REASON_PLACED_IN_FULL:
			m.admissions.WithLabelValues("full").Inc()
		case fedschedv1.Reason_REASON_RECEIVED_FROM_PEER:
			m.delegations.WithLabelValues("in", j.GetOriginSite()).Inc()
			if j.GetOverbooked() {
				m.admissions.WithLabelValues("overbooked").Inc()
				m.pof.Observe(j.GetPof())
			} else {
				m.admissions.WithLabelValues("full").Inc()
			}
		case fedschedv1.Reason_REASON_UNSPECIFIED:
			m.admissions.WithLabelValues("queued").Inc()
		}
		return
	case fedschedv1.JobState_JOB_STATE_RUNNING:
		if st, sub := j.GetStartTime(), j.GetSubmitTime(); st != nil && sub != nil {
			m.wait.Observe(max(0, st.AsTime().Sub(sub.AsTime()).Seconds()))
		}
		return
	case fedschedv1.JobState_JOB_STATE_DELEGATED:
		m.delegations.WithLabelValues("out", j.GetSite()).Inc()
		return
	case fedschedv1.JobState_JOB_STATE_REJECTED:
		m.rejections.WithLabelValues(reasonLabel(j.GetReason())).Inc()
	}
	if !terminal(s) || terminal(prev) {
		return
	}
	if prev == fedschedv1.JobState_JOB_STATE_RUNNING {
		if st, en, sub := j.GetStartTime(), j.GetEndTime(), j.GetSubmitTime(); st != nil && en != nil && sub != nil {
			run := en.AsTime().Sub(st.AsTime()).Seconds()
			wait := st.AsTime().Sub(sub.AsTime()).Seconds()
			m.slowdown.Observe(max(1, (wait+run)/max(run, 10)))
		}
	}
	switch o := j.GetSlaOutcome(); o {
	case fedschedv1.SlaOutcome_SLA_OUTCOME_MET, fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED, fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED:
		m.outcomes.WithLabelValues(strings.ToLower(strings.TrimPrefix(o.String(), "SLA_OUTCOME_"))).Inc()
		met := o == fedschedv1.SlaOutcome_SLA_OUTCOME_MET
		if j.GetSite() != site {
			if met && price > 0 { // delegated under a price: the fee is ours, the price the peer's
				m.fees.Add(j.GetSpec().GetFee())
				m.pricePaid.Add(price)
			}
			return // otherwise executed by a peer on the user's terms: its ledger, not ours
		}
		if met && price > 0 {
			m.priceEarned.Add(price)
		} else if met {
			m.fees.Add(j.GetSpec().GetFee())
		} else if o == fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED {
			m.penalties.Add(j.GetSpec().GetPenalty())
		}
	}
}

func terminal(s fedschedv1.JobState) bool {
	switch s {
	case fedschedv1.JobState_JOB_STATE_COMPLETED, fedschedv1.JobState_JOB_STATE_KILLED, fedschedv1.JobState_JOB_STATE_FAILED,
		fedschedv1.JobState_JOB_STATE_CANCELLED, fedschedv1.JobState_JOB_STATE_REJECTED:
		return true
	}
	return false
}

// reasonLabel is a reason as a label value: "rejected_no_gap".
func reasonLabel(r fedschedv1.Reason) string {
	return strings.ToLower(strings.TrimPrefix(r.String(), "REASON_"))
}

// quoteAnswer is the label of a quote's answer: "offered", a refusal reason,
// or "unreachable" when err is set.
func quoteAnswer(resp *fedschedv1.QuoteResponse, err error) string {
	switch {
	case err != nil:
		return "unreachable"
	case resp.GetOffer() != nil:
		return "offered"
	}
	return reasonLabel(resp.GetRefusal())
}

// since records the time from t0 to now in h.
func since(h prometheus.Histogram, t0 time.Time) { h.Observe(time.Since(t0).Seconds()) }

// snapshotCollector emits the series read from a snapshot of the loop's
// state on each scrape.
type snapshotCollector struct{ n *Node }

var (
	descPending = prometheus.NewDesc("fedsched_pending_jobs",
		"Pending jobs by what they wait for: resources (processors held by running jobs), policy_order (behind other waiting jobs), fixed_reservation, release (their release time), hold (a hold backing a quote), delegation (a peer quote in flight), starting (due now).",
		[]string{"reason"}, nil)
	descProcs     = prometheus.NewDesc("fedsched_procs", "Processors of the site.", nil, nil)
	descBusy      = prometheus.NewDesc("fedsched_procs_busy", "Processors reserved now (running jobs, holds, fixed reservations).", nil, nil)
	descPlanned   = prometheus.NewDesc("fedsched_plan_reservations", "Reservations in the plan, by kind.", []string{"kind"}, nil)
	descHorizon   = prometheus.NewDesc("fedsched_plan_horizon_seconds", "Time from now to the end of the last reservation in the plan, in seconds.", nil, nil)
	descAgree     = prometheus.NewDesc("fedsched_agreements", "Agreements the site keeps, by role (origin: it delegated; peer: it executes) and state.", []string{"role", "state"}, nil)
	descOutbox    = prometheus.NewDesc("fedsched_outcome_reports_pending", "Messages to peers not yet delivered (outcome reports and terminations), by peer.", []string{"peer"}, nil)
	descSamples   = prometheus.NewDesc("fedsched_runtime_samples_total", "Runtime observations the overbooking statistics have learnt from.", nil, nil)
	descClasses   = prometheus.NewDesc("fedsched_runtime_classes", "Job classes the overbooking statistics hold a runtime distribution for.", nil, nil)
	descMembers   = prometheus.NewDesc("fedsched_gossip_members", "Members of the federation as gossip sees them, by state (this site included).", []string{"state"}, nil)
	descSnapshots = prometheus.NewDesc("fedsched_scrape_snapshot_ok", "1 if the scrape could read the loop's state (0: the loop was busy or stopped; the plan series are missing).", nil, nil)
)

func (c snapshotCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPending, descProcs, descBusy, descPlanned, descHorizon, descAgree, descOutbox, descSamples, descClasses, descMembers, descSnapshots} {
		ch <- d
	}
}

func (c snapshotCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	snap, err := c.n.Snapshot(ctx)
	if err != nil {
		ch <- prometheus.MustNewConstMetric(descSnapshots, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descSnapshots, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(descProcs, prometheus.GaugeValue, float64(snap.Procs))
	ch <- prometheus.MustNewConstMetric(descBusy, prometheus.GaugeValue, float64(snap.Procs-snap.Free))
	ch <- prometheus.MustNewConstMetric(descHorizon, prometheus.GaugeValue, float64(max(0, snap.Until-snap.Now)))
	pending := map[string]int{}
	for _, r := range allWaitKinds {
		pending[r] = 0
	}
	kinds := map[string]int{}
	for _, e := range snap.Entries {
		kinds[e.Kind]++
		if e.Wait != nil {
			pending[e.Wait.Kind]++
		}
	}
	for _, e := range snap.Queued {
		if e.Wait != nil {
			pending[e.Wait.Kind]++
		}
	}
	for r, v := range pending {
		ch <- prometheus.MustNewConstMetric(descPending, prometheus.GaugeValue, float64(v), r)
	}
	for _, k := range allEntryKinds {
		ch <- prometheus.MustNewConstMetric(descPlanned, prometheus.GaugeValue, float64(kinds[k]), k)
	}
	agree := map[[2]string]int{}
	outbox := map[string]int{}
	for _, a := range snap.Agreements {
		agree[[2]string{a.Role, a.State}]++
		if a.Pending != "" {
			outbox[a.Other]++
		}
	}
	for k, v := range agree {
		ch <- prometheus.MustNewConstMetric(descAgree, prometheus.GaugeValue, float64(v), k[0], k[1])
	}
	for p, v := range outbox {
		ch <- prometheus.MustNewConstMetric(descOutbox, prometheus.GaugeValue, float64(v), p)
	}
	ch <- prometheus.MustNewConstMetric(descSamples, prometheus.CounterValue, float64(snap.Samples))
	ch <- prometheus.MustNewConstMetric(descClasses, prometheus.GaugeValue, float64(snap.Classes))
	if snap.Federated {
		states := map[string]int{}
		for _, p := range snap.Peers {
			states[p.State]++
		}
		for s, v := range states {
			ch <- prometheus.MustNewConstMetric(descMembers, prometheus.GaugeValue, float64(v), s)
		}
	}
}

// answerOf records a peer's answer to a request for a quote.
func answerOf(peer string, resp *fedschedv1.QuoteResponse, err error, now int64) *fedschedv1.QuoteAnswer {
	a := &fedschedv1.QuoteAnswer{PeerSite: peer, Time: toTime(now)}
	switch {
	case err != nil:
		a.Refusal, a.Message = fedschedv1.Reason_REASON_PEER_UNREACHABLE, "unreachable: "+err.Error()
	case resp.GetOffer() != nil:
		o := resp.GetOffer()
		a.Offered, a.Price = true, o.GetPrice()
		a.Message = fmt.Sprintf("%s to %s, PoF %.3f, price %.2f", humanTime(o.GetStart().GetSeconds()), humanTime(o.GetEnd().GetSeconds()), o.GetPof(), o.GetPrice())
	default:
		a.Refusal, a.Message = resp.GetRefusal(), resp.GetMessage()
	}
	return a
}
