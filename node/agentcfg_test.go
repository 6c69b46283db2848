package node

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/discovery"
	"github.com/fedsched/fedsched/node/clock"
	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/node/executor"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/overbook"
	"github.com/fedsched/fedsched/site"
)

type noPeers struct{}

func (noPeers) Members() []discovery.Member { return nil }

// TestAgentConfig: the agent a node would drive has the node's settings;
// site.New takes it.
func TestAgentConfig(t *testing.T) {
	for _, c := range []struct {
		name    string
		policy  string
		ob      config.Overbooking
		fed     bool
		scale   float64
		reply   int64
		learn   bool // LearnOnly
		risk    bool
		minSamp float64
	}{
		{name: "alone, no overbooking", policy: "easy", learn: true, minSamp: config.DefaultMinSamples},
		{name: "overbooking, risk test", policy: "conservative", ob: config.Overbooking{Enabled: true, RiskTest: "risk", MinSamples: 7}, risk: true, minSamp: 7},
		{name: "federated, scaled clock", policy: "easy", fed: true, scale: 10, reply: 20, learn: true, minSamp: config.DefaultMinSamples},
		{name: "federated, real time", policy: "easy", fed: true, scale: 1, reply: 2, learn: true, minSamp: config.DefaultMinSamples},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.Site, cfg.DataDir, cfg.Procs, cfg.Executor, cfg.Policy, cfg.Overbooking = "t", t.TempDir(), 8, "simulated", c.policy, c.ob
			var clk clock.Clock = clock.NewManual(time.Unix(1000, 0))
			if c.scale > 0 {
				clk = clock.Scaled(time.Unix(1000, 0), c.scale)
			}
			deps := Deps{Store: store.NewMemStore(), Executor: executor.NewSimulated(executor.SimulatedConfig{Clock: clk}), Clock: clk,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Version: "test"}
			if c.fed {
				deps.Federation = FederationConfig{Peers: noPeers{}, Transfer: delegation.ACF, MaxCandidates: 4, Prefer: []string{"x"},
					Dial: func(context.Context, string, string) (*grpc.ClientConn, error) { return nil, nil }}
			}
			n, err := New(cfg, deps)
			if err != nil {
				t.Fatal(err)
			}
			ac := n.agentConfig(nil)
			if _, err := site.New(ac); err != nil {
				t.Fatalf("site.New refuses the node's agent: %v", err)
			}
			o := ac.Overbooking
			if ac.Name != "t" || ac.Procs != 8 || ac.Policy.String() != c.policy || !ac.TrackMoves || !ac.NoGrowBack {
				t.Fatalf("site: %+v", ac)
			}
			if o.LearnOnly != c.learn || o.MinSamples != c.minSamp || o.AgeFactor != config.DefaultAgeFactor {
				t.Fatalf("overbooking: %+v", o)
			}
			if _, isRisk := o.Test.(overbook.Risk); isRisk != c.risk {
				t.Fatalf("test %T", o.Test)
			}
			if (ac.Peers != nil) != c.fed {
				t.Fatalf("peers %v", ac.Peers)
			}
			if c.fed && (ac.ReplySeconds != c.reply || ac.HoldSeconds != 60 || ac.PullSeconds != 60 || ac.Transfer != delegation.ACF ||
				ac.Location.MaxCandidates != 4 || len(ac.Prefer) != 1) {
				t.Fatalf("federation: reply %d hold %d pull %d transfer %v location %+v prefer %v", ac.ReplySeconds, ac.HoldSeconds, ac.PullSeconds,
					ac.Transfer, ac.Location, ac.Prefer)
			}
		})
	}
}

// TestPastJobs: the history is read in the order the jobs ended; a
// cancelled job short of its estimate is censored; jobs without an
// estimate or a runtime are skipped.
func TestPastJobs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.swf")
	// id submit wait run procs cpu mem reqprocs reqtime reqmem status ...
	swfText := "1 0 0 500 1 -1 -1 1 1000 -1 1 1 1 1 1 1 -1 -1\n" +
		"2 10 0 100 2 -1 -1 2 1000 -1 5 1 1 1 1 1 -1 -1\n" +
		"3 20 0 100 2 -1 -1 2 -1 -1 1 1 1 1 1 1 -1 -1\n"
	if err := os.WriteFile(path, []byte(swfText), 0o600); err != nil {
		t.Fatal(err)
	}
	past, skipped, err := pastJobs(path)
	if err != nil {
		t.Fatal(err)
	}
	if skipped != 1 || len(past) != 2 || past[0].Ran != 100 || !past[0].Censored || past[1].Ran != 500 || past[1].Censored || past[0].Line != 2 {
		t.Fatalf("skipped %d, %+v", skipped, past)
	}
}
