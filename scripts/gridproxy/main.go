// Command gridproxy writes a proxy of a grid federation for replay speed
// measurements: 170 sites and 188,000 single-processor jobs built from the
// repository's traces (KTH, HPC2N, NASA, Lublin), the shape of a large
// production grid whose own log is not public. Every job keeps its trace's
// submit time (one shared clock), runtime and estimate but asks for one
// processor; each trace user is homed at one site (so sites see bursts of
// their users' work); the traces are repeated, with other users and times
// shifted by up to a week, until there are enough jobs, and the submissions
// are compressed into 11 days (-days), the span of such a grid log; each site gets the
// processors that put its own offered load at a draw from [0.4, 1.3], so
// about a third of the sites are overloaded and delegate.
//
//	go run ./scripts/gridproxy -out /tmp/grid170
//	fedsched sim --scenario /tmp/grid170/grid170.yaml
package main

import (
	"bufio"
	"flag"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/fedsched/fedsched/swf"
	"github.com/fedsched/fedsched/traces"
)

func main() {
	out := flag.String("out", "grid170", "directory to write the scenario and its per-site traces to")
	sites := flag.Int("sites", 170, "number of sites")
	jobs := flag.Int("jobs", 188000, "number of jobs")
	seed := flag.Uint64("seed", 1, "seed of the site sizes and time shifts")
	policy := flag.String("policy", "easy", "queue policy of every site")
	days := flag.Float64("days", 11, "span the submissions are compressed into, in days")
	flag.Parse()
	if err := run(*out, *sites, *jobs, *seed, *policy, *days); err != nil {
		slog.Error("gridproxy", "err", err)
		os.Exit(1)
	}
}

type job struct {
	swf.Job
	site int
}

func run(dir string, nSites, nJobs int, seed uint64, policy string, days float64) error {
	if nSites <= 0 || nJobs <= 0 || !(days > 0) {
		return fmt.Errorf("want -sites, -jobs and -days > 0")
	}
	var pool []job
	for _, name := range []string{traces.KTH, traces.HPC2N, traces.NASA, traces.Lublin} {
		rc, err := traces.Open(name)
		if err != nil {
			return err
		}
		tr, err := swf.Read(rc, name, swf.Options{})
		rc.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for _, j := range tr.Jobs {
			if j.Runtime <= 0 || j.Submit < 0 {
				continue
			}
			j.ReqProcs, j.AllocProcs = 1, 1
			if j.ReqTime < j.Runtime {
				j.ReqTime = j.Runtime // the estimate must cover the runtime
			}
			j.User = int64(userKey(name, j.User))
			pool = append(pool, job{Job: j})
		}
	}
	rng := rand.New(rand.NewPCG(seed, 170))
	var all []job
	for rep := 0; len(all) < nJobs; rep++ {
		shift := int64(0)
		if rep > 0 {
			shift = rng.Int64N(7 * 24 * 3600)
		}
		for _, j := range pool {
			if len(all) == nJobs {
				break
			}
			j.Submit += shift
			j.User = j.User*31 + int64(rep)
			all = append(all, j)
		}
	}
	// Home every user at a site, round robin over the users in a seeded
	// order, so that every site has users.
	var users []int64
	for _, j := range all {
		users = append(users, j.User)
	}
	slices.Sort(users)
	users = slices.Compact(users)
	rng.Shuffle(len(users), func(a, b int) { users[a], users[b] = users[b], users[a] })
	home := make(map[int64]int, len(users))
	for i, u := range users {
		home[u] = i % nSites
	}
	slices.SortStableFunc(all, func(a, b job) int { return int(a.Submit - b.Submit) })
	first, last := all[0].Submit, all[len(all)-1].Submit
	f := days * 86400 / float64(last-first+1)
	for i := range all {
		all[i].site = home[all[i].User]
		all[i].Submit = int64(math.Round(float64(all[i].Submit-first) * f))
	}
	span := days * 86400
	work := make([]float64, nSites)
	count := make([]int, nSites)
	for _, j := range all {
		work[j.site] += float64(j.ReqTime)
		count[j.site]++
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	y, err := os.Create(filepath.Join(abs, fmt.Sprintf("grid%d.yaml", nSites)))
	if err != nil {
		return err
	}
	defer y.Close()
	fmt.Fprintf(y, "# Written by go run ./scripts/gridproxy -sites %d -jobs %d -seed %d: a proxy of a\n# %d-site grid federation with %d single-processor jobs (see the command's doc).\n", nSites, nJobs, seed, nSites, nJobs)
	fmt.Fprintf(y, "name: grid%d\nclock: shared\ntransfer: acf\nmax_candidates: 3\nsites:\n", nSites)
	total := 0
	for k := range nSites {
		if count[k] == 0 {
			continue
		}
		load := 0.4 + 0.9*rng.Float64()
		procs := max(1, int(math.Round(work[k]/span/load)))
		total += procs
		path := filepath.Join(abs, fmt.Sprintf("site%03d.swf", k))
		if err := writeSite(path, procs, all, k); err != nil {
			return err
		}
		fmt.Fprintf(y, "  - name: site%03d\n    trace: %s\n    procs: %d\n    policy: %s\n", k, path, procs, policy)
	}
	slog.Info("gridproxy", "dir", abs, "sites", nSites, "jobs", len(all), "processors", total, "span_days", span/86400)
	return y.Close()
}

// userKey numbers a trace's user uniquely across traces.
func userKey(trace string, user int64) uint32 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", trace, user)
	return h.Sum32() >> 1
}

func writeSite(path string, procs int, all []job, site int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	fmt.Fprintf(w, "; UnixStartTime: 0\n; MaxProcs: %d\n; MaxNodes: %d\n", procs, procs)
	n := int64(0)
	for _, j := range all {
		if j.site != site {
			continue
		}
		n++
		fmt.Fprintf(w, "%d %d -1 %d 1 -1 -1 1 %d -1 1 %d -1 -1 -1 -1 -1 -1\n", n, j.Submit, j.Runtime, j.ReqTime, j.User)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
