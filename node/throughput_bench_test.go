package node_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// BenchmarkNodeThroughput measures what one node decides per second while
// its queue holds 1k, 10k or 100k waiting jobs: the issue's "node cost per
// event with a long queue". A real node (bbolt in a temporary directory,
// the simulated executor on the real clock, conservative policy, real gRPC
// on loopback) is first given `waiting` jobs of 1 processor and 1 hour,
// released over the 7 days from tomorrow, so that each has a reservation
// and none starts during the run. Then 8 clients submit, as fast as the
// node answers, jobs that start at once and end early (1 processor, 2 s
// estimate, 1 s runtime): every submission is a durable submit, a start
// and an early end (which makes the conservative policy re-plan).
//
// Reported: submits/s and the p50/p99 of SubmitJob as the client sees it;
// ends/s, the jobs that ended during the run per second; cpu-us/submit,
// gc-us/submit and alloc-B/submit, the process's and the collector's CPU
// and the bytes allocated per submission;
// heap-B/waiting, heap-objs/waiting and scan-B/waiting, the live heap after
// the fill per waiting job (all of it, its objects, the part the collector
// scans for pointers). The target is submits/s at 100k within 20 % of
// submits/s at 1k.
func BenchmarkNodeThroughput(b *testing.B) {
	for _, waiting := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("waiting=%dk", waiting/1000), func(b *testing.B) {
			benchThroughput(b, "", waiting)
		})
	}
}

// shmDir is where BenchmarkNodeOnTmpfs keeps its store: a tmpfs, whose
// fsync returns at once.
const shmDir = "/dev/shm"

// BenchmarkNodeOnTmpfs is BenchmarkNodeThroughput with the node's store on
// a tmpfs (/dev/shm): every commit still runs bbolt's whole write path,
// but its fdatasync costs nothing, so the figures measure the node's own
// cost per event without the disk's noise (on a shared machine the other
// programs' writes set the fsync time, and with it the wall-clock
// throughput of the disk benchmark). It is skipped where /dev/shm is not a
// directory.
func BenchmarkNodeOnTmpfs(b *testing.B) {
	if fi, err := os.Stat(shmDir); err != nil || !fi.IsDir() {
		b.Skipf("no tmpfs at %s: %v", shmDir, err)
	}
	for _, waiting := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("waiting=%dk", waiting/1000), func(b *testing.B) {
			dir, err := os.MkdirTemp(shmDir, "fedsched-bench-")
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { os.RemoveAll(dir) })
			benchThroughput(b, dir, waiting)
		})
	}
}

// benchNode is a node started for a benchmark, with one client connection.
type benchNode struct {
	conn *grpc.ClientConn
	st   *timedStore
	ends func() int64 // jobs that ended so far
	stop func()
}

// startBenchNode starts a node on a fresh bbolt store in dir (a temporary
// directory if dir is "") opened as node.Launch opens it (unless batchDelay
// says otherwise), the simulated executor on the real clock, and gRPC on
// loopback, and waits until it serves.
func startBenchNode(b *testing.B, cfg config.Config, dir string, batchDelay time.Duration) *benchNode {
	b.Helper()
	if dir == "" {
		dir = b.TempDir()
	}
	cfg.DataDir, cfg.TimeScale = dir, 1
	// A benchmark's one user submits every job: the per-user limits
	// (pending jobs, idempotency keys) would refuse them.
	cfg.Limits.MaxPendingJobs, cfg.Limits.MaxIdempotencyKeys = 1<<30, 1<<30
	// As node.Launch opens it: with the write-ahead log unless
	// cfg.Store.Log is false (FEDSCHED_BENCH_STORE_LOG=false) or a batch
	// delay is asked for (the bbolt file alone).
	if v := os.Getenv("FEDSCHED_BENCH_STORE_LOG"); v != "" {
		cfg.Store.Log = v == "true"
	}
	var (
		fst store.Store
		err error
	)
	if cfg.Store.Log && batchDelay < 0 {
		fst, err = store.OpenWAL(dir, nil)
	} else {
		fst, err = store.OpenBolt(dir, &store.Options{MaxBatchDelay: batchDelay})
	}
	if err != nil {
		b.Fatal(err)
	}
	st := &timedStore{Store: fst}
	clk := clock.Real()
	ex := executor.NewSimulated(executor.SimulatedConfig{Clock: clk})
	counted := &countingExits{Executor: ex, out: make(chan executor.Exit, 1024)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	n, err := node.New(cfg, node.Deps{Store: st, Executor: counted, Clock: clk, Logger: log, Version: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 4)
	go func() { done <- ex.Run(ctx) }()
	go func() { done <- counted.relay(ctx) }()
	go func() { done <- n.Run(ctx) }()
	go func() { done <- n.Serve(ctx, lis, time.Second) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	bn := &benchNode{conn: conn, st: st, ends: counted.ends.Load, stop: func() {
		conn.Close()
		cancel()
		for range 4 {
			if err := <-done; err != nil {
				b.Errorf("stop: %v", err)
			}
		}
		st.Close()
	}}
	benchWaitServing(b, conn)
	return bn
}

// countingExits counts the exits the executor reports to the node.
type countingExits struct {
	executor.Executor
	out  chan executor.Exit
	ends atomic.Int64
}

func (c *countingExits) Exits() <-chan executor.Exit { return c.out }

func (c *countingExits) relay(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-c.Executor.Exits():
			c.ends.Add(1)
			select {
			case c.out <- e:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// fillQueue submits n jobs of 1 processor and 1 hour released over the 7
// days from tomorrow, from 64 concurrent clients.
func fillQueue(b *testing.B, conn *grpc.ClientConn, n int) {
	b.Helper()
	c := fedschedv1.NewSiteServiceClient(conn)
	tomorrow := time.Now().Add(24 * time.Hour).Truncate(time.Hour)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range 64 {
		wg.Go(func() {
			for k := next.Add(1); k <= int64(n); k = next.Add(1) {
				rel := timestamppb.New(tomorrow.Add(time.Duration(k%(7*24*60)) * time.Minute))
				sp := &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 3600, User: fmt.Sprintf("u%d", k%16), App: "fill", Release: rel}
				r, err := c.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{IdempotencyKey: fmt.Sprintf("fill-%d", k), Spec: sp})
				if err == nil && r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_PENDING {
					err = fmt.Errorf("fill %d: state %v", k, r.GetJob().GetState())
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// benchClientsRun runs b.N calls of submit shared by the given number of
// clients, client i on conns[i % len(conns)], and returns the sorted
// latencies and the elapsed time.
func benchClientsRun(b *testing.B, clients int, conns []*grpc.ClientConn, submit func(c fedschedv1.SiteServiceClient) (time.Duration, error)) ([]time.Duration, time.Duration) {
	b.Helper()
	var next atomic.Int64
	lats := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	var (
		failOnce sync.Once
		failed   error
	)
	b.ResetTimer()
	start := time.Now()
	for i := range clients {
		wg.Go(func() {
			c := fedschedv1.NewSiteServiceClient(conns[i%len(conns)])
			own := make([]time.Duration, 0, b.N/clients+1)
			for next.Add(1) <= int64(b.N) {
				lat, err := submit(c)
				if err != nil {
					failOnce.Do(func() { failed = err })
					return
				}
				own = append(own, lat)
			}
			lats[i] = own
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if failed != nil {
		b.Fatal(failed)
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	return all, elapsed
}

// profileMeasured starts a CPU profile of the measured phase alone (not
// the queue's fill, which -test.cpuprofile would include) when
// FEDSCHED_BENCH_CPUPROFILE names a file, and returns what stops it; the
// returned function also writes a heap profile of the node as it is at the
// end of the phase when FEDSCHED_BENCH_MEMPROFILE names a file.
func profileMeasured(b *testing.B) func() {
	b.Helper()
	heap := func() {
		path := os.Getenv("FEDSCHED_BENCH_MEMPROFILE")
		if path == "" {
			return
		}
		f, err := os.Create(path)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		if err := pprof.WriteHeapProfile(f); err != nil {
			b.Error(err)
		}
		if err := f.Close(); err != nil {
			b.Error(err)
		}
	}
	path := os.Getenv("FEDSCHED_BENCH_CPUPROFILE")
	if path == "" {
		return heap
	}
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		if err := f.Close(); err != nil {
			b.Error(err)
		}
		heap()
	}
}

// benchBarrier holds the measured phase, when FEDSCHED_BENCH_BARRIER names
// a directory, until FEDSCHED_BENCH_PARTIES processes (2 if unset) have
// reached it with the same b.N: benchmarks run side by side as separate
// processes (waiting=1k in one, waiting=100k in the other, each with its
// own heap and collector) then measure at the same time, under the same
// load from the rest of the machine, so that their ratio does not depend
// on how that load moved between two runs.
func benchBarrier(b *testing.B) {
	b.Helper()
	dir := os.Getenv("FEDSCHED_BENCH_BARRIER")
	if dir == "" {
		return
	}
	parties := 2
	if v := os.Getenv("FEDSCHED_BENCH_PARTIES"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 {
			b.Fatalf("FEDSCHED_BENCH_PARTIES=%q: want a positive number", v)
		}
		parties = p
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%d-%d.ready", b.N, os.Getpid())), nil, 0o644); err != nil {
		b.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Minute); ; time.Sleep(5 * time.Millisecond) {
		ready, err := filepath.Glob(filepath.Join(dir, fmt.Sprintf("%d-*.ready", b.N)))
		if err != nil {
			b.Fatal(err)
		}
		if len(ready) >= parties {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("benchmark barrier %s: %d of %d processes after 10 minutes", dir, len(ready), parties)
		}
	}
}

// cpuTime is the CPU time the process has used (user and system): the cost
// of a submission in CPU, which the other agents' load on a shared machine
// disturbs much less than wall-clock throughput.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// gcBusy is the CPU time the garbage collector has taken from the program
// so far, in seconds: its pauses, dedicated and fractional mark workers
// and the mark assists of allocating goroutines. Mark work done by idle
// processors (which would otherwise run nothing) is left out.
func gcBusy() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}, {Name: "/cpu/classes/gc/mark/idle:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 || s[1].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64() - s[1].Value.Float64()
}

// uint64Metric is the runtime/metrics value of name, a uint64 metric (0
// if the runtime has no such metric).
func uint64Metric(name string) uint64 {
	s := []metrics.Sample{{Name: name}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// cost is where the process's CPU, the collector's CPU and the bytes
// allocated stood when a measured phase began.
type cost struct {
	cpu   time.Duration
	gc    float64
	alloc uint64
}

// startCost notes the process's CPU, GC CPU and allocated bytes now.
func startCost() cost { return cost{cpu: cpuTime(), gc: gcBusy(), alloc: allocated()} }

// allocated is the bytes allocated on the heap so far.
func allocated() uint64 { return uint64Metric("/gc/heap/allocs:bytes") }

// report reports, per submission of the n since c: cpu-us/submit (the
// whole process, clients included), gc-us/submit (the collector's part)
// and alloc-B/submit (bytes allocated on the heap).
func (c cost) report(b *testing.B, n int) {
	gc, alloc, cpu := gcBusy()-c.gc, allocated()-c.alloc, cpuTime()-c.cpu
	b.ReportMetric(float64(cpu)/float64(n)/1e3, "cpu-us/submit")
	b.ReportMetric(gc*1e6/float64(n), "gc-us/submit")
	b.ReportMetric(float64(alloc)/float64(n), "alloc-B/submit")
}

// reportLatencies reports submits/s and the p50/p99/max of sorted lats.
func reportLatencies(b *testing.B, lats []time.Duration, elapsed time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	pct := func(p float64) time.Duration { return lats[min(len(lats)-1, int(p*float64(len(lats))))] }
	b.ReportMetric(float64(len(lats))/elapsed.Seconds(), "submits/s")
	b.ReportMetric(ms(pct(0.50)), "p50-ms")
	b.ReportMetric(ms(pct(0.99)), "p99-ms")
	b.ReportMetric(ms(lats[len(lats)-1]), "max-ms")
}

// benchThroughput runs BenchmarkNodeThroughput's measurement with the
// store in dir ("": a temporary directory).
func benchThroughput(b *testing.B, dir string, waiting int) {
	cfg := testConfig("")
	cfg.Procs = 16384
	cfg.Limits.MaxPendingJobs = 1 << 30
	bn := startBenchNode(b, cfg, dir, -1)
	defer bn.stop()
	t0 := time.Now()
	fillQueue(b, bn.conn, waiting)
	b.Logf("filled %d waiting jobs in %v", waiting, time.Since(t0).Round(time.Millisecond))
	// The live heap per waiting job, what the collector marks each cycle.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heapB, heapObjs := float64(ms.HeapAlloc)/float64(waiting), float64(ms.HeapObjects)/float64(waiting)
	// Of which the part the collector must scan for pointers at each
	// cycle (the rest, such as byte slices, it only marks): the heap the
	// last collection found holding pointers.
	scanB := float64(uint64Metric("/gc/scan/heap:bytes")) / float64(waiting)

	var keys atomic.Int64
	submit := func(c fedschedv1.SiteServiceClient) (time.Duration, error) {
		k := keys.Add(1)
		sp := &fedschedv1.JobSpec{Procs: 1, EstimateSeconds: 2, SimRuntimeSeconds: 1, User: "alice", App: "churn"}
		t0 := time.Now()
		r, err := c.SubmitJob(context.Background(), &fedschedv1.SubmitJobRequest{IdempotencyKey: fmt.Sprintf("run-%d", k), Spec: sp})
		lat := time.Since(t0)
		if err == nil && r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_PENDING {
			err = fmt.Errorf("submit %d: state %v", k, r.GetJob().GetState())
		}
		return lat, err
	}
	ends0 := bn.ends()
	benchBarrier(b)
	bn.st.reset()
	stopProfile := profileMeasured(b)
	cost := startCost()
	lats, elapsed := benchClientsRun(b, benchClients, []*grpc.ClientConn{bn.conn}, submit)
	cost.report(b, len(lats))
	stopProfile()
	reportLatencies(b, lats, elapsed)
	b.ReportMetric(float64(bn.ends()-ends0)/elapsed.Seconds(), "ends/s")
	b.ReportMetric(heapB, "heap-B/waiting") // reported here: b.ResetTimer drops metrics
	b.ReportMetric(heapObjs, "heap-objs/waiting")
	b.ReportMetric(scanB, "scan-B/waiting")
	if a := bn.st.applies.Load(); a > 0 {
		b.ReportMetric(float64(a)/elapsed.Seconds(), "commits/s")
		b.ReportMetric(float64(bn.st.applyNs.Load())/float64(a)/1e6, "commit-ms")
	}
}
