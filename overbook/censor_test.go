package overbook

import (
	"cmp"
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/fedsched/fedsched/plan"
)

// kmReference is the textbook Kaplan-Meier estimate over a list of samples,
// written independently of Histogram: each sample is a ratio bin and
// whether it was censored there. A censored sample in bin b is known to end
// above b, so it is taken to end at b + ½: it is at risk at every bin up to
// b and at no later one. The result is the CDF at bins 0..99 (bin 100 is 1).
func kmReference(bins []int, censored []bool) [NumBins - 1]float64 {
	type obs struct {
		t     float64
		event bool
	}
	var o []obs
	for i, b := range bins {
		t := float64(b)
		if censored[i] {
			t += 0.5
		}
		o = append(o, obs{t, !censored[i]})
	}
	slices.SortFunc(o, func(a, b obs) int { return cmp.Compare(a.t, b.t) })
	var cdf [NumBins - 1]float64
	surv := 1.0
	k := 0
	for bin := 0; bin < NumBins-1; bin++ {
		for k < len(o) && o[k].t < float64(bin) {
			k++
		}
		atRisk := len(o) - k
		d := 0
		for m := k; m < len(o) && o[m].t == float64(bin); m++ {
			if o[m].event {
				d++
			}
		}
		if atRisk > 0 {
			surv *= 1 - float64(d)/float64(atRisk)
		}
		cdf[bin] = 1 - surv
	}
	return cdf
}

// TestHistogramKaplanMeierGolden checks the censored estimate against the
// reference on random samples, and that without censoring it is exactly
// the empirical CDF.
func TestHistogramKaplanMeierGolden(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 200 {
		var h Histogram
		var bins []int
		var cens []bool
		n := 1 + rng.IntN(60)
		share := []float64{0, 0.3, 0.8}[trial%3]
		for range n {
			est := int64(100 + rng.IntN(5000))
			ran := rng.Int64N(est + est/2)
			if rng.Float64() < share && ran < est {
				if err := h.AddCensored(ran, est); err != nil {
					t.Fatal(err)
				}
				if b := RatioBin(ran, est); b < NumBins-2 {
					bins, cens = append(bins, b), append(cens, true)
				} else {
					bins, cens = append(bins, NumBins-1), append(cens, false)
				}
				continue
			}
			if err := h.Add(ran, est); err != nil {
				t.Fatal(err)
			}
			bins, cens = append(bins, RatioBin(ran, est)), append(cens, false)
		}
		want := kmReference(bins, cens)
		for i := range NumBins - 1 {
			if got := h.CDF(i); math.Abs(got-want[i]) > 1e-12 {
				t.Fatalf("trial %d: CDF(%d) = %v, want %v", trial, i, got, want[i])
			}
		}
		if h.CDF(NumBins-1) != 1 || h.N() != float64(n) {
			t.Fatalf("trial %d: CDF(100) %v, N %v, want 1, %d", trial, h.CDF(NumBins-1), h.N(), n)
		}
		var sum float64
		for i := range NumBins {
			sum += h.PDF(i)
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Fatalf("trial %d: PDF sums to %v", trial, sum)
		}
	}
}

// TestCensoredRaisesPoF is the feedback the live site lacked: jobs cut at
// their overbooked reservation's end make later bets of that length
// riskier. Thirty jobs that used 10 % of their estimate make a 30 % gap
// look safe; thirty more cut at 30 % (they needed more) must make the same
// gap fail half the time, where dropping them (or counting them as ended at
// 30 %) would leave it looking safe.
func TestCensoredRaisesPoF(t *testing.T) {
	st, err := NewStats(StatsConfig{Classifier: General})
	if err != nil {
		t.Fatal(err)
	}
	j := JobInfo{Procs: 1, Estimate: 1000}
	for range 30 {
		if err := st.Observe(j, 100); err != nil {
			t.Fatal(err)
		}
	}
	before := HeuristicPoF(st.Histogram(j), FailureModel{}, 1, 1000, 300)
	for range 30 {
		if err := st.Record(j, Observation{Ran: 300, Censored: true}); err != nil {
			t.Fatal(err)
		}
	}
	after := HeuristicPoF(st.Histogram(j), FailureModel{}, 1, 1000, 300)
	if before != 0 || math.Abs(after-0.5) > 1e-12 {
		t.Fatalf("PoF of a 300 s gap: %v before the cut jobs, %v after; want 0 and 0.5", before, after)
	}
	// A job cut after 99 % of its estimate needed all of it: bin 100.
	var h Histogram
	if err := h.AddCensored(995, 1000); err != nil {
		t.Fatal(err)
	}
	if h.Weight(NumBins-1) != 1 || h.CensoredWeight(99) != 0 {
		t.Fatalf("cut at 99.5 %%: weights %v / censored %v", h.Weight(NumBins-1), h.CensoredWeight(99))
	}
	if err := h.AddCensored(-1, 1000); err == nil {
		t.Fatal("negative runtime accepted")
	}
}

// TestHistogramCensoredJSONAndAge checks that censored weights age with the
// others and survive serialisation, and that the original array format
// still loads.
func TestHistogramCensoredJSONAndAge(t *testing.T) {
	var h Histogram
	_ = h.Add(10, 100)
	_ = h.AddCensored(30, 100)
	if err := h.Age(0.5); err != nil {
		t.Fatal(err)
	}
	if h.Weight(10) != 0.5 || h.CensoredWeight(30) != 0.5 || h.N() != 1 {
		t.Fatalf("aged: %v %v %v", h.Weight(10), h.CensoredWeight(30), h.N())
	}
	b, err := json.Marshal(&h)
	if err != nil {
		t.Fatal(err)
	}
	var back Histogram
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !back.Equal(&h) || back.CDF(50) != h.CDF(50) {
		t.Fatalf("round trip %s: %v != %v", b, back.CDF(50), h.CDF(50))
	}
	var plain Histogram
	_ = plain.Add(10, 100)
	b, _ = json.Marshal(&plain)
	if b[0] != '[' {
		t.Fatalf("a histogram without censored samples encodes as %s, want the array format", b)
	}
	for _, bad := range []string{`{"known":[1]}`, `{"known":[], "censored":[]}`, `{"x":1}`} {
		if err := back.UnmarshalJSON([]byte(bad)); err == nil {
			t.Fatalf("%s accepted", bad)
		}
	}
}

// TestAdmissionMinSamples: no overbooking until the statistics in use hold
// MinSamples, and the decision says why and how many there were. One job
// that used 10 % of its estimate is the reported cold start.
func TestAdmissionMinSamples(t *testing.T) {
	for _, tc := range []struct {
		name    string
		min     float64
		samples int
		want    plan.Reason
	}{
		{"cold start, one sample", 0, 1, plan.ReasonRejectedRisk},
		{"one short of the default", 0, DefaultAdmissionMinSamples - 1, plan.ReasonRejectedRisk},
		{"the default", 0, DefaultAdmissionMinSamples, plan.ReasonOverbooked},
		{"configured lower", 5, 5, plan.ReasonOverbooked},
		{"configured higher", 100, 99, plan.ReasonRejectedRisk},
	} {
		for _, mode := range []Mode{Heuristic, Comprehensive} {
			t.Run(mode.String()+"/"+tc.name, func(t *testing.T) {
				st, err := NewStats(StatsConfig{Classifier: ByRuntime})
				if err != nil {
					t.Fatal(err)
				}
				for range tc.samples {
					_ = st.Observe(JobInfo{Procs: 1, Estimate: 1000}, 100)
				}
				a := &Admission{Stats: st, Test: Threshold{PoFMax: 0.1}, Mode: mode, MinSamples: tc.min}
				// 299 s free before a wall; the job's window ends before the wall's end.
				p := plan.New(1)
				if err := p.Reserve(plan.Reservation{ID: 9, Procs: 1, Start: 299, End: 5000, Deadline: plan.Forever}); err != nil {
					t.Fatal(err)
				}
				j := plan.Job{ID: 1, Procs: 1, Estimate: 1000, Deadline: 2000, Fee: 1, Penalty: 1}
				pl := a.Admit(p, &j, 0)
				if pl.Reason != tc.want || pl.Samples != float64(tc.samples) || pl.TooFewSamples != (tc.want != plan.ReasonOverbooked) {
					t.Fatalf("%+v, want %v with %d samples", pl, tc.want, tc.samples)
				}
			})
		}
	}
}

// TestRunningJobsAreCensored: jobs running now under the same statistics
// count as censored samples at the time they have run. Thirty ended jobs
// used 10 % of their estimate, but thirty more of the class have already
// run half of theirs and go on: a 30 % gap must not look safe. The check
// against MinSamples still counts only ended jobs.
func TestRunningJobsAreCensored(t *testing.T) {
	st, err := NewStats(StatsConfig{Classifier: General})
	if err != nil {
		t.Fatal(err)
	}
	for range 30 {
		_ = st.Observe(JobInfo{Procs: 1, Estimate: 1000}, 100)
	}
	a := &Admission{Stats: st, Test: Threshold{PoFMax: 0.4}, MinSamples: 30}
	p := plan.New(31)
	// Thirty 1-processor jobs admitted at 0, running since then.
	for id := int64(1); id <= 30; id++ {
		j := plan.Job{ID: id, Procs: 1, Estimate: 1000, Deadline: plan.Forever}
		pl := a.Admit(p, &j, 0)
		if err := p.Reserve(plan.Reservation{ID: id, Procs: 1, Start: pl.Start, End: pl.End, Deadline: plan.Forever}); err != nil {
			t.Fatal(err)
		}
	}
	// At 500 the last processor is free for 300 s before a wall.
	if err := p.Reserve(plan.Reservation{ID: 99, Procs: 1, Start: 800, End: 5000, Deadline: plan.Forever}); err != nil {
		t.Fatal(err)
	}
	j := plan.Job{ID: 100, Procs: 1, Estimate: 1000, Release: 500, Deadline: 1900}
	pl := a.Admit(p, &j, 500)
	if pl.Reason != plan.ReasonRejectedRisk || pl.TooFewSamples || pl.Samples != 30 {
		t.Fatalf("%+v: want rejected for risk (PoF 0.5 with the running jobs), judged on 30 ended samples", pl)
	}
	a.Test = Threshold{PoFMax: 0.6}
	if pl = a.Admit(p, &j, 500); pl.Reason != plan.ReasonOverbooked || math.Abs(pl.PoF-0.5) > 1e-12 {
		t.Fatalf("%+v: want overbooked with PoF 0.5", pl)
	}
}
