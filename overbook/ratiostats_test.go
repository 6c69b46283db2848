package overbook

import (
	"errors"
	"math"
	"testing"

	"github.com/fedsched/fedsched/plan"
)

func TestAddRatio(t *testing.T) {
	tests := []struct {
		ratio float64
		bin   int
	}{
		{0, 0}, {-0.5, 0}, {0.004, 0}, {0.01, 1}, {0.5, 50}, {0.999, 99},
		{math.Nextafter(1, 0), 99}, {1, 100}, {3.7, 100}, {math.Inf(1), 100}, {math.Inf(-1), 0},
	}
	for _, tc := range tests {
		var h Histogram
		if err := h.AddRatio(tc.ratio); err != nil {
			t.Fatalf("AddRatio(%v): %v", tc.ratio, err)
		}
		if h.Weight(tc.bin) != 1 || h.N() != 1 {
			t.Fatalf("AddRatio(%v): weight %v in bin %d, total %v", tc.ratio, h.Weight(tc.bin), tc.bin, h.N())
		}
	}
	// Agrees with RatioBin on exact integer ratios.
	for actual := int64(0); actual <= 130; actual++ {
		var h Histogram
		h.AddRatio(float64(actual) / 100) //nolint:errcheck // not NaN
		if b := RatioBin(actual, 100); h.Weight(b) != 1 {
			t.Fatalf("ratio %d/100: AddRatio and RatioBin disagree (bin %d)", actual, b)
		}
	}
	var h Histogram
	if err := h.AddRatio(math.NaN()); !errors.Is(err, ErrBadSample) || h.N() != 0 {
		t.Fatalf("AddRatio(NaN) = %v, N %v", err, h.N())
	}
}

// perJob is a RatioStats with one histogram per job id, recording what it
// is told.
type perJob struct {
	hists    map[int64]*Histogram
	asked    []int64
	observed []int64
}

func (p *perJob) Histogram(j JobInfo) *Histogram {
	p.asked = append(p.asked, j.ID)
	return p.hists[j.ID]
}

func (p *perJob) Record(j JobInfo, _ Observation) error {
	p.observed = append(p.observed, j.ID)
	return nil
}

// TestAdmissionTakesAnyRatioStats checks that an Admission asks its
// RatioStats by job id, decides on the histogram it gets, and tells it of
// finished jobs only when it learns.
func TestAdmissionTakesAnyRatioStats(t *testing.T) {
	// Job 1 is known to end by 50 % of its estimate, job 2 to use it all.
	early, full := new(Histogram), new(Histogram)
	for range 10 {
		early.Add(50, 100) //nolint:errcheck // valid
		full.Add(100, 100) //nolint:errcheck // valid
	}
	for _, learn := range []bool{false, true} {
		st := &perJob{hists: map[int64]*Histogram{1: early, 2: full}}
		a := &Admission{Stats: st, Test: Threshold{PoFMax: 0.1}, Learn: learn, MinSamples: 10}
		// A 60 s gap before a wall: a 100 s job fits only overbooked.
		p := plan.New(1)
		if err := p.Reserve(plan.Reservation{ID: 9, Procs: 1, Start: 60, End: 1000, Deadline: plan.Forever}); err != nil {
			t.Fatal(err)
		}
		j1 := plan.Job{ID: 1, Procs: 1, Estimate: 100, Deadline: 200}
		j2 := plan.Job{ID: 2, Procs: 1, Estimate: 100, Deadline: 200}
		if pl := a.Admit(p, &j1, 0); pl.Reason != plan.ReasonOverbooked || pl.PoF != 0 {
			t.Fatalf("job 1: %+v, want overbooked with PoF 0", pl)
		}
		if pl := a.Admit(p, &j2, 0); pl.Reason != plan.ReasonRejectedRisk {
			t.Fatalf("job 2: %+v, want rejected for risk", pl)
		}
		if len(st.asked) != 2 || st.asked[0] != 1 || st.asked[1] != 2 {
			t.Fatalf("asked for %v, want [1 2]", st.asked)
		}
		a.Record(&j1, Observation{Ran: 50}) //nolint:errcheck // perJob never fails
		if want := map[bool]int{false: 0, true: 1}[learn]; len(st.observed) != want {
			t.Fatalf("learn %v: observed %v", learn, st.observed)
		}
	}
}

// TestAdmissionNilStats checks that nil Stats is the empty default: the
// conservative prior, which never overbooks, and learning works.
func TestAdmissionNilStats(t *testing.T) {
	a := &Admission{Test: Threshold{PoFMax: 0.5}, Learn: true}
	p := plan.New(1)
	if err := p.Reserve(plan.Reservation{ID: 9, Procs: 1, Start: 60, End: 1000, Deadline: plan.Forever}); err != nil {
		t.Fatal(err)
	}
	j := plan.Job{ID: 1, Procs: 1, Estimate: 100, Deadline: 200}
	if pl := a.Admit(p, &j, 0); pl.Reason != plan.ReasonRejectedRisk {
		t.Fatalf("%+v, want rejected for risk under the prior", pl)
	}
	for id := int64(2); id < 2+DefaultAdmissionMinSamples; id++ {
		jj := plan.Job{ID: id, Procs: 1, Estimate: 100, Deadline: plan.Forever}
		a.Admit(plan.New(1), &jj, 0)
		if err := a.Record(&jj, Observation{Ran: 10}); err != nil {
			t.Fatal(err)
		}
	}
	if pl := a.Admit(p, &j, 0); pl.Reason != plan.ReasonOverbooked {
		t.Fatalf("%+v, want overbooked after learning short runtimes", pl)
	}
}
