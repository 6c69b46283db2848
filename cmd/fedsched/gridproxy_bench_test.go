package main

import (
	"context"
	"testing"

	"github.com/fedsched/fedsched/sim"
	"github.com/fedsched/fedsched/sim/gridproxy"
)

// BenchmarkGridProxy times the 170-site grid row on the proxy
// sim/gridproxy builds from the embedded traces (170 sites, 188,000
// single-processor jobs, EASY, ACF, 3 candidates; built once, outside the
// timer):
//
//   - federated: the federated replay (sim.RunFederation, Federate on),
//     from the built scenario;
//   - alone: the baseline replay, every site alone;
//   - command: the whole `fedsched sim --scenario grid170.yaml` path,
//     loading the 170 traces, both replays (two at a time) and the
//     report, output discarded.
//
// jobs/s is the proxy's 188,000 jobs over the time of one operation.
//
//	go test -run '^$' -bench GridProxy -benchtime 3x -count 3 ./cmd/fedsched
func BenchmarkGridProxy(b *testing.B) {
	s, err := gridproxy.Write(b.TempDir(), gridproxy.Defaults())
	if err != nil {
		b.Fatal(err)
	}
	sc, err := sim.LoadScenario(s.Scenario)
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := sc.Build()
	if err != nil {
		b.Fatal(err)
	}
	replay := func(federate bool) func(*testing.B) {
		return func(b *testing.B) {
			c := cfg
			c.Federate = federate
			for b.Loop() {
				res, err := sim.RunFederation(context.Background(), c)
				if err != nil {
					b.Fatal(err)
				}
				if len(res.Records) != s.Jobs {
					b.Fatalf("%d records, want %d", len(res.Records), s.Jobs)
				}
			}
			b.ReportMetric(float64(s.Jobs)*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		}
	}
	b.Run("federated", replay(true))
	b.Run("alone", replay(false))
	b.Run("command", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := runCLI(context.Background(), "sim", "--scenario", s.Scenario); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(s.Jobs)*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	})
}
