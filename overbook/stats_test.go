package overbook

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

func TestRuntimeBand(t *testing.T) {
	tests := []struct {
		est  int64
		want int
	}{
		{-1, 0}, {0, 0}, {599, 0}, // < 10 min
		{600, 1}, {3599, 1}, // 10 min – 1 h
		{3600, 2}, {7199, 2}, // 1–2 h
		{7200, 3}, {10799, 3}, // 2–3 h
		{10800, 4}, {17999, 4}, // 3–5 h
		{18000, 5}, {43199, 5}, // 5–12 h
		{43200, 6}, {1 << 40, 6}, // >= 12 h
	}
	for _, tc := range tests {
		if got := RuntimeBand(tc.est); got != tc.want {
			t.Errorf("RuntimeBand(%d) = %d, want %d", tc.est, got, tc.want)
		}
	}
}

func TestProcsBand(t *testing.T) {
	tests := []struct{ procs, want int }{
		{-3, 0}, {0, 0}, {1, 0}, {2, 1}, {3, 2}, {4, 2}, {5, 3}, {8, 3}, {9, 4}, {16, 4},
		{17, 5}, {32, 5}, {33, 6}, {64, 6}, {65, 7}, {100000, 7},
	}
	for _, tc := range tests {
		if got := ProcsBand(tc.procs); got != tc.want {
			t.Errorf("ProcsBand(%d) = %d, want %d", tc.procs, got, tc.want)
		}
	}
}

func TestKeyOfAndClassifierText(t *testing.T) {
	j := JobInfo{Procs: 12, Estimate: 5400, User: "alice", App: "gromacs"}
	want := map[Classifier]string{General: "general", ByRuntime: "runtime/2", ByProcs: "procs/4", ByUser: "user/alice", ByApp: "app/gromacs"}
	for c, w := range want {
		k, ok := KeyOf(c, j)
		if !ok || k.String() != w {
			t.Errorf("KeyOf(%v) = %v %v, want %s", c, k, ok, w)
		}
		b, err := c.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var c2 Classifier
		if err := c2.UnmarshalText(b); err != nil || c2 != c {
			t.Errorf("text round trip of %v: %v %v", c, c2, err)
		}
	}
	if _, ok := KeyOf(ByUser, JobInfo{Estimate: 1}); ok {
		t.Error("empty user has a class")
	}
	if _, err := ParseClassifier("nope"); !errors.Is(err, ErrBadConfig) {
		t.Errorf("ParseClassifier(nope) = %v", err)
	}
	if Classifier(42).String() != "Classifier(42)" {
		t.Error(Classifier(42).String())
	}
}

func TestNewStatsValidation(t *testing.T) {
	bad := []StatsConfig{
		{Classifier: -1}, {Classifier: numClassifiers}, {MinSamples: -1}, {MinSamples: math.NaN()},
		{MinSamples: math.Inf(1)}, {AgeFactor: 1.5}, {AgeFactor: -0.1}, {AgeFactor: math.NaN()}, {AgeEvery: -1},
	}
	for _, c := range bad {
		if _, err := NewStats(c); !errors.Is(err, ErrBadConfig) {
			t.Errorf("NewStats(%+v) = %v, want ErrBadConfig", c, err)
		}
	}
}

// Fallback: a class thinner than MinSamples uses the general histogram.
func TestStatsFallback(t *testing.T) {
	s, err := NewStats(StatsConfig{Classifier: ByUser, MinSamples: 3})
	if err != nil {
		t.Fatal(err)
	}
	alice := JobInfo{Procs: 1, Estimate: 100, User: "alice"}
	bob := JobInfo{Procs: 1, Estimate: 100, User: "bob"}
	// General: bob ×4 at bin 100, alice ×2 at bin 10.
	for range 4 {
		if err := s.Observe(bob, 100); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		_ = s.Observe(alice, 10)
	}
	h, k := s.Resolve(alice)
	// Alice has 2 < 3 samples: general, CDF(10) = 2/6.
	if k.By != General || math.Abs(h.CDF(10)-2.0/6) > 1e-15 {
		t.Errorf("alice with 2 samples: class %v CDF(10) %v, want general 1/3", k, h.CDF(10))
	}
	_ = s.Observe(alice, 10)
	h, k = s.Resolve(alice)
	if k.String() != "user/alice" || h.CDF(10) != 1 {
		t.Errorf("alice with 3 samples: class %v CDF(10) %v, want user/alice 1", k, h.CDF(10))
	}
	// Unknown user, and a job without a user: general (CDF(10) = 3/7).
	for _, j := range []JobInfo{{Estimate: 100, User: "carol"}, {Estimate: 100}} {
		h, k = s.Resolve(j)
		if k.By != General || math.Abs(h.CDF(10)-3.0/7) > 1e-15 {
			t.Errorf("%+v: %v %v", j, k, h.CDF(10))
		}
	}
	// Other classifiers on the same data: runtime band 0 has all 7 samples.
	if h := s.HistogramBy(ByRuntime, alice); math.Abs(h.CDF(10)-3.0/7) > 1e-15 {
		t.Errorf("runtime class CDF(10) = %v", h.CDF(10))
	}
	if got := len(s.Classes(ByUser)); got != 2 {
		t.Errorf("%d user classes, want 2", got)
	}
	if got := len(s.Classes(General)); got != 1 {
		t.Errorf("%d general classes, want 1", got)
	}
	if s.Updates() != 7 {
		t.Errorf("Updates = %d", s.Updates())
	}
}

// Ageing: AgeFactor 0.5 every 2 observations.
//
//	obs 1: N = 1; obs 2: N = 2, aged → 1; obs 3: N = 2; obs 4: N = 3, aged → 1.5.
func TestStatsAgeing(t *testing.T) {
	s, _ := NewStats(StatsConfig{AgeFactor: 0.5, AgeEvery: 2, MinSamples: 0.1})
	j := JobInfo{Procs: 1, Estimate: 100, User: "u"}
	wantN := []float64{1, 1, 2, 1.5}
	for i, w := range wantN {
		if err := s.Observe(j, 50); err != nil {
			t.Fatal(err)
		}
		if got := s.Histogram(j).N(); got != w {
			t.Errorf("after %d observations N = %v, want %v", i+1, got, w)
		}
		if got := s.HistogramBy(ByUser, j).N(); got != w {
			t.Errorf("after %d observations user N = %v, want %v", i+1, got, w)
		}
	}
	// Without ageing (factor 1) nothing decays.
	s2, _ := NewStats(StatsConfig{AgeFactor: 1, AgeEvery: 1})
	for range 5 {
		_ = s2.Observe(j, 50)
	}
	if s2.Histogram(j).N() != 5 {
		t.Errorf("AgeFactor 1 aged: N = %v", s2.Histogram(j).N())
	}
}

func TestStatsTrainErrors(t *testing.T) {
	s, _ := NewStats(StatsConfig{})
	if err := s.Train([]JobInfo{{Estimate: 1}}, nil); !errors.Is(err, ErrLengthMismatch) {
		t.Errorf("mismatch: %v", err)
	}
	err := s.Train([]JobInfo{{Estimate: 10}, {Estimate: 0}}, []int64{5, 5})
	if !errors.Is(err, ErrBadSample) || !strings.Contains(err.Error(), "job 1") {
		t.Errorf("bad sample: %v", err)
	}
	if s.Updates() != 0 {
		t.Error("a failed Train recorded samples")
	}
	if err := s.Observe(JobInfo{Estimate: 10}, -1); !errors.Is(err, ErrBadSample) {
		t.Errorf("Observe: %v", err)
	}
}

func trainedStats(t testing.TB, seed uint64, n int) *Stats {
	t.Helper()
	s, err := NewStats(StatsConfig{Classifier: ByRuntime, MinSamples: 5, AgeFactor: 0.97, AgeEvery: 7})
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 99))
	jobs := make([]JobInfo, n)
	acts := make([]int64, n)
	users := []string{"", "alice", "bob", "carol", "dave"}
	apps := []string{"", "g03", "starcd", "mpich"}
	for i := range jobs {
		est := 60 + r.Int64N(48*3600)
		jobs[i] = JobInfo{Procs: 1 + r.IntN(200), Estimate: est, User: users[r.IntN(len(users))], App: apps[r.IntN(len(apps))]}
		acts[i] = r.Int64N(est + est/4)
	}
	if err := s.Train(jobs, acts); err != nil {
		t.Fatal(err)
	}
	return s
}

func sameStats(t *testing.T, a, b *Stats) {
	t.Helper()
	if a.cfg != b.cfg || a.updates != b.updates || !a.general.h.Equal(&b.general.h) {
		t.Fatalf("config, updates or general differ")
	}
	for c := range a.classes {
		if len(a.classes[c]) != len(b.classes[c]) {
			t.Fatalf("classifier %v: %d vs %d classes", Classifier(c), len(a.classes[c]), len(b.classes[c]))
		}
		for k, cl := range a.classes[c] {
			o := b.classes[c][k]
			if o == nil || !cl.h.Equal(&o.h) {
				t.Fatalf("class %v/%s differs", Classifier(c), k)
			}
		}
	}
}

func TestStatsJSONRoundTrip(t *testing.T) {
	s := trainedStats(t, 1, 2000)
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var s2 Stats
	if err := json.Unmarshal(b, &s2); err != nil {
		t.Fatal(err)
	}
	sameStats(t, s, &s2)
	b2, _ := json.Marshal(&s2)
	if !bytes.Equal(b, b2) {
		t.Fatal("re-marshalled bytes differ")
	}
	// Both continue identically, including the ageing schedule.
	j := JobInfo{Procs: 3, Estimate: 4000, User: "alice", App: "g03"}
	for i := range 20 {
		_ = s.Observe(j, int64(100*i))
		_ = s2.Observe(j, int64(100*i))
	}
	sameStats(t, s, &s2)
	if s.Histogram(j).CDF(40) != s2.Histogram(j).CDF(40) {
		t.Fatal("histograms differ after continuing")
	}
}

func TestStatsUnmarshalCorrupt(t *testing.T) {
	good, _ := json.Marshal(trainedStats(t, 2, 50))
	h := `[` + repeat("0,", 100) + `1]`
	bad := map[string]string{
		"empty":          ``,
		"null":           `null`,
		"garbage":        `}{`,
		"empty object":   `{}`,
		"version":        `{"version":2,"config":{"classifier":"general"},"general":` + h + `}`,
		"no general":     `{"version":1,"config":{"classifier":"general"}}`,
		"null general":   `{"version":1,"config":{"classifier":"general"},"general":null}`,
		"short hist":     `{"version":1,"config":{"classifier":"general"},"general":[1,2]}`,
		"negative":       `{"version":1,"config":{"classifier":"general"},"general":[` + repeat("0,", 100) + `-1]}`,
		"unknown field":  `{"version":1,"config":{"classifier":"general"},"general":` + h + `,"x":1}`,
		"bad classifier": `{"version":1,"config":{"classifier":"zzz"},"general":` + h + `}`,
		"bad age":        `{"version":1,"config":{"classifier":"general","age_factor":2},"general":` + h + `}`,
		"neg updates":    `{"version":1,"config":{"classifier":"general"},"updates":-1,"general":` + h + `}`,
		"family":         `{"version":1,"config":{"classifier":"general"},"general":` + h + `,"classes":{"general":{"":` + h + `}}}`,
		"band range":     `{"version":1,"config":{"classifier":"general"},"general":` + h + `,"classes":{"runtime":{"7":` + h + `}}}`,
		"band format":    `{"version":1,"config":{"classifier":"general"},"general":` + h + `,"classes":{"procs":{"01":` + h + `}}}`,
		"empty user":     `{"version":1,"config":{"classifier":"general"},"general":` + h + `,"classes":{"user":{"":` + h + `}}}`,
		"null class":     `{"version":1,"config":{"classifier":"general"},"general":` + h + `,"classes":{"user":{"a":null}}}`,
		"trailing":       string(good) + `{}`,
		"truncated":      string(good[:len(good)/2]),
	}
	for name, in := range bad {
		s := trainedStats(t, 3, 30)
		before, _ := json.Marshal(s)
		err := s.UnmarshalJSON([]byte(in))
		if !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: err = %v, want ErrCorrupt", name, err)
		}
		after, _ := json.Marshal(s)
		if !bytes.Equal(before, after) {
			t.Errorf("%s: failed unmarshal changed the stats", name)
		}
	}
}

func FuzzStatsUnmarshal(f *testing.F) {
	good, _ := json.Marshal(trainedStats(f, 4, 40))
	f.Add(good)
	f.Add([]byte(`{"version":1,"config":{"classifier":"user","min_samples":3},"updates":2,"general":[` + repeat("0,", 100) + `2]}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var s Stats
		if err := s.UnmarshalJSON(b); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		// Whatever decodes must be usable and round-trip exactly.
		h := s.Histogram(JobInfo{Procs: 2, Estimate: 3600, User: "alice", App: "g03"})
		if c := h.CDFAt(1800, 3600); !(c >= 0 && c <= 1) {
			t.Fatalf("CDFAt = %v", c)
		}
		b2, err := json.Marshal(&s)
		if err != nil {
			t.Fatal(err)
		}
		var s2 Stats
		if err := s2.UnmarshalJSON(b2); err != nil {
			t.Fatalf("re-decoding own output: %v", err)
		}
		b3, _ := json.Marshal(&s2)
		if !bytes.Equal(b2, b3) {
			t.Fatal("round trip not exact")
		}
	})
}

// Observe and Histogram from many goroutines (run with -race).
func TestStatsConcurrent(t *testing.T) {
	s, _ := NewStats(StatsConfig{Classifier: ByProcs, MinSamples: 1, AgeFactor: 0.9, AgeEvery: 10})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 500 {
				_ = s.Observe(JobInfo{Procs: 1 + g, Estimate: 1000}, int64(i))
			}
		}()
		go func() {
			defer wg.Done()
			for i := range 500 {
				h := s.Histogram(JobInfo{Procs: 1 + g, Estimate: 1000})
				if c := h.CDFAt(int64(i), 1000); c < 0 || c > 1 {
					t.Errorf("CDFAt = %v", c)
				}
			}
		}()
	}
	wg.Wait()
	if s.Updates() != 2000 {
		t.Errorf("Updates = %d", s.Updates())
	}
}
