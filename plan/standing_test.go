package plan

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"
)

// bruteInstances enumerates a rule instance by instance from its start,
// taking weekdays from the time package.
func bruteInstances(st Standing, from, to int64) []Window {
	var out []Window
	until := st.Until
	if until == 0 {
		until = Forever
	}
	for s := st.Start; s < until && s < to; s += st.Every {
		if s+st.Length <= from {
			continue
		}
		if len(st.Weekdays) > 0 && !slices.Contains(st.Weekdays, time.Unix(st.Epoch+s, 0).UTC().Weekday()) {
			continue
		}
		out = append(out, Window{Start: s, End: s + st.Length})
	}
	return out
}

func TestStandingInstancesAgainstBruteForce(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	periods := []int64{1, 7, 600, 3600, 6 * 3600, 86400, 86400 + 3600, 7 * 86400, 10 * 86400}
	nonEmpty := 0
	for i := 0; i < 3000; i++ {
		every := periods[rng.IntN(len(periods))]
		st := Standing{
			Name:   "r",
			Procs:  1 + rng.IntN(8),
			Start:  rng.Int64N(4_000_000) - 2_000_000,
			Every:  every,
			Length: 1 + rng.Int64N(every),
			Epoch:  rng.Int64N(4_000_000_000) - 1_000_000_000, // before and after 1970
		}
		if rng.IntN(3) == 0 {
			st.Until = st.Start + 1 + rng.Int64N(3_000_000)
		}
		if rng.IntN(2) == 0 {
			for d := time.Sunday; d <= time.Saturday; d++ {
				if rng.IntN(3) == 0 {
					st.Weekdays = append(st.Weekdays, d)
				}
			}
		}
		// Keep the brute force short: about 2000 periods at most.
		span := min(every*2000, 6_000_000)
		from := st.Start - span/2 + rng.Int64N(span)
		to := from + rng.Int64N(span)
		if err := st.Validate(); err != nil {
			t.Fatalf("%+v: %v", st, err)
		}
		got := st.Instances(from, to)
		want := bruteInstances(st, from, to)
		if len(got) == 0 && len(want) == 0 {
			continue
		}
		nonEmpty++
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("rule %+v over [%d, %d):\n got %v\nwant %v", st, from, to, got, want)
		}
	}
	if nonEmpty < 1000 {
		t.Fatalf("only %d of the random cases had instances", nonEmpty)
	}
}

// TestStandingWeekdaysCalendar checks a weekday rule against a day-by-day
// walk of the calendar: every day at 02:00 UTC for one hour, Monday to
// Friday, plan time 0 being Monday 1 January 2024, 00:00 UTC.
func TestStandingWeekdaysCalendar(t *testing.T) {
	epoch := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	st := Standing{Name: "weekday nights", Procs: 4, Start: 2 * 3600, Every: 86400, Length: 3600, Epoch: epoch.Unix(),
		Weekdays: []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday}}
	const days = 400 // crosses a leap day and a year end
	var want []Window
	for d := epoch; d.Before(epoch.AddDate(0, 0, days)); d = d.AddDate(0, 0, 1) {
		if wd := d.Weekday(); wd == time.Saturday || wd == time.Sunday {
			continue
		}
		s := d.Add(2*time.Hour).Unix() - epoch.Unix()
		want = append(want, Window{Start: s, End: s + 3600})
	}
	got := st.Instances(0, days*86400)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %d instances, want %d\n got %v\nwant %v", len(got), len(want), got[:min(10, len(got))], want[:min(10, len(want))])
	}
	// A window that starts inside an instance includes it; one that ends at
	// an instance's start excludes it.
	if got := st.Instances(2*3600+10, 2*3600+20); len(got) != 1 || got[0].Start != 2*3600 {
		t.Fatalf("inside an instance: %v", got)
	}
	if got := st.Instances(0, 2*3600); len(got) != 0 {
		t.Fatalf("before the first instance: %v", got)
	}
	// Saturday 6 January 2024 has no instance; Monday 8 January does.
	sat := time.Date(2024, 1, 6, 0, 0, 0, 0, time.UTC).Unix() - epoch.Unix()
	if got := st.Instances(sat, sat+86400); len(got) != 0 {
		t.Fatalf("saturday: %v", got)
	}
	if got := st.Instances(sat, sat+3*86400); len(got) != 1 || got[0].Start != sat+2*86400+2*3600 {
		t.Fatalf("weekend to monday: %v", got)
	}
}

func TestStandingWeekdayOffsetEpoch(t *testing.T) {
	// Plan time 0 is Friday 2024-03-15 13:37 UTC. Instances every 6 hours
	// from plan time 0 fall at Fri 13:37, Fri 19:37, Sat 01:37, Sat 07:37,
	// Sat 13:37, Sat 19:37, Sun 01:37, ...: on Saturdays only, instances 2
	// to 5 remain.
	epoch := time.Date(2024, 3, 15, 13, 37, 0, 0, time.UTC)
	st := Standing{Procs: 1, Every: 6 * 3600, Length: 60, Epoch: epoch.Unix(), Weekdays: []time.Weekday{time.Saturday}}
	got := st.Instances(0, 3*86400)
	if len(got) != 4 {
		t.Fatalf("got %v, want the four Saturday instances", got)
	}
	for _, w := range got {
		if wd := epoch.Add(time.Duration(w.Start) * time.Second).Weekday(); wd != time.Saturday {
			t.Fatalf("instance %v on %v", w, wd)
		}
	}
	if got[0].Start != 2*6*3600 {
		t.Fatalf("first Saturday instance at %d, want %d", got[0].Start, 2*6*3600)
	}
}

func TestStandingValidate(t *testing.T) {
	ok := Standing{Name: "ok", Procs: 2, Start: 0, Every: 3600, Length: 600}
	tests := []struct {
		name string
		mod  func(*Standing)
		bad  bool
	}{
		{"ok", func(*Standing) {}, false},
		{"length equals period", func(s *Standing) { s.Length = 3600 }, false},
		{"until forever", func(s *Standing) { s.Until = Forever }, false},
		{"weekdays", func(s *Standing) { s.Weekdays = []time.Weekday{time.Sunday, time.Saturday} }, false},
		{"no procs", func(s *Standing) { s.Procs = 0 }, true},
		{"no period", func(s *Standing) { s.Every = 0 }, true},
		{"negative period", func(s *Standing) { s.Every = -5 }, true},
		{"no length", func(s *Standing) { s.Length = 0 }, true},
		{"length over period", func(s *Standing) { s.Length = 3601 }, true},
		{"until before start", func(s *Standing) { s.Start, s.Until = 100, 50 }, true},
		{"until at start", func(s *Standing) { s.Start, s.Until = 100, 100 }, true},
		{"start at never", func(s *Standing) { s.Start = Never }, true},
		{"start at forever", func(s *Standing) { s.Start = Forever }, true},
		{"bad weekday", func(s *Standing) { s.Weekdays = []time.Weekday{7} }, true},
		{"epoch out of range", func(s *Standing) { s.Epoch = Forever }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := ok
			tc.mod(&st)
			err := st.Validate()
			if tc.bad != (err != nil) {
				t.Fatalf("Validate = %v, want error %v", err, tc.bad)
			}
			if err != nil && !errorsIs(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
			if err != nil && st.Instances(0, 100_000) != nil {
				t.Fatalf("an invalid rule has instances")
			}
		})
	}
}

func TestStandingInstancesExtremeRange(t *testing.T) {
	st := Standing{Procs: 1, Start: 0, Every: 86400, Length: 3600, Until: 10 * 86400}
	got := st.Instances(Never, Forever)
	if len(got) != 10 || got[9].Start != 9*86400 {
		t.Fatalf("got %v", got)
	}
	st = Standing{Procs: 1, Start: Forever - 10, Every: Forever - 1, Length: 5}
	if got := st.Instances(Never, Forever); len(got) != 1 || got[0].End != Forever-5 {
		t.Fatalf("near Forever: %v", got)
	}
	if got := st.Instances(5, 5); got != nil {
		t.Fatalf("empty range: %v", got)
	}
}

func TestStandingExcludes(t *testing.T) {
	nightly := []Standing{{Name: "n", Procs: 6, Start: 3600, Every: 86400, Length: 7200}}
	for _, c := range []struct {
		j    Job
		want bool
	}{
		{Job{Procs: 2, Estimate: 30 * 3600, Deadline: Forever}, false},                       // fits beside the rule
		{Job{Procs: 4, Estimate: 30 * 3600, Deadline: Forever}, true},                        // every day the rule leaves 2
		{Job{Procs: 4, Estimate: 20 * 3600, Deadline: Forever}, false},                       // fits between two nights
		{Job{Procs: 4, Estimate: 20 * 3600, Release: 3600, Deadline: 3600 + 10*3600}, false}, // the deadline alone rules it out
		{Job{Procs: 4, Estimate: 20 * 3600, Release: 3600, Deadline: 3600 + 20*3600}, true},  // the night in its only window
		{Job{Procs: 4, Estimate: 20 * 3600, Release: 3600, Deadline: 3600 + 22*3600}, false}, // after the night, before the deadline
		{Job{Procs: 9, Estimate: 3600, Deadline: Forever}, false},                            // too wide: not the rule's doing
	} {
		if got := StandingExcludes(nightly, 8, c.j, 0); got != c.want {
			t.Errorf("%+v: StandingExcludes = %v, want %v", c.j, got, c.want)
		}
	}
	if StandingExcludes([]Standing{{Name: "n", Procs: 6, Start: 3600, Every: 86400, Length: 7200, Until: 86400}}, 8, Job{Procs: 4, Estimate: 30 * 3600, Deadline: Forever}, 0) {
		t.Error("a rule that has ended excludes a job")
	}
	if c := Cycle([]Standing{{Every: 6 * 3600}, {Every: 86400, Weekdays: []time.Weekday{time.Monday}}}); c != 7*86400 {
		t.Errorf("Cycle = %d, want a week", c)
	}
}
