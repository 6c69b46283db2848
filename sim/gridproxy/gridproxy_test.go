package gridproxy_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fedsched/fedsched/sim"
	"github.com/fedsched/fedsched/sim/gridproxy"
)

// digest hashes the scenario (its directory replaced by DIR, as the trace
// paths are absolute) followed by the site traces in name order.
func digest(t *testing.T, dir, scenario string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	y, err := os.ReadFile(scenario)
	if err != nil {
		t.Fatal(err)
	}
	h.Write([]byte(strings.ReplaceAll(string(y), abs, "DIR")))
	sites, err := filepath.Glob(filepath.Join(dir, "site*.swf"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range sites {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestWriteIsTheIssuesProxy: the files are byte for byte those the
// command wrote before its generator moved into this package (digests of
// `go run ./scripts/gridproxy` at 868f31b), so figures measured on the
// proxy stay comparable.
func TestWriteIsTheIssuesProxy(t *testing.T) {
	for _, c := range []struct {
		o    gridproxy.Options
		want string
	}{
		{gridproxy.Options{Sites: 12, Jobs: 5000, Seed: 3, Policy: "fcfs", Days: 2}, "74035a4eebd55b42e236e4620daee06ec793dd8cd04f1bf7b47f7167f4f0a353"},
		{gridproxy.Defaults(), "46d3acbd0e5bc6faffff18a790e81fb5ec48593f475a452f86ea91e329684a38"},
	} {
		if testing.Short() && c.o.Jobs > 10000 {
			continue
		}
		dir := t.TempDir()
		s, err := gridproxy.Write(dir, c.o)
		if err != nil {
			t.Fatal(err)
		}
		if got := digest(t, dir, s.Scenario); got != c.want {
			t.Errorf("%+v: digest %s, want %s", c.o, got, c.want)
		}
	}
}

// TestWriteLoadsAsScenario: the written scenario loads and builds, with
// the sites, jobs and processors Write reports, every job on one
// processor.
func TestWriteLoadsAsScenario(t *testing.T) {
	o := gridproxy.Options{Sites: 9, Jobs: 3000, Seed: 2, Policy: "easy", Days: 1}
	s, err := gridproxy.Write(filepath.Join(t.TempDir(), "new"), o)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := sim.LoadScenario(s.Scenario)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := sc.Build()
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Sites) != s.Sites || s.Sites != o.Sites {
		t.Fatalf("%d sites built, %d written, %d asked", len(cfg.Sites), s.Sites, o.Sites)
	}
	jobs, procs := 0, 0
	for _, site := range cfg.Sites {
		procs += site.Procs
		jobs += len(site.Jobs)
		if site.Policy.String() != "easy" {
			t.Errorf("%s: policy %s", site.Name, site.Policy)
		}
		for _, j := range site.Jobs {
			if j.Procs != 1 || j.Estimate < j.Runtime || j.Submit < 0 || j.Submit > 86400 {
				t.Fatalf("%s: job %+v", site.Name, j)
			}
		}
	}
	if jobs != o.Jobs || s.Jobs != o.Jobs || procs != s.Processors {
		t.Errorf("%d jobs built, %d written; %d processors built, %d written", jobs, s.Jobs, procs, s.Processors)
	}
	if _, err := gridproxy.Write(t.TempDir(), gridproxy.Options{Sites: 3, Jobs: 0, Days: 1}); err == nil {
		t.Error("0 jobs accepted")
	}
}
