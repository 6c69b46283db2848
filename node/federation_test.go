package node_test

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// fedSite is one site of an in-process federation started with Launch.
type fedSite struct {
	name   string
	addr   string
	client fedschedv1.SiteServiceClient
	fed    fedschedv1.FederationServiceClient
	conn   *grpc.ClientConn
	cancel context.CancelFunc
	done   chan error
}

// startFederation starts sites of the given sizes on loopback, gossiping,
// sharing one clock scaled by factor, and waits until each sees all.
func startFederation(tb testing.TB, factor float64, procs ...int) []*fedSite {
	tb.Helper()
	return startFederationWith(tb, factor, node.FederationConfig{}, procs...)
}

// startFederationWith is startFederation with fed as every site's
// federation settings.
func startFederationWith(tb testing.TB, factor float64, fed node.FederationConfig, procs ...int) []*fedSite {
	tb.Helper()
	return startFederationSites(tb, factor, fed, nil, procs...)
}

// startFederationSites is startFederationWith with each site's
// configuration changed by mutate (if not nil), given the site's index.
func startFederationSites(tb testing.TB, factor float64, fed node.FederationConfig, mutate func(i int, c *config.Config), procs ...int) []*fedSite {
	tb.Helper()
	clk := clock.Scaled(time.Now(), factor)
	var sites []*fedSite
	var seed string
	for i, p := range procs {
		cfg := config.Default()
		cfg.Site, cfg.DataDir, cfg.Procs, cfg.Executor, cfg.TimeScale = fmt.Sprintf("s%d", i), tb.TempDir(), p, "simulated", factor
		cfg.Gossip.Addr, cfg.Insecure = "127.0.0.1:0", true
		if seed != "" {
			cfg.Gossip.Join = []string{seed}
		}
		if mutate != nil {
			mutate(i, &cfg)
			if err := cfg.Validate(); err != nil {
				tb.Fatal(err)
			}
		}
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		gossip := make(chan string, 1)
		ready := make(chan string, 1)
		s := &fedSite{name: cfg.Site, addr: lis.Addr().String(), cancel: cancel, done: make(chan error, 1)}
		go func() {
			s.done <- node.Launch(ctx, cfg, node.LaunchOptions{Listener: lis, Clock: clk, GossipAddr: gossip, Ready: ready, Federation: fed})
		}()
		if seed == "" {
			seed = <-gossip
		}
		<-ready
		s.conn, err = grpc.NewClient(s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			tb.Fatal(err)
		}
		s.client, s.fed = fedschedv1.NewSiteServiceClient(s.conn), fedschedv1.NewFederationServiceClient(s.conn)
		sites = append(sites, s)
	}
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range sites {
		for {
			r, err := s.fed.ListMembers(context.Background(), &fedschedv1.ListMembersRequest{})
			alive := 0
			for _, m := range r.GetMembers() {
				if m.GetState() == "alive" && m.GetAddr() != "" {
					alive++
				}
			}
			if err == nil && alive == len(sites) {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("%s sees %d of %d sites alive: %v", s.name, alive, len(sites), err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	tb.Cleanup(func() {
		for _, s := range sites {
			s.cancel()
		}
		for _, s := range sites {
			if err := <-s.done; err != nil {
				tb.Errorf("%s: %v", s.name, err)
			}
			s.conn.Close()
		}
	})
	return sites
}

// TestDelegation checks the protocol end to end on three real sites: a job
// the origin cannot take (wider than it) is delegated to a peer that can,
// runs there, and its outcome comes back to the origin, with its route.
func TestDelegation(t *testing.T) {
	sites := startFederation(t, 1000, 2, 8, 4)
	ctx := context.Background()
	sp := spec(6, 600)
	sp.SimRuntimeSeconds = 300
	r, err := sites[0].client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: "wide", Spec: sp})
	if err != nil {
		t.Fatal(err)
	}
	j := r.GetJob()
	if j.GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED || j.GetSite() != "s1" {
		t.Fatalf("submit: %v", j)
	}
	done := waitState(t, sites[0].client, j.GetId(), fedschedv1.JobState_JOB_STATE_COMPLETED)
	var route []string
	for _, h := range done.GetRoute() {
		route = append(route, h.GetSite())
	}
	if fmt.Sprint(route) != "[s0 s0 s1]" || done.GetSite() != "s1" || done.GetEndTime() == nil {
		t.Fatalf("completed at the origin: route %v, %v", route, done)
	}
	// The peer asked answered, and explain says so (s2 is too narrow to
	// be asked).
	if as := done.GetQuoteAnswers(); len(as) != 1 || as[0].GetPeerSite() != "s1" || !as[0].GetOffered() {
		t.Errorf("quote answers %v, want s1's offer", as)
	}
	ex, err := sites[0].client.Explain(ctx, &fedschedv1.ExplainRequest{JobId: j.GetId()})
	if err != nil || !strings.Contains(ex.GetSummary(), "Peers asked: s1 offered") {
		t.Errorf("explain of a delegated job: %q %v", ex.GetSummary(), err)
	}
	// The executing site holds exactly one copy, received from s0.
	peerJobs := listAll(t, sites[1].client)
	if len(peerJobs) != 1 || peerJobs[0].GetOriginSite() != "s0" || peerJobs[0].GetState() != fedschedv1.JobState_JOB_STATE_COMPLETED {
		t.Fatalf("peer jobs: %v", peerJobs)
	}
	// A retried submission replays the answer; no second delegation.
	again, err := sites[0].client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{IdempotencyKey: "wide", Spec: sp})
	if err != nil || !again.GetReplayed() || again.GetJob().GetId() != j.GetId() {
		t.Fatalf("retry: %v %v", again, err)
	}
	if n := len(listAll(t, sites[1].client)) + len(listAll(t, sites[2].client)); n != 1 {
		t.Fatalf("%d copies of the job at peers", n)
	}
	// A job no site can take is rejected with the reason.
	r, err = sites[0].client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: spec(64, 60)})
	if err != nil || r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_REJECTED {
		t.Fatalf("too wide for everyone: %v %v", r, err)
	}
}

// TestExplainListsEveryPeersAnswer: a job no peer can take in time is
// rejected, and explain lists each peer asked with its refusal.
func TestExplainListsEveryPeersAnswer(t *testing.T) {
	sites := startFederation(t, 1000, 2, 8, 8)
	ctx := context.Background()
	// Both peers are full for ten hours.
	for _, s := range sites[1:] {
		busy := spec(8, 36000)
		busy.Release = nil
		if r, err := s.client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: busy}); err != nil || r.GetJob().GetState() == fedschedv1.JobState_JOB_STATE_REJECTED {
			t.Fatalf("filling %s: %v %v", s.name, r, err)
		}
	}
	sp := spec(6, 600)
	sp.Release = nil
	sp.Deadline, sp.Fee, sp.Penalty = timestamppb.New(time.Now().Add(time.Hour)), 1, 1
	r, err := sites[0].client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp})
	if err != nil || r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_REJECTED {
		t.Fatalf("submit: %v %v", r, err)
	}
	var answers []string
	for _, a := range r.GetJob().GetQuoteAnswers() {
		answers = append(answers, fmt.Sprintf("%s %v %v", a.GetPeerSite(), a.GetOffered(), a.GetRefusal()))
	}
	if want := "[s1 false REASON_REJECTED_NO_GAP s2 false REASON_REJECTED_NO_GAP]"; fmt.Sprint(answers) != want {
		t.Errorf("quote answers %v, want %s", answers, want)
	}
	ex, err := sites[0].client.Explain(ctx, &fedschedv1.ExplainRequest{JobId: r.GetJob().GetId()})
	if err != nil || !strings.Contains(ex.GetSummary(), "s1 refused (rejected_no_gap") || !strings.Contains(ex.GetSummary(), "s2 refused (rejected_no_gap") {
		t.Errorf("explain: %q %v", ex.GetSummary(), err)
	}
}

// BenchmarkDelegation measures one delegation through the public API: a
// submission the origin cannot take, quotes to three peers in parallel,
// agree with the best, release the others, all over gRPC on loopback.
func BenchmarkDelegation(b *testing.B) {
	sites := startFederation(b, 1, 1, 64, 64, 64)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sp := spec(2, 3600)
		sp.Release = nil
		t0 := time.Now()
		r, err := sites[0].client.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: sp})
		lat = append(lat, time.Since(t0))
		if err != nil || r.GetJob().GetState() != fedschedv1.JobState_JOB_STATE_DELEGATED {
			b.Fatalf("submit %d: %v %v", i, r.GetJob().GetState(), err)
		}
	}
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Microseconds())/1000, "p99-ms")
}
