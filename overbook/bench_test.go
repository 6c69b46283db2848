package overbook

import (
	"math/rand/v2"
	"testing"

	"github.com/fedsched/fedsched/plan"
)

// benchSetup is a realistic comprehensive admission: a 4 h job with deadline
// release + 2x (horizon 8 h → DefaultStep 29 s), three running predecessors
// ending within the first 7 h, planned start at 7 h (start distribution of
// ~870 bins, runtime ~500 bins).
type benchSetup struct {
	h                                *Histogram
	preds                            []EndDist
	release, planned, slotEnd, x, st int64
	start                            StartDist
}

func newBenchSetup(b *testing.B) benchSetup {
	r := rand.New(rand.NewPCG(1, 2))
	s := benchSetup{h: randHist(b, r), release: 0, x: 4 * 3600}
	for s.h.N() == 0 {
		s.h = randHist(b, r)
	}
	s.st = DefaultStep(2 * s.x)
	s.planned = 7 * 3600
	s.slotEnd = s.planned + 3*3600 // a 3 h gap for a 4 h job
	for i := range 3 {
		d, err := ReservationDist(randHist(b, r), int64(i)*1800, 6*3600, s.planned, s.st)
		if err != nil {
			b.Fatal(err)
		}
		s.preds = append(s.preds, d)
	}
	var err error
	if s.start, err = NewStartDist(s.preds, s.release, s.planned, s.st); err != nil {
		b.Fatal(err)
	}
	return s
}

func BenchmarkHeuristicPoF(b *testing.B) {
	h := h10_50_100(b)
	h.prepare()
	fm := ThesisFailures
	var sink float64
	i := int64(0)
	for b.Loop() {
		i++
		sink += HeuristicPoF(h, fm, 64, 14400, 10000+i&1023)
	}
	_ = sink
}

func BenchmarkExecProb(b *testing.B) {
	s := newBenchSetup(b)
	b.ReportMetric(float64(len(s.start.CDF)), "startbins")
	for b.Loop() {
		ExecProb(s.start, s.h, s.x, s.slotEnd)
	}
}

func BenchmarkNewStartDist(b *testing.B) {
	s := newBenchSetup(b)
	for b.Loop() {
		if _, err := NewStartDist(s.preds, s.release, s.planned, s.st); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkComprehensiveGap is the per-gap cost of an admission decision
// with the comprehensive PoF: start distribution from 3 predecessors, then
// the PoF (no convolution).
func BenchmarkComprehensiveGap(b *testing.B) {
	s := newBenchSetup(b)
	for b.Loop() {
		st, err := NewStartDist(s.preds, s.release, s.planned, s.st)
		if err != nil {
			b.Fatal(err)
		}
		ComprehensivePoF(st, s.h, ThesisFailures, 64, s.x, s.slotEnd)
	}
}

// BenchmarkChainedEndDist is the convolution done once per accepted job to
// store its end distribution.
func BenchmarkChainedEndDist(b *testing.B) {
	s := newBenchSetup(b)
	e, _ := ChainedEndDist(s.start, s.h, s.x, s.slotEnd, s.st)
	b.ReportMetric(float64(len(s.start.CDF)), "startbins")
	b.ReportMetric(float64(len(e.CDF)), "endbins")
	for b.Loop() {
		if _, err := ChainedEndDist(s.start, s.h, s.x, s.slotEnd, s.st); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReservationDist(b *testing.B) {
	s := newBenchSetup(b)
	for b.Loop() {
		if _, err := ReservationDist(s.h, 0, s.x, s.slotEnd, s.st); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAdmitOverbooked is one admission that has to search the gaps,
// on a site of 1,000 processors with 500 jobs running under the judged
// job's statistics (each one a censored sample of the judgement).
func BenchmarkAdmitOverbooked(b *testing.B) {
	a := &Admission{Stats: uniformStats(b), Test: Threshold{PoFMax: 1}}
	p := plan.New(1000)
	for id := int64(1); id <= 500; id++ {
		j := plan.Job{ID: id, Procs: 1, Estimate: 100, Deadline: plan.Forever}
		pl := a.Admit(p, &j, 0)
		if err := p.Reserve(plan.Reservation{ID: id, Procs: 1, Start: pl.Start, End: pl.End, Deadline: plan.Forever}); err != nil {
			b.Fatal(err)
		}
	}
	if err := p.Reserve(plan.Reservation{ID: 999, Procs: 500, Start: 80, End: 5000, Deadline: plan.Forever}); err != nil {
		b.Fatal(err)
	}
	j := plan.Job{ID: 1000, Procs: 400, Estimate: 100, Release: 50, Deadline: 150}
	if pl := a.Admit(p, &j, 50); pl.Reason != plan.ReasonOverbooked {
		b.Fatalf("%+v", pl)
	}
	b.ReportAllocs()
	for b.Loop() {
		a.Admit(p, &j, 50)
	}
}
