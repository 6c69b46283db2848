package node_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fedsched/fedsched/node"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// syncBuffer is a bytes.Buffer several goroutines may write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startLoggedSite is startSite with the node's log written to w.
func startLoggedSite(t *testing.T, cfg config.Config, log *slog.Logger) (fedschedv1.SiteServiceClient, *node.Node) {
	t.Helper()
	clk := clock.Scaled(time.Now(), cfg.TimeScale)
	ex := executor.NewSimulated(executor.SimulatedConfig{Clock: clk})
	n, err := node.New(cfg, node.Deps{Store: store.NewMemStore(), Executor: ex, Clock: clk, Logger: log, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); ex.Run(ctx) }()                    //nolint:errcheck // ends with ctx
	go func() { defer wg.Done(); n.Run(ctx) }()                     //nolint:errcheck // ends with ctx
	go func() { defer wg.Done(); n.Serve(ctx, lis, time.Second) }() //nolint:errcheck // ends with ctx
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); cancel(); wg.Wait() })
	waitServing(t, conn)
	return fedschedv1.NewSiteServiceClient(conn), n
}

func TestDecisionLogLinesCarryJobAndSite(t *testing.T) {
	var buf syncBuffer
	cfg := testConfig(t.TempDir())
	cfg.Log = config.Log{Format: "json", Level: "info"}
	c, _ := startLoggedSite(t, cfg, node.NewLogger(cfg.Log, &buf))
	ctx := context.Background()
	ok, err := c.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{User: "u", Procs: 8, EstimateSeconds: 36000}})
	if err != nil {
		t.Fatal(err)
	}
	// The site is full for ten hours: a job due in two cannot be taken.
	due := timestamppb.New(time.Now().Add(2 * time.Hour))
	bad, err := c.SubmitJob(ctx, &fedschedv1.SubmitJobRequest{Spec: &fedschedv1.JobSpec{User: "u", Procs: 8, EstimateSeconds: 60, Deadline: due, Fee: 1}})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("not JSON: %q", line)
		}
		msg, _ := rec["msg"].(string)
		if !strings.HasPrefix(msg, "job ") {
			continue
		}
		if rec["site"] != "t" {
			t.Errorf("decision line without the site: %q", line)
		}
		id, _ := rec["job"].(string)
		seen[id+" "+msg] = true
	}
	for _, want := range []string{ok.GetJob().GetId() + " job pending", bad.GetJob().GetId() + " job rejected"} {
		if !seen[want] {
			t.Errorf("no decision line %q; got %v", want, seen)
		}
	}
}
