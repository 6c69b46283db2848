// Package gridproxy builds a proxy of a grid federation for replay speed
// measurements: by default 170 sites and 188,000 single-processor jobs
// built from the repository's traces (KTH, HPC2N, NASA, Lublin), the shape
// of a large production grid whose own log is not public. Every job keeps
// its trace's submit time (one shared clock), runtime and estimate but asks
// for one processor; each trace user is homed at one site (so sites see
// bursts of their users' work); the traces are repeated, with other users
// and times shifted by up to a week, until there are enough jobs, and the
// submissions are compressed into Options.Days, the span of such a grid
// log; each site gets the processors that put its own offered load at a
// draw from [0.4, 1.3], so about a third of the sites are overloaded and
// delegate.
//
// Write puts a scenario (gridN.yaml) and one SWF trace per site in a
// directory; `go run ./scripts/gridproxy` and BenchmarkGridProxy
// (cmd/fedsched) both use it.
package gridproxy

import (
	"bufio"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"

	"github.com/fedsched/fedsched/swf"
	"github.com/fedsched/fedsched/traces"
)

// Options shape the proxy.
type Options struct {
	Sites  int     // number of sites (default 170)
	Jobs   int     // number of jobs (default 188,000)
	Seed   uint64  // seed of the site sizes and time shifts (default 1)
	Policy string  // queue policy of every site (default easy)
	Days   float64 // span the submissions are compressed into, in days (default 11)
}

// Defaults are the options of the grid: 170 sites, 188,000 jobs,
// seed 1, EASY, 11 days.
func Defaults() Options {
	return Options{Sites: 170, Jobs: 188000, Seed: 1, Policy: "easy", Days: 11}
}

// Summary describes what Write wrote.
type Summary struct {
	Scenario   string // absolute path of the scenario file
	Sites      int    // sites written (those with at least one user's job)
	Jobs       int
	Processors int // over all sites
	SpanDays   float64
}

type job struct {
	swf.Job
	site int
}

// Write builds the proxy and writes it to dir (created if missing): the
// scenario grid<Sites>.yaml, whose trace paths are absolute, and one
// siteNNN.swf per site. The same options give byte-identical files.
func Write(dir string, o Options) (Summary, error) {
	if o.Sites <= 0 || o.Jobs <= 0 || !(o.Days > 0) {
		return Summary{}, fmt.Errorf("gridproxy: want sites, jobs and days > 0, have %d, %d, %g", o.Sites, o.Jobs, o.Days)
	}
	pool, err := load()
	if err != nil {
		return Summary{}, err
	}
	rng := rand.New(rand.NewPCG(o.Seed, 170))
	var all []job
	for rep := 0; len(all) < o.Jobs; rep++ {
		shift := int64(0)
		if rep > 0 {
			shift = rng.Int64N(7 * 24 * 3600)
		}
		for _, j := range pool {
			if len(all) == o.Jobs {
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
		home[u] = i % o.Sites
	}
	slices.SortStableFunc(all, func(a, b job) int { return int(a.Submit - b.Submit) })
	first, last := all[0].Submit, all[len(all)-1].Submit
	f := o.Days * 86400 / float64(last-first+1)
	for i := range all {
		all[i].site = home[all[i].User]
		all[i].Submit = int64(math.Round(float64(all[i].Submit-first) * f))
	}
	span := o.Days * 86400
	work := make([]float64, o.Sites)
	count := make([]int, o.Sites)
	for _, j := range all {
		work[j.site] += float64(j.ReqTime)
		count[j.site]++
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Summary{}, fmt.Errorf("gridproxy: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Summary{}, fmt.Errorf("gridproxy: %w", err)
	}
	sum := Summary{Scenario: filepath.Join(abs, fmt.Sprintf("grid%d.yaml", o.Sites)), Jobs: len(all), SpanDays: span / 86400}
	y, err := os.Create(sum.Scenario)
	if err != nil {
		return Summary{}, fmt.Errorf("gridproxy: %w", err)
	}
	defer y.Close()
	w := bufio.NewWriter(y)
	fmt.Fprintf(w, "# Written by go run ./scripts/gridproxy -sites %d -jobs %d -seed %d: a proxy of a\n# %d-site grid federation with %d single-processor jobs (see the command's doc).\n", o.Sites, o.Jobs, o.Seed, o.Sites, o.Jobs)
	fmt.Fprintf(w, "name: grid%d\nclock: shared\ntransfer: acf\nmax_candidates: 3\nsites:\n", o.Sites)
	for k := range o.Sites {
		if count[k] == 0 {
			continue
		}
		load := 0.4 + 0.9*rng.Float64()
		procs := max(1, int(math.Round(work[k]/span/load)))
		sum.Processors += procs
		sum.Sites++
		path := filepath.Join(abs, fmt.Sprintf("site%03d.swf", k))
		if err := writeSite(path, procs, all, k); err != nil {
			return Summary{}, err
		}
		fmt.Fprintf(w, "  - name: site%03d\n    trace: %s\n    procs: %d\n    policy: %s\n", k, path, procs, o.Policy)
	}
	if err := w.Flush(); err != nil {
		return Summary{}, fmt.Errorf("gridproxy: %s: %w", sum.Scenario, err)
	}
	if err := y.Close(); err != nil {
		return Summary{}, fmt.Errorf("gridproxy: %s: %w", sum.Scenario, err)
	}
	return sum, nil
}

// load reads the four traces, every job made single-processor with an
// estimate that covers its runtime, users numbered across traces.
func load() ([]job, error) {
	var pool []job
	for _, name := range []string{traces.KTH, traces.HPC2N, traces.NASA, traces.Lublin} {
		rc, err := traces.Open(name)
		if err != nil {
			return nil, fmt.Errorf("gridproxy: %w", err)
		}
		tr, err := swf.Read(rc, name, swf.Options{})
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("gridproxy: %s: %w", name, err)
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
	return pool, nil
}

// userKey numbers a trace's user uniquely across traces.
func userKey(trace string, user int64) uint32 {
	h := fnv.New32a()
	fmt.Fprintf(h, "%s/%d", trace, user)
	return h.Sum32() >> 1
}

// writeSite writes the jobs of one site as an SWF trace: a header with its
// processors, then its jobs numbered from 1 in submit order, each on one
// processor and completed (status 1), with its trace's submit time,
// runtime, estimate and user; the fields the proxy does not model are -1.
func writeSite(path string, procs int, all []job, site int) error {
	var jobs []swf.Job
	for _, j := range all {
		if j.site != site {
			continue
		}
		jobs = append(jobs, swf.Job{ID: int64(len(jobs) + 1), Submit: j.Submit, Wait: -1, Runtime: j.Runtime, AllocProcs: 1,
			AvgCPU: -1, UsedMem: -1, ReqProcs: 1, ReqTime: j.ReqTime, ReqMem: -1, Status: 1, User: j.User, Group: -1,
			Executable: -1, Queue: -1, Partition: -1, PrecedingJob: -1, ThinkTime: -1})
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("gridproxy: %w", err)
	}
	header := []string{"UnixStartTime: 0", fmt.Sprintf("MaxProcs: %d", procs), fmt.Sprintf("MaxNodes: %d", procs)}
	if err := swf.Write(f, header, jobs); err != nil {
		f.Close()
		return fmt.Errorf("gridproxy: %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("gridproxy: %s: %w", path, err)
	}
	return nil
}
