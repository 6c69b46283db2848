package sim

import (
	"slices"
)

// StartAccuracy compares the start a job was promised at submission
// (Record.Planned) with its actual start, over the jobs that started with
// a promise. Error = actual - planned, in seconds: positive is late.
type StartAccuracy struct {
	Jobs int `json:"jobs"`
	// OnTime is the share of jobs that started exactly when planned,
	// Within1m within a minute either way, Late1h more than an hour late,
	// Early more than a minute early.
	OnTime   float64 `json:"on_time"`
	Within1m float64 `json:"within_1m"`
	Late1h   float64 `json:"late_1h"`
	Early    float64 `json:"early"`
	// P10, P50, P90 and P99 are percentiles of the error, seconds;
	// MeanAbs its mean absolute value.
	P10     int64   `json:"p10_s"`
	P50     int64   `json:"p50_s"`
	P90     int64   `json:"p90_s"`
	P99     int64   `json:"p99_s"`
	MeanAbs float64 `json:"mean_abs_s"`
}

// StartErrors returns actual - planned start of every job that started with
// a promise, sorted ascending.
func StartErrors(recs []Record) []int64 {
	errs := make([]int64, 0, len(recs))
	for i := range recs {
		// By index: a Record is ~240 bytes, and ranging by value copies each.
		if r := &recs[i]; r.Started && r.Promised {
			errs = append(errs, r.Start-r.Planned)
		}
	}
	slices.Sort(errs)
	return errs
}

// ComputeStartAccuracy summarises StartErrors; nil if no job qualifies.
func ComputeStartAccuracy(recs []Record) *StartAccuracy {
	return StartAccuracyOf(StartErrors(recs))
}

// StartAccuracyOf summarises start errors sorted ascending (StartErrors,
// or several runs' merged); nil for none.
func StartAccuracyOf(errs []int64) *StartAccuracy {
	if len(errs) == 0 {
		return nil
	}
	n := float64(len(errs))
	a := &StartAccuracy{Jobs: len(errs)}
	var abs float64
	for _, e := range errs {
		switch {
		case e == 0:
			a.OnTime++
		case e > 3600:
			a.Late1h++
		case e < -60:
			a.Early++
		}
		if e >= -60 && e <= 60 {
			a.Within1m++
		}
		abs += float64(max(e, -e))
	}
	a.OnTime, a.Within1m, a.Late1h, a.Early, a.MeanAbs = a.OnTime/n, a.Within1m/n, a.Late1h/n, a.Early/n, abs/n
	q := func(p float64) int64 { return errs[min(len(errs)-1, int(p*n))] }
	a.P10, a.P50, a.P90, a.P99 = q(0.1), q(0.5), q(0.9), q(0.99)
	return a
}
