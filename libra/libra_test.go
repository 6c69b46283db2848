package libra

import (
	"math"
	"slices"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestShare(t *testing.T) {
	for _, c := range []struct {
		name string
		j    Job
		now  float64
		want float64
	}{
		{"at submission RE/D", Job{Estimate: 100, Deadline: 400}, 0, 0.25},
		{"remainRE/remainD", Job{Estimate: 100, Deadline: 400, Done: 50}, 100, 50.0 / 300},
		{"behind schedule, capped at the node", Job{Estimate: 100, Deadline: 400}, 350, 1},
		{"estimate used up keeps RE/D", Job{Estimate: 100, Deadline: 400, Done: 100}, 200, 0.25},
		{"past its deadline keeps RE/D", Job{Estimate: 100, Deadline: 400, Done: 50}, 500, 0.25},
		{"relative deadline from submission", Job{Estimate: 100, Submit: 1000, Deadline: 1200}, 1000, 0.5},
	} {
		if got := c.j.Share(c.now); !near(got, c.want) {
			t.Errorf("%s: share %v, want %v", c.name, got, c.want)
		}
	}
}

func TestLibraAdmit(t *testing.T) {
	j := func(re, d int64) Job { return Job{Estimate: re, Deadline: d} }
	nodes := [][]Job{
		{j(100, 200), j(30, 100)}, // 0.5 + 0.3: + 0.25 > 1
		{j(75, 100)},              // 0.75: + 0.25 = 1, nothing left (best fit)
		{},                        // 0.25: 0.75 left
		{j(100, 200)},             // 0.75: 0.25 left
	}
	newJob := j(50, 200) // share 0.25
	for _, c := range []struct {
		name  string
		job   Job
		procs int
		want  []int
		v     Verdict
	}{
		{"best fit: fullest first", newJob, 3, []int{1, 3, 2}, Accepted},
		{"one node", newJob, 1, []int{1}, Accepted},
		{"only three nodes can take it", newJob, 4, nil, CannotMeetDeadline},
		{"deadline must exceed the estimate", j(200, 200), 1, nil, CannotMeetDeadline},
		{"wider than the cluster", newJob, 5, nil, TooWide},
	} {
		got, v := Libra.Admit(nodes, c.job, c.procs, 0)
		if v != c.v || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, v, c.want, c.v)
		}
	}
}

// The LibraSLA cases of Fig. 4.3, by hand: A (share 0.5, (B/RE)/D =
// 5e-4, the highest), B (0.5, 1e-4, SOFT), C (0.25, 5e-5, HARD).
var (
	jobA = Job{Estimate: 100, Deadline: 200, Budget: 10, PenaltyRate: 0.1}
	jobB = Job{Estimate: 100, Deadline: 200, Budget: 2, PenaltyRate: 0.01}
	jobC = Job{Estimate: 100, Deadline: 400, Budget: 2, PenaltyRate: 0.01, Hard: true}
)

func TestReturn(t *testing.T) {
	hardB := jobB
	hardB.Hard = true
	for _, c := range []struct {
		name  string
		jobs  []Job
		ret   float64
		delay []float64
		alloc []float64
	}{
		// 0.5 + 0.25 <= 1: the spare 0.25 goes to A, the highest return.
		{"spare to the highest return", []Job{jobC, jobA}, 5e-5 + 5e-4, []float64{0, 0}, []float64{0.25, 0.75}},
		// 1.25: A and HARD C keep theirs; SOFT B gets the 0.25 left and
		// ends at 400, 200 s late: U = 2 − 200·0.01 = 0.
		{"over-subscribed: SOFT jobs shrink", []Job{jobA, jobB, jobC}, 5e-4 + 0 + 5e-5, []float64{0, 200, 0}, []float64{0.5, 0.25, 0.25}},
		// A, HARD B and HARD C alone exceed the node (1.25): all scaled
		// by 1/1.25; A and B end at 250 (50 s late), C at 500 (100 s).
		{"HARD jobs alone over the node", []Job{jobA, hardB, jobC},
			(10-50*0.1)/100.0/200 + (2-50*0.01)/100.0/200 + (2-100*0.01)/100.0/400,
			[]float64{50, 50, 100}, []float64{0.4, 0.4, 0.2}},
		{"empty node", nil, 0, nil, nil},
	} {
		ret, delay, alloc := Return(c.jobs, 0)
		if !near(ret, c.ret) {
			t.Errorf("%s: return %v, want %v", c.name, ret, c.ret)
		}
		for i := range c.delay {
			if !near(delay[i], c.delay[i]) || !near(alloc[i], c.alloc[i]) {
				t.Errorf("%s: job %d delay %v alloc %v, want %v %v", c.name, i, delay[i], alloc[i], c.delay[i], c.alloc[i])
			}
		}
	}
}

func TestLibraSLAAdmit(t *testing.T) {
	costlyB := jobB
	costlyB.PenaltyRate = 0.02 // U_B = 2 − 200·0.02 = −2: the return falls
	hardB := jobB
	hardB.Hard = true
	rich := Job{Estimate: 100, Deadline: 200, Budget: 40, PenaltyRate: 0.01}
	for _, c := range []struct {
		name  string
		nodes [][]Job
		job   Job
		procs int
		want  []int
		v     Verdict
	}{
		// Node 0 holds A and C (return 5.5e-4): adding B leaves it at
		// 5.5e-4, not lower: a candidate. Node 1 is empty: new return
		// 1e-4 > 0. Ranked by new return, node 0 first.
		{"equal return is enough", [][]Job{{jobA, jobC}, {}}, jobB, 2, []int{0, 1}, Accepted},
		{"return falls", [][]Job{{jobA, jobC}}, costlyB, 1, nil, ReturnFalls},
		// HARD B on node 0: A, B and C are all fixed, over the node:
		// B would be 50 s late.
		{"HARD job delayed", [][]Job{{jobA, jobC}}, hardB, 1, nil, ReturnFalls},
		{"HARD job on an empty node", [][]Job{{jobA, jobC}, {}}, hardB, 1, []int{1}, Accepted},
		// A rich job ((B/RE)/D = 2e-3) becomes node 0's highest return
		// and squeezes A to 0.25 (200 s late, U_A = −10): node 0's return
		// is 2e-3 − 5e-4 + 5e-5 = 1.55e-3, up from 5.5e-4; the empty
		// node's is 2e-3, so it ranks first.
		{"ranked by new return", [][]Job{{jobA, jobC}, {}}, rich, 2, []int{1, 0}, Accepted},
	} {
		got, v := LibraSLA.Admit(c.nodes, c.job, c.procs, 0)
		if v != c.v || !slices.Equal(got, c.want) {
			t.Errorf("%s: %v %v, want %v %v", c.name, got, v, c.want, c.v)
		}
	}
}

func TestRisk(t *testing.T) {
	x := Job{Estimate: 100, Deadline: 200}
	z := Job{Estimate: 50, Deadline: 100}
	tight := Job{Estimate: 150, Deadline: 200}
	for _, c := range []struct {
		name          string
		jobs          []Job
		end           []float64
		mu, sigma, dy float64
		zero          bool
	}{
		{"exactly full", []Job{x, x}, []float64{200, 200}, 1, 0, 0, true},
		{"single job", []Job{z}, []float64{50}, 1, 0, 0, true},
		// Shares 0.5 each, 1.5 in all: rates 1/3. Z ends at 150 (50 s
		// late); X and Y have 50 s of work and 50 s left: shares 1 and 1,
		// rates 1/2: they end at 250 (50 s late). DDY: 1.5, 1.25, 1.25.
		{"over-subscribed", []Job{x, x, z}, []float64{250, 250, 150}, 4.0 / 3,
			math.Sqrt((1.25*1.25*2+1.5*1.5)/3 - 16.0/9), 50, false},
		// The digest's warning: both 100 s late, DDY 1.5 each, σ = 0;
		// only the delay guard refuses the node.
		{"delayed alike", []Job{tight, tight}, []float64{300, 300}, 1.5, 0, 100, false},
		{"estimate used up ends now", []Job{{Estimate: 100, Deadline: 200, Done: 100}, x}, []float64{0, 100}, 1, 0, 0, true},
	} {
		end := Project(c.jobs, 0)
		for i := range c.end {
			if !near(end[i], c.end[i]) {
				t.Errorf("%s: job %d ends %v, want %v", c.name, i, end[i], c.end[i])
			}
		}
		mu, sigma, dy := Risk(c.jobs, 0)
		if !near(mu, c.mu) || !near(sigma, c.sigma) || !near(dy, c.dy) {
			t.Errorf("%s: μ %v σ %v DY %v, want %v %v %v", c.name, mu, sigma, dy, c.mu, c.sigma, c.dy)
		}
		if ZeroRisk(c.jobs, 0) != c.zero {
			t.Errorf("%s: zero risk %v, want %v", c.name, !c.zero, c.zero)
		}
	}
}

func TestLibraRiskDAdmit(t *testing.T) {
	x := Job{Estimate: 100, Deadline: 200}
	z := Job{Estimate: 50, Deadline: 100}
	nodes := [][]Job{{x, x}, {}, {x}, {}}
	// Node 0 is full (adding Z delays everyone); nodes 1–3 are zero-risk;
	// the first two in order, no best fit (node 2 would be the fuller).
	if got, v := LibraRiskD.Admit(nodes, z, 2, 0); v != Accepted || !slices.Equal(got, []int{1, 2}) {
		t.Errorf("admit: %v %v, want [1 2] accepted", got, v)
	}
	if got, v := LibraRiskD.Admit(nodes, z, 4, 0); v != DelayRisk {
		t.Errorf("admit 4: %v %v, want risk", got, v)
	}
}

func TestRates(t *testing.T) {
	jobs := []Job{jobA, jobC} // shares 0.5 and 0.25
	if r := Libra.Rates(jobs, 0); !near(r[0], 2.0/3) || !near(r[1], 1.0/3) {
		t.Errorf("libra rates %v, want spare shared in proportion", r)
	}
	if r := LibraSLA.Rates(jobs, 0); !near(r[0], 0.75) || !near(r[1], 0.25) {
		t.Errorf("libra-sla rates %v, want spare to A", r)
	}
}
