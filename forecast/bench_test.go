package forecast

import (
	"testing"

	"github.com/fedsched/fedsched/traces"
)

// BenchmarkPredict measures one prediction (partition lookup along the chain
// plus the selected predictor's forecast) on a Forecaster whose history is
// the whole KTH trace. Target: under 50 µs.
func BenchmarkPredict(b *testing.B) {
	jobs, epoch := loadTrace(b, traces.KTH)
	f, err := New(testConfig(epoch))
	if err != nil {
		b.Fatal(err)
	}
	var now int64
	for _, j := range completionOrder(jobs) {
		if err := f.Observe(j); err != nil {
			b.Fatal(err)
		}
		now = j.End
	}
	b.ReportMetric(float64(f.Completed()), "history")
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if _, err := f.Predict(jobs[i], now); err != nil {
			b.Fatal(err)
		}
		if i++; i == len(jobs) {
			i = 0
		}
	}
}

// BenchmarkRatioSamples measures the distribution query on the same history.
func BenchmarkRatioSamples(b *testing.B) {
	jobs, epoch := loadTrace(b, traces.KTH)
	f, err := New(testConfig(epoch))
	if err != nil {
		b.Fatal(err)
	}
	for _, j := range completionOrder(jobs) {
		if err := f.Observe(j); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		f.RatioSamples(jobs[i])
		if i++; i == len(jobs) {
			i = 0
		}
	}
}

// BenchmarkPartitionSearch measures the automated partition search over all
// attribute sets of up to MaxDepth attributes on the whole KTH trace.
// Target: under 10 s.
func BenchmarkPartitionSearch(b *testing.B) {
	jobs, epoch := loadTrace(b, traces.KTH)
	cfg := DefaultSearchConfig()
	cfg.Epoch = epoch
	for b.Loop() {
		if _, err := Search(jobs, cfg); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkObserve measures feeding the whole KTH trace's completions (with
// the periodic searches and chain rebuilds) per completion.
func BenchmarkObserve(b *testing.B) {
	jobs, epoch := loadTrace(b, traces.KTH)
	done := completionOrder(jobs)
	b.ResetTimer()
	for b.Loop() {
		f, err := New(testConfig(epoch))
		if err != nil {
			b.Fatal(err)
		}
		for _, j := range done {
			if err := f.Observe(j); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(done)), "ns/completion")
}

// BenchmarkEvaluateKTH measures the whole `fedsched forecast --trace kth`
// evaluation (both replays). Target: under 10 s.
func BenchmarkEvaluateKTH(b *testing.B) {
	jobs, epoch := loadTrace(b, traces.KTH)
	cfg := DefaultEvalConfig()
	cfg.Forecaster.Search.Epoch = epoch
	for b.Loop() {
		if _, err := Evaluate(jobs, cfg); err != nil {
			b.Fatal(err)
		}
	}
}
