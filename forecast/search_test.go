package forecast

import (
	"errors"
	"math"
	"testing"

	"github.com/fedsched/fedsched/traces"
)

func TestCVHandComputed(t *testing.T) {
	// {1, 3}: mean 2, population sd 1.
	if got := cvOf([]float64{1, 3}); !near(got, 0.5) {
		t.Errorf("cv = %v, want 0.5", got)
	}
	if got := cvOf([]float64{5, 5, 5}); got != 0 {
		t.Errorf("cv of a constant = %v", got)
	}
}

func TestSearchHandComputed(t *testing.T) {
	// Two users of two jobs each: user 1 runs {1, 3} (cv .5), user 2 runs
	// {10, 10} (cv 0); every job is on the same procs band.
	jobs := []Job{
		{User: 1, Procs: 1, Runtime: 1}, {User: 1, Procs: 1, Runtime: 3},
		{User: 2, Procs: 1, Runtime: 10}, {User: 2, Procs: 1, Runtime: 10},
	}
	cfg := DefaultSearchConfig()
	cfg.MinSamples = 2
	cfg.Attrs = []Attr{AttrUser, AttrProcs}
	cfg.MaxDepth = 2
	for _, weighted := range []bool{false, true} {
		cfg.Weighted = weighted
		res, err := Search(jobs, cfg)
		if err != nil {
			t.Fatal(err)
		}
		// Root: mean 6, values {1,3,10,10}: var = (25+9+16+16)/4 = 16.5.
		if want := math.Sqrt(16.5) / 6; !near(res.RootCV, want) {
			t.Errorf("root cv %v, want %v", res.RootCV, want)
		}
		byAttrs := map[AttrSet]Candidate{}
		for _, c := range res.Candidates {
			byAttrs[c.Attrs] = c
		}
		user := byAttrs[NewAttrSet(AttrUser)]
		// Mean of .5 and 0, weighted or not (equal sizes).
		if !near(user.MeanCV, 0.25) || user.Partitions != 2 || user.Coverage != 1 || user.Parent != 0 {
			t.Errorf("user candidate %+v", user)
		}
		procs := byAttrs[NewAttrSet(AttrProcs)]
		if !near(procs.MeanCV, res.RootCV) || procs.Reduction != 0 {
			t.Errorf("a constant attribute must not reduce the CV: %+v", procs)
		}
		both := byAttrs[NewAttrSet(AttrUser, AttrProcs)]
		if both.Parent != NewAttrSet(AttrUser) || both.Reduction != 0 {
			t.Errorf("user+procs compared with %v, reduction %v", both.Parent, both.Reduction)
		}
		if len(res.Chain) != 1 || res.Chain[0] != NewAttrSet(AttrUser) {
			t.Errorf("chain %v, want [user]", res.Chain)
		}
		if res.Candidates[0].Attrs != NewAttrSet(AttrUser) {
			t.Errorf("best-ranked %v, want user", res.Candidates[0].Attrs)
		}
	}
}

func TestSearchRespectsMinSamplesAndDepth(t *testing.T) {
	jobs, epoch := loadTrace(t, traces.HPC2N)
	cfg := DefaultSearchConfig()
	cfg.Epoch = epoch
	cfg.MaxDepth = 2
	res, err := Search(jobs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Candidates {
		if c.Attrs.Len() > 2 {
			t.Errorf("candidate %v deeper than MaxDepth", c.Attrs)
		}
		if c.Partitions == 0 || c.Coverage <= 0 || c.Coverage > 1 {
			t.Errorf("candidate %+v", c)
		}
	}
	for i := 1; i < len(res.Candidates); i++ {
		if res.Candidates[i].Reduction > res.Candidates[i-1].Reduction {
			t.Fatalf("candidates not ranked at %d", i)
		}
	}
	// A huge MinSamples leaves nothing to refine with.
	cfg.MinSamples = len(jobs) + 1
	res, _ = Search(jobs, cfg)
	if len(res.Candidates) != 0 || len(res.Chain) != 0 {
		t.Errorf("candidates %d chain %v with MinSamples above the job count", len(res.Candidates), res.Chain)
	}
}

func TestSearchErrors(t *testing.T) {
	if _, err := Search(nil, DefaultSearchConfig()); !errors.Is(err, ErrNoJobs) {
		t.Errorf("empty history: %v", err)
	}
	cfg := DefaultSearchConfig()
	cfg.MaxDepth = 0
	if _, err := Search([]Job{{Runtime: 1}}, cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("bad config: %v", err)
	}
}

func TestSearchIsDeterministic(t *testing.T) {
	jobs, epoch := loadTrace(t, traces.HPC2N)
	cfg := DefaultSearchConfig()
	cfg.Epoch = epoch
	a, _ := Search(jobs, cfg)
	b, _ := Search(jobs, cfg)
	if len(a.Candidates) != len(b.Candidates) {
		t.Fatal("different candidate counts")
	}
	for i := range a.Candidates {
		if a.Candidates[i] != b.Candidates[i] {
			t.Fatalf("candidate %d differs: %+v vs %+v", i, a.Candidates[i], b.Candidates[i])
		}
	}
}
