package plan

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func TestPolicyKey(t *testing.T) {
	tests := []struct {
		name string
		pol  Policy
		job  Job
		want int64
	}{
		{"edf: the deadline", EDF, Job{Deadline: 100, Estimate: 30, Forecast: 10}, 100},
		{"lttr: deadline - forecast", LTTR, Job{Deadline: 100, Estimate: 30, Forecast: 10}, 90},
		{"lttr: no forecast uses the estimate", LTTR, Job{Deadline: 100, Estimate: 30}, 70},
		{"lttr: a negative forecast is none", LTTR, Job{Deadline: 100, Estimate: 30, Forecast: -5}, 70},
		{"lttr: the key may be in the past", LTTR, Job{Deadline: 10, Estimate: 30}, -20},
		{"edf: no deadline sorts last", EDF, Job{Deadline: Forever, Estimate: 30}, Forever},
		{"lttr: no deadline sorts last", LTTR, Job{Deadline: Forever, Estimate: 30, Forecast: 5}, Forever},
		{"easy: no key", EASY, Job{Deadline: 100, Estimate: 30}, 0},
		{"conservative: no key", Conservative, Job{Deadline: 100, Estimate: 30}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.pol.Key(&tc.job); got != tc.want {
				t.Fatalf("Key = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestParseDeadlinePolicies(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Policy
	}{{"edf", EDF}, {"LTTR", LTTR}, {"list", LIST}} {
		got, err := ParsePolicy(tc.in)
		if err != nil || got != tc.want {
			t.Fatalf("ParsePolicy(%q) = %v, %v", tc.in, got, err)
		}
	}
	// The existing policies keep their numbers.
	if Conservative != 0 || EASY != 1 || FCFS != 2 || LIST != 3 || EDF != 4 || LTTR != 5 {
		t.Fatal("policy numbers moved")
	}
	if !EDF.DeadlineOrdered() || !LTTR.DeadlineOrdered() || EASY.DeadlineOrdered() {
		t.Fatal("DeadlineOrdered")
	}
}

// startOrder runs jobs, all of one processor, on a one-processor site that
// is busy until 10 (so they all queue up first), and returns the order in
// which they start. Each job runs 1 s.
func startOrder(t *testing.T, pol Policy, jobs []Job) []int64 {
	t.Helper()
	s, err := NewSite(Config{Procs: 1, Policy: pol})
	if err != nil {
		t.Fatal(err)
	}
	if pl := s.Submit(0, Job{ID: 1000, Procs: 1, Estimate: 10, Deadline: Forever}); !pl.OK() {
		t.Fatalf("blocker: %+v", pl)
	}
	if ds := s.Pass(0); len(ds) != 1 {
		t.Fatalf("blocker did not start: %+v", ds)
	}
	for _, j := range jobs {
		j.Procs, j.Release = 1, 1
		if pl := s.Submit(1, j); !pl.OK() {
			t.Fatalf("job %d: %+v", j.ID, pl)
		}
	}
	if ds := s.Pass(1); len(ds) != 0 {
		t.Fatalf("started while the site is full: %+v", ds)
	}
	var order []int64
	running, now := int64(1000), int64(10)
	for {
		s.End(now, running)
		ds := s.Pass(now)
		if len(ds) == 0 {
			break
		}
		if len(ds) != 1 || ds[0].Kind != DecideStart {
			t.Fatalf("at %d: %+v", now, ds)
		}
		running = ds[0].JobID
		order = append(order, running)
		now++
	}
	if s.Waiting() != 0 {
		t.Fatalf("%d jobs left waiting", s.Waiting())
	}
	return order
}

func TestDeadlinePolicyOrder(t *testing.T) {
	// Jobs are submitted in ID order. est is the estimate, f the forecast.
	type j struct{ id, deadline, est, f int64 }
	tests := []struct {
		name string
		jobs []j
		want map[Policy][]int64
	}{
		{
			name: "deadlines uncorrelated with submission",
			jobs: []j{{1, 500, 5, 0}, {2, 300, 5, 0}, {3, 400, 5, 0}},
			want: map[Policy][]int64{EDF: {2, 3, 1}, LTTR: {2, 3, 1}, FCFS: {1, 2, 3}, EASY: {1, 2, 3}},
		},
		{
			// LTTR keys: 1: 500-450 = 50; 2: 300-10 = 290; 3: 400-300
			// (estimate, no forecast) = 100. EDF sees only the deadlines.
			name: "lttr subtracts the forecast, else the estimate",
			jobs: []j{{1, 500, 480, 450}, {2, 300, 100, 10}, {3, 400, 300, 0}},
			want: map[Policy][]int64{EDF: {2, 3, 1}, LTTR: {1, 3, 2}},
		},
		{
			name: "equal keys keep submission order",
			jobs: []j{{1, 300, 5, 0}, {2, 200, 5, 0}, {3, 300, 5, 0}, {4, 200, 5, 0}},
			want: map[Policy][]int64{EDF: {2, 4, 1, 3}, LTTR: {2, 4, 1, 3}},
		},
		{
			// LTTR keys: 1: 300-5 = 295, 2: 305-10 = 295 (tie), 3: 290.
			name: "lttr ties on the derived key",
			jobs: []j{{1, 300, 5, 0}, {2, 305, 50, 10}, {3, 300, 10, 0}},
			want: map[Policy][]int64{EDF: {1, 3, 2}, LTTR: {3, 1, 2}},
		},
		{
			name: "no deadline waits behind every deadline",
			jobs: []j{{1, Forever, 5, 0}, {2, 1 << 40, 5, 0}, {3, Forever, 5, 2}, {4, 50, 5, 0}},
			want: map[Policy][]int64{EDF: {4, 2, 1, 3}, LTTR: {4, 2, 1, 3}, FCFS: {1, 2, 3, 4}},
		},
	}
	for _, tc := range tests {
		for pol, want := range tc.want {
			t.Run(tc.name+"/"+pol.String(), func(t *testing.T) {
				var jobs []Job
				for _, x := range tc.jobs {
					jobs = append(jobs, Job{ID: x.id, Deadline: x.deadline, Estimate: x.est, Forecast: x.f})
				}
				if got := startOrder(t, pol, jobs); !slices.Equal(got, want) {
					t.Fatalf("start order %v, want %v", got, want)
				}
			})
		}
	}
}

// TestDeadlineBackfill checks that EDF and LTTR backfill like EASY around
// the head of their own order: a later job starts now only if it does not
// delay the head's reservation.
func TestDeadlineBackfill(t *testing.T) {
	for _, pol := range []Policy{EDF, LTTR} {
		t.Run(pol.String(), func(t *testing.T) {
			s, err := NewSite(Config{Procs: 4, Policy: pol})
			if err != nil {
				t.Fatal(err)
			}
			s.Submit(0, Job{ID: 9, Procs: 3, Estimate: 10, Deadline: Forever})
			s.Pass(0) // 9 runs on 3 processors until 10
			// Submitted latest-deadline first. Head by key: 1 (4 procs,
			// reserved at 10). 2 (1 proc for 20 s) would delay it; 3 (1 proc
			// for 5 s) ends before 10 and backfills.
			s.Submit(1, Job{ID: 3, Procs: 1, Estimate: 5, Release: 1, Deadline: 300})
			s.Submit(1, Job{ID: 2, Procs: 1, Estimate: 20, Release: 1, Deadline: 200})
			s.Submit(1, Job{ID: 1, Procs: 4, Estimate: 5, Release: 1, Deadline: 100})
			ds := s.Pass(1)
			if len(ds) != 1 || ds[0].JobID != 3 || ds[0].End != 6 {
				t.Fatalf("pass at 1: %+v, want job 3 backfilled over [1, 6)", ds)
			}
			s.End(6, 3)
			if ds := s.Pass(6); len(ds) != 0 {
				t.Fatalf("pass at 6: %+v, want nothing (2 would delay the head)", ds)
			}
			s.End(10, 9)
			if ds := s.Pass(10); len(ds) != 1 || ds[0].JobID != 1 {
				t.Fatalf("pass at 10: %+v, want the head, job 1", ds)
			}
			s.End(15, 1)
			if ds := s.Pass(15); len(ds) != 1 || ds[0].JobID != 2 {
				t.Fatalf("pass at 15: %+v, want job 2", ds)
			}
			checkInvariants(t, s.Plan())
		})
	}
}

// TestDeadlinesAreSoft checks that a job that can no longer meet its
// deadline still starts under EDF and LTTR, and is reserved for its whole
// estimate.
func TestDeadlinesAreSoft(t *testing.T) {
	for _, pol := range []Policy{EDF, LTTR} {
		s, err := NewSite(Config{Procs: 1, Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		if pl := s.Submit(0, Job{ID: 1, Procs: 1, Estimate: 100, Deadline: 10}); pl.Reason != ReasonQueued {
			t.Fatalf("%v: submit %+v", pol, pl)
		}
		ds := s.Pass(0)
		if len(ds) != 1 || ds[0].End != 100 {
			t.Fatalf("%v: %+v, want a start with its full estimate", pol, ds)
		}
	}
}

// TestConfirmJoinsAtItsKey checks that a confirmed hold joins the queue at
// its key's place, not at the end.
func TestConfirmJoinsAtItsKey(t *testing.T) {
	s, err := NewSite(Config{Procs: 2, Policy: EDF})
	if err != nil {
		t.Fatal(err)
	}
	if pl := s.Hold(0, Job{ID: 1, Procs: 2, Estimate: 10, Deadline: 15}, 5); !pl.OK() {
		t.Fatalf("hold: %+v", pl)
	}
	s.Submit(0, Job{ID: 2, Procs: 2, Estimate: 10, Deadline: 100})
	s.Submit(0, Job{ID: 3, Procs: 2, Estimate: 10, Deadline: 200})
	if ds := s.Pass(0); len(ds) != 0 {
		t.Fatalf("pass at 0: %+v", ds)
	}
	if _, err := s.Confirm(1, 1); err != nil {
		t.Fatal(err)
	}
	if ds := s.Pass(1); len(ds) != 1 || ds[0].JobID != 1 {
		t.Fatalf("pass at 1: %+v, want the confirmed job 1 (earliest deadline)", ds)
	}
}

// TestDeadlineQueueStaysSorted submits, cancels and runs random jobs and
// checks after every step that the queue is in (key, submission) order, the
// order a full sort gives.
func TestDeadlineQueueStaysSorted(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, pol := range []Policy{EDF, LTTR} {
		s, err := NewSite(Config{Procs: 8, Policy: pol})
		if err != nil {
			t.Fatal(err)
		}
		running := map[int64]bool{}
		id := int64(0)
		for now := int64(0); now < 400; now++ {
			for k := rng.IntN(4); k > 0; k-- {
				id++
				dl := Forever
				if rng.IntN(5) > 0 {
					dl = now + 1 + rng.Int64N(200)
				}
				j := Job{ID: id, Procs: 1 + rng.IntN(8), Estimate: 1 + rng.Int64N(50), Release: now, Deadline: dl}
				if rng.IntN(2) == 0 {
					j.Forecast = rng.Int64N(j.Estimate + 1)
				}
				s.Submit(now, j)
			}
			if rng.IntN(10) == 0 && s.Waiting() > 0 {
				s.Cancel(now, s.waiting[rng.IntN(len(s.waiting))].job.ID)
			}
			for r := range running {
				if rng.IntN(8) == 0 {
					s.End(now, r)
					delete(running, r)
				}
			}
			want := slices.Clone(s.waiting)
			slices.SortFunc(want, func(a, b *entry) int {
				ka, kb := pol.Key(&a.job), pol.Key(&b.job)
				if ka != kb {
					if ka < kb {
						return -1
					}
					return 1
				}
				return int(a.seq - b.seq)
			})
			if !slices.Equal(s.waiting, want) {
				t.Fatalf("%v at %d: queue out of order", pol, now)
			}
			for _, d := range s.Pass(now) {
				running[d.JobID] = true
			}
			checkInvariants(t, s.Plan())
		}
	}
}

// TestSortQueueRepairsAppends checks that a pass restores key order when
// entries were appended without enqueue (as Restore does).
func TestSortQueueRepairsAppends(t *testing.T) {
	s, err := NewSite(Config{Procs: 1, Policy: EDF})
	if err != nil {
		t.Fatal(err)
	}
	s.Submit(0, Job{ID: 9, Procs: 1, Estimate: 10, Deadline: Forever})
	s.Pass(0)
	for i, dl := range []int64{300, 100, 200} {
		s.seq++
		s.waiting = append(s.waiting, &entry{job: Job{ID: int64(i + 1), Procs: 1, Estimate: 1, Deadline: dl}, seq: s.seq, place: Placement{Reason: ReasonQueued}})
	}
	s.End(10, 9)
	if ds := s.Pass(10); len(ds) != 1 || ds[0].JobID != 2 {
		t.Fatalf("pass at 10: %+v, want job 2 (deadline 100)", ds)
	}
}
