package node_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/executor"
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
// connection); conns=own: each client has its own.
//
// Reported: submits/s (over the whole run), and the p50/p99/max latency of
// one SubmitJob call as the client sees it, in milliseconds.
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
			b.Run(name, func(b *testing.B) { benchDurableSubmit(b, own, delay) })
		}
	}
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

func benchDurableSubmit(b *testing.B, ownConns bool, batchDelay time.Duration) {
	dir := b.TempDir()
	bolt, err := store.OpenBolt(dir, &store.Options{MaxBatchDelay: batchDelay})
	if err != nil {
		b.Fatal(err)
	}
	st := &timedStore{Store: bolt}
	cfg := testConfig(dir)
	cfg.Procs, cfg.TimeScale = 64, 1
	clk := clock.Real()
	ex := executor.NewSimulated(executor.SimulatedConfig{Clock: clk})
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := node.New(cfg, node.Deps{Store: st, Executor: ex, Clock: clk, Logger: log, Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 3)
	go func() { done <- ex.Run(ctx) }()
	go func() { done <- n.Run(ctx) }()
	go func() { done <- n.Serve(ctx, lis, time.Second) }()
	defer func() {
		cancel()
		for range 3 {
			if err := <-done; err != nil {
				b.Errorf("stop: %v", err)
			}
		}
		st.Close()
	}()

	dial := func() *grpc.ClientConn {
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		return conn
	}
	conns := make([]*grpc.ClientConn, benchClients)
	conns[0] = dial()
	for i := 1; i < benchClients; i++ {
		if ownConns {
			conns[i] = dial()
		} else {
			conns[i] = conns[0]
		}
	}
	defer func() {
		for i, c := range conns {
			if i == 0 || ownConns {
				c.Close()
			}
		}
	}()
	benchWaitServing(b, conns[0])

	// Every job: 1 to 8 processors, 1 to 4 hours, released tomorrow.
	release := timestamppb.New(time.Now().Add(24 * time.Hour))
	var keys atomic.Int64
	submit := func(ctx context.Context, c fedschedv1.SiteServiceClient) (time.Duration, error) {
		k := keys.Add(1)
		sp := &fedschedv1.JobSpec{Procs: int32(1 + k%8), EstimateSeconds: 3600 * (1 + k%4), User: "alice", App: "bench", Release: release}
		t0 := time.Now()
		r, err := c.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: fmt.Sprintf("bench-%d", k), Spec: sp})
		lat := time.Since(t0)
		if err == nil && (r.GetReplayed() || r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_PENDING) {
			err = fmt.Errorf("submit %d: replayed %v, state %v", k, r.GetReplayed(), r.GetJob().GetState())
		}
		return lat, err
	}
	// Warm up: connections, the store's first pages, the plan.
	for i := range 200 {
		if _, err := submit(ctx, fedschedv1.NewSiteServiceClient(conns[i%benchClients])); err != nil {
			b.Fatal(err)
		}
	}

	// b.N submissions shared by the clients through a counter.
	var next atomic.Int64
	lats := make([][]time.Duration, benchClients)
	var wg sync.WaitGroup
	var (
		failOnce sync.Once
		failed   error
	)
	st.reset()
	b.ResetTimer()
	start := time.Now()
	for i := range benchClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := fedschedv1.NewSiteServiceClient(conns[i])
			own := make([]time.Duration, 0, b.N/benchClients+1)
			for next.Add(1) <= int64(b.N) {
				lat, err := submit(ctx, c)
				if err != nil {
					failOnce.Do(func() { failed = err })
					return
				}
				own = append(own, lat)
			}
			lats[i] = own
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	pct := func(p float64) time.Duration { return all[min(len(all)-1, int(p*float64(len(all))))] }
	b.ReportMetric(float64(len(all))/elapsed.Seconds(), "submits/s")
	b.ReportMetric(ms(pct(0.50)), "p50-ms")
	b.ReportMetric(ms(pct(0.99)), "p99-ms")
	b.ReportMetric(ms(all[len(all)-1]), "max-ms")
	if a := st.applies.Load(); a > 0 {
		b.ReportMetric(float64(a)/elapsed.Seconds(), "commits/s")
		b.ReportMetric(float64(st.jobs.Load())/float64(a), "jobs/commit")
		b.ReportMetric(float64(st.applyNs.Load())/float64(a)/1e6, "commit-ms")
	}
	if r := st.idemReads.Load(); r > 0 {
		b.ReportMetric(float64(st.idemNs.Load())/float64(r)/1e3, "idem-read-us")
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
