package node_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// benchClients is the number of concurrent clients of BenchmarkDurableSubmit.
const benchClients = 8

// BenchmarkDurableSubmit measures durable submissions through gRPC on
// loopback: a real node on a bbolt store in a temporary directory, the
// simulated executor on the real clock, and 8 client goroutines submitting
// as fast as the node answers. Every submission has a fresh idempotency key
// and a job released tomorrow, so nothing starts and every reply waits for
// the fsync of the turn that decided it (group commit).
//
// conns=shared: the 8 clients share one grpc.ClientConn (one HTTP/2
// connection); conns=own: each client has its own. clients=1: one client
// alone, whose every commit carries its one job (what the group commit's
// gather may cost a client nobody joins). arrivals=R/s: no clients in a
// loop, but submissions at random times at R a second, each sent whether
// or not the earlier ones were answered (what the gather costs traffic
// that does not come back in step with the commits).
//
// Reported: submits/s (over the whole run), and the p50/p99/max latency of
// one SubmitJob call as the client sees it, in milliseconds; cpu-us/submit,
// gc-us/submit and alloc-B/submit, the whole process's CPU (clients
// included), the collector's part of it, and the bytes allocated, per
// submission (steadier than submits/s on a shared machine).
//
// Also reported, from a wrapper around the store: commits/s (Store.Apply
// calls), jobs/commit (jobs written per Apply: the group-commit batch),
// commit-ms (mean time in Apply, fsync included) and idem-read-us (mean
// time of the loop's GetIdempotencyKey reads, one per submission).
//
// The store is opened as node.Launch opens it: MaxBatchDelay -1, so that
// each of the loop's commits starts at once (the loop groups its own
// writes). The batch-delay=1ms variants open it with the store's default
// delay instead, bbolt's DB.Batch wait of 1 ms, which the event loop, as
// the store's only writer, pays on every commit for nothing; they show
// what that wait costs.
func BenchmarkDurableSubmit(b *testing.B) {
	for _, delay := range []time.Duration{-1, 0} {
		for _, own := range []bool{false, true} {
			name := "conns=shared"
			if own {
				name = "conns=own"
			}
			if delay == 0 {
				name = "batch-delay=1ms/" + name
			}
			b.Run(name, func(b *testing.B) {
				benchDurableSubmit(b, durableCase{clients: benchClients, ownConns: own, batchDelay: delay})
			})
		}
	}
	// While jobs start and end: besides the clients' submissions, a
	// steady stream of short jobs (1 processor, 2 s estimate, 1 s runtime,
	// released now) starts and ends early on the 64 processors, so that
	// turns also carry starts, exits and re-planning.
	b.Run("while-running/conns=shared", func(b *testing.B) {
		benchDurableSubmit(b, durableCase{clients: benchClients, batchDelay: -1, churn: 40})
	})
	// One client alone: no other client's request can share its commit,
	// so its latency is a round trip, the turn's work and one commit, plus
	// whatever the group commit's gather makes it wait for nobody.
	b.Run("clients=1", func(b *testing.B) { benchDurableSubmit(b, durableCase{clients: 1, batchDelay: -1}) })
	// Open arrivals: submissions come at random times (a Poisson process
	// of the given rate), each on its own, whether or not the earlier ones
	// were answered, as from many users each submitting now and then. No
	// client waits for another, so a turn that waits for requests to share
	// its commit only delays the ones it holds: the latency shows what the
	// gather costs such traffic.
	for _, rate := range []int{500, 2000} {
		b.Run(fmt.Sprintf("arrivals=%d/s", rate), func(b *testing.B) {
			benchDurableSubmit(b, durableCase{batchDelay: -1, rate: rate})
		})
	}
}

// durableCase is one variant of BenchmarkDurableSubmit.
type durableCase struct {
	clients    int           // clients that each submit as soon as answered
	ownConns   bool          // one connection each (else one shared)
	batchDelay time.Duration // the store's MaxBatchDelay (-1: as Launch opens it)
	churn      int           // short jobs a second that start and end meanwhile
	rate       int           // > 0: open arrivals at this rate instead of clients
}

// timedStore counts and times the store calls the event loop makes per
// submission.
type timedStore struct {
	store.Store
	applies, jobs, applyNs atomic.Int64
	idemReads, idemNs      atomic.Int64
}

func (s *timedStore) Apply(ctx context.Context, c store.Changes) error {
	t0 := time.Now()
	err := s.Store.Apply(ctx, c)
	s.applyNs.Add(int64(time.Since(t0)))
	s.applies.Add(1)
	s.jobs.Add(int64(len(c.PutJobs)))
	return err
}

func (s *timedStore) GetIdempotencyKey(ctx context.Context, key string) (store.IdempotencyRecord, error) {
	t0 := time.Now()
	r, err := s.Store.GetIdempotencyKey(ctx, key)
	s.idemNs.Add(int64(time.Since(t0)))
	s.idemReads.Add(1)
	return r, err
}

func (s *timedStore) reset() {
	for _, c := range []*atomic.Int64{&s.applies, &s.jobs, &s.applyNs, &s.idemReads, &s.idemNs} {
		c.Store(0)
	}
}

// benchDurableSubmit runs one variant's submissions.
func benchDurableSubmit(b *testing.B, dc durableCase) {
	cfg := testConfig("")
	cfg.Procs = 64
	bn := startBenchNode(b, cfg, "", dc.batchDelay)
	defer bn.stop()
	st := bn.st
	conns := make([]*grpc.ClientConn, max(dc.clients, 1))
	for i := range conns {
		conns[i] = bn.conn
		if dc.ownConns && i > 0 {
			c, err := grpc.NewClient(bn.conn.Target(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			conns[i] = c
		}
	}

	// Every job: 1 to 8 processors, 1 to 4 hours, released tomorrow.
	release := timestamppb.New(time.Now().Add(24 * time.Hour))
	var keys atomic.Int64
	submit := func(c fedschedv1.SiteServiceClient) (time.Duration, error) {
		k := keys.Add(1)
		sp := &fedschedv1.JobSpec{Procs: int32(1 + k%8), EstimateSeconds: 3600 * (1 + k%4), User: "alice", App: "bench", Release: release}
		t0 := time.Now()
		r, err := c.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{IdempotencyKey: fmt.Sprintf("bench-%d", k), Spec: sp})
		lat := time.Since(t0)
		if err == nil && (r.GetReplayed() || r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_PENDING) {
			err = fmt.Errorf("submit %d: replayed %v, state %v", k, r.GetReplayed(), r.GetJob().GetState())
		}
		return lat, err
	}
	// Warm up: connections, the store's first pages, the plan.
	for i := range 200 {
		if _, err := submit(fedschedv1.NewSiteServiceClient(conns[i%len(conns)])); err != nil {
			b.Fatal(err)
		}
	}
	if dc.churn > 0 {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { churnJobs(b, bn.conn, dc.churn, stop) })
		defer func() { close(stop); wg.Wait() }()
		time.Sleep(2 * time.Second) // the first short jobs end
	}

	// b.N submissions shared by the clients.
	st.reset()
	ends0 := bn.ends()
	stopProfile := profileMeasured(b)
	cost := startCost()
	var (
		lats    []time.Duration
		elapsed time.Duration
	)
	if dc.rate > 0 {
		lats, elapsed = benchArrivalsRun(b, dc.rate, bn.conn, submit)
	} else {
		lats, elapsed = benchClientsRun(b, dc.clients, conns, submit)
	}
	cost.report(b, len(lats))
	stopProfile()
	reportLatencies(b, lats, elapsed)
	if dc.churn > 0 {
		b.ReportMetric(float64(bn.ends()-ends0)/elapsed.Seconds(), "ends/s")
	}
	if a := st.applies.Load(); a > 0 {
		b.ReportMetric(float64(a)/elapsed.Seconds(), "commits/s")
		b.ReportMetric(float64(st.jobs.Load())/float64(a), "jobs/commit")
		b.ReportMetric(float64(st.applyNs.Load())/float64(a)/1e6, "commit-ms")
	}
	if r := st.idemReads.Load(); r > 0 {
		b.ReportMetric(float64(st.idemNs.Load())/float64(r)/1e3, "idem-read-us")
	}
}

// benchArrivalsRun makes b.N calls of submit on conn at the times of a
// Poisson process of rate calls a second (exponential gaps, from a fixed
// seed), each call in its own goroutine, and returns the sorted latencies
// and the elapsed time. A call whose time has passed (the sleep overslept)
// starts at once, so that the mean rate holds.
func benchArrivalsRun(b *testing.B, rate int, conn *grpc.ClientConn, submit func(c fedschedv1.SiteServiceClient) (time.Duration, error)) ([]time.Duration, time.Duration) {
	b.Helper()
	c := fedschedv1.NewSiteServiceClient(conn)
	rng := rand.New(rand.NewPCG(16, uint64(rate)))
	lats := make([]time.Duration, b.N)
	var (
		wg       sync.WaitGroup
		failOnce sync.Once
		failed   error
	)
	b.ResetTimer()
	start := time.Now()
	at := start
	for i := range b.N {
		at = at.Add(time.Duration(rng.ExpFloat64() / float64(rate) * float64(time.Second)))
		if d := time.Until(at); d > 0 {
			time.Sleep(d)
		}
		wg.Go(func() {
			lat, err := submit(c)
			if err != nil {
				failOnce.Do(func() { failed = err })
			}
			lats[i] = lat
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	slices.Sort(lats)
	return lats, elapsed
}

// churnJobs submits rate short jobs a second (1 processor, 2 s estimate,
// 1 s runtime, released now) until stop is closed.
func churnJobs(b *testing.B, conn *grpc.ClientConn, rate int, stop <-chan struct{}) {
	c := fedschedv1.NewSiteServiceClient(conn)
	t := time.NewTicker(time.Second / time.Duration(rate))
	defer t.Stop()
	for k := 0; ; k++ {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		sp := &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 2, SimRuntimeSeconds: 1, User: "bob", App: "churn"}
		if _, err := c.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{IdempotencyKey: fmt.Sprintf("churn-%d", k), Spec: sp}); err != nil {
			b.Errorf("churn: %v", err)
			return
		}
	}
}

// benchWaitServing is waitServing for a benchmark.
func benchWaitServing(b *testing.B, conn *grpc.ClientConn) {
	b.Helper()
	hc := healthpb.NewHealthClient(conn)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{})
		if err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Fatal("node never became SERVING")
}
