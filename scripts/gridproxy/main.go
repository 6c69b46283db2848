// Command gridproxy writes a proxy of a grid federation for replay speed
// measurements: 170 sites and 188,000 single-processor jobs built from the
// repository's traces (KTH, HPC2N, NASA, Lublin). See package
// sim/gridproxy for how the proxy is built.
//
//	go run ./scripts/gridproxy -out /tmp/grid170
//	fedsched sim --scenario /tmp/grid170/grid170.yaml
package main

import (
	"flag"
	"log/slog"
	"os"

	"github.com/fedsched/fedsched/sim/gridproxy"
)

func main() {
	d := gridproxy.Defaults()
	out := flag.String("out", "grid170", "directory to write the scenario and its per-site traces to")
	flag.IntVar(&d.Sites, "sites", d.Sites, "number of sites")
	flag.IntVar(&d.Jobs, "jobs", d.Jobs, "number of jobs")
	flag.Uint64Var(&d.Seed, "seed", d.Seed, "seed of the site sizes and time shifts")
	flag.StringVar(&d.Policy, "policy", d.Policy, "queue policy of every site")
	flag.Float64Var(&d.Days, "days", d.Days, "span the submissions are compressed into, in days")
	flag.Parse()
	s, err := gridproxy.Write(*out, d)
	if err != nil {
		slog.Error("gridproxy", "err", err)
		os.Exit(1)
	}
	slog.Info("gridproxy", "dir", *out, "scenario", s.Scenario, "sites", s.Sites, "jobs", s.Jobs, "processors", s.Processors, "span_days", s.SpanDays)
}
