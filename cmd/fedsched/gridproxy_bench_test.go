package main

import (
	"context"
	"syscall"
	"testing"
	"time"

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
// jobs/s is the proxy's 188,000 jobs over the time of one operation;
// cpu-s/op the CPU time (user and system) the process used per operation,
// which the other work of a shared machine disturbs less than wall time.
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
			cpu := cpuTime()
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
			b.ReportMetric((cpuTime()-cpu).Seconds()/float64(b.N), "cpu-s/op")
		}
	}
	b.Run("federated", replay(true))
	b.Run("alone", replay(false))
	b.Run("command", func(b *testing.B) {
		cpu := cpuTime()
		for b.Loop() {
			if _, _, err := runCLI(context.Background(), "sim", "--scenario", s.Scenario); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(s.Jobs)*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		b.ReportMetric((cpuTime()-cpu).Seconds()/float64(b.N), "cpu-s/op")
	})
}

// cpuTime is the CPU time the process has used so far (user and system).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
