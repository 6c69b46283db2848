package sim

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
	"github.com/fedsched/fedsched/site"
)

// TestOutlooksMatchFreshReads drives a few sites through submissions, passes
// and ends at increasing times, touching each site after its agent's call
// as the replay does, and checks after every step that the cached outlooks
// (kept until a touched site's profile changes or time reaches a
// breakpoint) are what reading every profile afresh gives.
func TestOutlooksMatchFreshReads(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 77))
		sites := make([]FedSite, 2+rng.IntN(5))
		agents := make([]*site.Agent, len(sites))
		for k := range sites {
			sites[k] = FedSite{Name: fmt.Sprintf("s%d", k), Procs: 1 + rng.IntN(40), Policy: []plan.Policy{plan.EASY, plan.Conservative, plan.FCFS}[rng.IntN(3)]}
			a, err := site.New(site.Config{Name: sites[k].Name, Procs: sites[k].Procs, Policy: sites[k].Policy, NoGrowBack: true})
			if err != nil {
				t.Fatal(err)
			}
			agents[k] = a
		}
		o := newOutlooks(agents, sites)
		type run struct {
			k   int
			key site.JobKey
			end int64
		}
		var running []run
		var now, id int64
		for step := range 400 {
			now += rng.Int64N(3) * rng.Int64N(4000)
			// End the jobs due by now, some early.
			kept := running[:0]
			for _, r := range running {
				if r.end <= now || rng.IntN(20) == 0 {
					agents[r.k].End(now, r.key, true)
					o.touch(r.k)
					continue
				}
				kept = append(kept, r)
			}
			running = kept
			for range rng.IntN(4) {
				k := rng.IntN(len(sites))
				id++
				agents[k].Submit(now, id, plan.Job{Procs: 1 + rng.IntN(sites[k].Procs), Estimate: 1 + rng.Int64N(2*86400), Release: now, Deadline: plan.Forever})
				o.touch(k)
			}
			for k, a := range agents {
				a.Tick(now)
				o.touch(k)
				for _, d := range a.Ready().Decisions {
					if d.Kind == site.DecideStart {
						running = append(running, run{k: k, key: d.Job, end: d.End})
					}
				}
			}
			for range 1 + rng.IntN(2) {
				o.refresh(now)
				for k, a := range agents {
					p := a.Site().Plan()
					free := func(d int64) int { return delegation.CoarseFree(p.Free(now+d), sites[k].Procs) }
					want := delegation.Candidate{Site: sites[k].Name, Procs: sites[k].Procs, FreeNow: free(0), Free1h: free(3600), Free4h: free(4 * 3600), Free24h: free(24 * 3600)}
					if o.cands[k] != want {
						t.Fatalf("seed %d step %d t=%d: site %d outlook %+v, fresh read %+v", seed, step, now, k, o.cands[k], want)
					}
				}
			}
		}
	}
}
