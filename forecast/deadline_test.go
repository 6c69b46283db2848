package forecast

import (
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestLTTR(t *testing.T) {
	tests := map[string]struct{ deadline, forecast, want int64 }{
		"latest start before the deadline": {deadline: 10000, forecast: 3600, want: 6400},
		"a forecast past the deadline":     {deadline: 100, forecast: 500, want: -400},
		"zero forecast":                    {deadline: 42, forecast: 0, want: 42},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := LTTR(tc.deadline, tc.forecast); got != tc.want {
				t.Errorf("LTTR(%d, %d) = %d, want %d", tc.deadline, tc.forecast, got, tc.want)
			}
		})
	}
}

func TestUniformDeadlines(t *testing.T) {
	u := DefaultUniformDeadlines()
	if err := u.Validate(); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(6, 2))
	var sumF float64
	const n = 20000
	for i := range n {
		runtime := int64(1 + i%5000)
		d := u.Deadline(r, 1000, runtime)
		f := float64(d-1000) / float64(runtime)
		if d-1000 < runtime || f > 10+1.0/float64(runtime) {
			t.Fatalf("runtime %d: relative deadline %d outside [rt, 10 rt]", runtime, d-1000)
		}
		sumF += f
	}
	// f ~ U[1, 10] has mean 5.5.
	if m := sumF / n; math.Abs(m-5.5) > 0.1 {
		t.Errorf("mean factor %.3f, want ≈ 5.5", m)
	}
	// MaxFactor 1 gives exactly the runtime; a zero runtime the submit time.
	one := UniformDeadlines{MaxFactor: 1}
	if d := one.Deadline(r, 5, 100); d != 105 {
		t.Errorf("f = 1: deadline %d, want 105", d)
	}
	if d := u.Deadline(r, 5, 0); d != 5 {
		t.Errorf("zero runtime: deadline %d, want 5", d)
	}
	if err := (UniformDeadlines{MaxFactor: 0.5}).Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("MaxFactor 0.5 accepted: %v", err)
	}
}

func TestModalDeadlines(t *testing.T) {
	m := DefaultModalDeadlines(200000)
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(6, 3))
	counts := map[int64]int{}
	const n = 50000
	for range n {
		runtime := int64(r.IntN(100000))
		d := m.Deadline(r, 0, runtime)
		if d < runtime {
			t.Fatalf("infeasible deadline %d for runtime %d", d, runtime)
		}
		counts[d]++
		if runtime > 86400 && d != 200000 {
			t.Fatalf("runtime %d above every round value got %d, want the maximum", runtime, d)
		}
	}
	// Only round values and the maximum occur.
	for d := range counts {
		if d != 200000 && !slices.Contains(m.Values, d) {
			t.Errorf("deadline %d is not a round value", d)
		}
	}
	// About 1% at the maximum beyond those forced there (runtimes > 24 h are
	// ~13.6% of this uniform runtime draw).
	share := float64(counts[200000]) / n
	if share < 0.136 || share > 0.136+0.02 {
		t.Errorf("share at the maximum %.3f", share)
	}
	// A short job can get any value: the model is only weakly tied to the
	// runtime.
	seen := map[int64]bool{}
	for range 2000 {
		seen[m.Deadline(r, 0, 10)] = true
	}
	for _, v := range m.Values {
		if !seen[v] {
			t.Errorf("value %d never drawn for a 10 s job", v)
		}
	}
}

func TestModalDeadlinesHandComputed(t *testing.T) {
	m := ModalDeadlines{Values: []int64{100, 200}, Weights: []float64{0, 1}, Max: 1000, MaxFraction: 0}
	r := rand.New(rand.NewPCG(1, 1))
	if d := m.Deadline(r, 10, 50); d != 210 {
		t.Errorf("only 200 has weight: got %d, want 210", d)
	}
	if d := m.Deadline(r, 10, 500); d != 1010 {
		t.Errorf("no value fits 500: got %d, want the maximum 1010", d)
	}
	m.MaxFraction = 1
	if d := m.Deadline(r, 0, 50); d != 1000 {
		t.Errorf("MaxFraction 1: got %d", d)
	}
	m.Max = 10
	if d := m.Deadline(r, 0, 50); d != 50 {
		t.Errorf("a maximum below the runtime is raised to it: got %d", d)
	}
}

func TestModalDeadlinesValidate(t *testing.T) {
	bad := map[string]ModalDeadlines{
		"lengths":      {Values: []int64{1, 2}, Weights: []float64{1}, Max: 5},
		"unsorted":     {Values: []int64{2, 1}, Weights: []float64{1, 1}, Max: 5},
		"non-positive": {Values: []int64{0, 1}, Weights: []float64{1, 1}, Max: 5},
		"no max":       {Values: []int64{1}, Weights: []float64{1}},
		"fraction":     {Values: []int64{1}, Weights: []float64{1}, Max: 5, MaxFraction: 2},
		"weight":       {Values: []int64{1}, Weights: []float64{-1}, Max: 5},
	}
	for name, m := range bad {
		if err := m.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
