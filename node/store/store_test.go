package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

var (
	_ Store = (*BoltStore)(nil)
	_ Store = (*MemStore)(nil)
	_ Store = (*WALStore)(nil)
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// forEachStore runs f against a fresh store of every implementation.
func forEachStore(t *testing.T, f func(t *testing.T, s Store)) {
	t.Helper()
	makers := []func(t *testing.T) Store{
		func(*testing.T) Store { return NewMemStore() },
		func(t *testing.T) Store {
			s, err := OpenBolt(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		func(t *testing.T) Store {
			s, err := OpenWAL(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		// Every write past the first checkpointed at once: the reads
		// then come from the file, and merges mix the two.
		func(t *testing.T) Store {
			s, err := OpenWAL(t.TempDir(), &Options{CheckpointRecords: 1})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
	}
	for _, mk := range makers {
		s := mk(t)
		t.Run(s.Name(), func(t *testing.T) {
			t.Cleanup(func() { s.Close() })
			f(t, s)
		})
	}
}

func job(id, user string, state fedschedv1.JobState) JobRecord {
	return JobRecord{Job: &fedschedv1.Job{
		Id:         id,
		State:      state,
		Site:       "site-a",
		SubmitTime: timestamppb.New(t0),
		Spec: &fedschedv1.JobSpec{
			Procs: 4, EstimateSeconds: 3600, User: user, App: "lammps",
			Command:  []string{"sh", "-c", "true"},
			Env:      map[string]string{"A": "1", "B": "2"},
			Deadline: timestamppb.New(t0.Add(2 * time.Hour)),
		},
	}}
}

func sameJob(t *testing.T, got, want JobRecord) {
	t.Helper()
	if !proto.Equal(got.Job, want.Job) || got.IdempotencyKey != want.IdempotencyKey || !slices.Equal(got.BodyHash, want.BodyHash) {
		t.Fatalf("job record differs:\n got %v key=%q hash=%x\nwant %v key=%q hash=%x",
			got.Job, got.IdempotencyKey, got.BodyHash, want.Job, want.IdempotencyKey, want.BodyHash)
	}
}

func TestJobs(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		if _, err := s.GetJob(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetJob(missing) = %v, want ErrNotFound", err)
		}
		a := job("a-1", "alice", fedschedv1.JobState_JOB_STATE_PENDING)
		if err := s.PutJob(ctx, a); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetJob(ctx, "a-1")
		if err != nil {
			t.Fatal(err)
		}
		sameJob(t, got, a)

		// The store owns its copies: mutating what was passed or returned
		// changes nothing stored.
		a.Job.State = fedschedv1.JobState_JOB_STATE_FAILED
		got.Job.Spec.User = "mallory"
		again, _ := s.GetJob(ctx, "a-1")
		if again.Job.GetState() != fedschedv1.JobState_JOB_STATE_PENDING || again.Job.GetSpec().GetUser() != "alice" {
			t.Fatalf("stored job changed through an alias: %v", again.Job)
		}

		// Replace.
		upd := job("a-1", "alice", fedschedv1.JobState_JOB_STATE_RUNNING)
		upd.Job.StartTime = timestamppb.New(t0.Add(time.Minute))
		if err := s.PutJob(ctx, upd); err != nil {
			t.Fatal(err)
		}
		got, _ = s.GetJob(ctx, "a-1")
		sameJob(t, got, upd)

		if err := s.DeleteJob(ctx, "a-1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetJob(ctx, "a-1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetJob after delete = %v, want ErrNotFound", err)
		}
		if err := s.DeleteJob(ctx, "a-1"); err != nil {
			t.Fatalf("DeleteJob(missing) = %v, want nil", err)
		}

		for _, bad := range []JobRecord{{}, {Job: &fedschedv1.Job{}}, job("x", "a\x00b", 0)} {
			if err := s.PutJob(ctx, bad); !errors.Is(err, ErrInvalid) {
				t.Errorf("PutJob(%v) = %v, want ErrInvalid", bad.Job, err)
			}
		}
	})
}

func TestPutJobIfNewKey(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		first := job("j-1", "alice", fedschedv1.JobState_JOB_STATE_PENDING)
		stored, created, err := s.PutJobIfNewKey(ctx, "key-1", []byte("h1"), first)
		if err != nil || !created {
			t.Fatalf("first submission: created=%v err=%v", created, err)
		}
		first.IdempotencyKey, first.BodyHash = "key-1", []byte("h1")
		sameJob(t, stored, first)

		// A retry (the node made a new id for it) gets the first job back.
		retry := job("j-2", "alice", fedschedv1.JobState_JOB_STATE_PENDING)
		stored, created, err = s.PutJobIfNewKey(ctx, "key-1", []byte("h1"), retry)
		if err != nil || created {
			t.Fatalf("retry: created=%v err=%v, want replay", created, err)
		}
		sameJob(t, stored, first)
		if _, err := s.GetJob(ctx, "j-2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a replayed submission stored a job: %v", err)
		}

		// Same key, other body.
		if _, _, err := s.PutJobIfNewKey(ctx, "key-1", []byte("h2"), retry); !errors.Is(err, ErrIdempotencyConflict) {
			t.Fatalf("other body under the same key: %v, want ErrIdempotencyConflict", err)
		}
		// New key, existing id.
		if _, _, err := s.PutJobIfNewKey(ctx, "key-2", []byte("h1"), first); !errors.Is(err, ErrJobExists) {
			t.Fatalf("existing id under a new key: %v, want ErrJobExists", err)
		}
		if _, _, err := s.PutJobIfNewKey(ctx, "", []byte("h1"), retry); !errors.Is(err, ErrInvalid) {
			t.Fatalf("empty key: %v, want ErrInvalid", err)
		}

		ir, err := s.GetIdempotencyKey(ctx, "key-1")
		if err != nil {
			t.Fatal(err)
		}
		if ir.JobID != "j-1" || string(ir.BodyHash) != "h1" || !ir.CreatedAt.Equal(t0) || ir.Key != "key-1" {
			t.Fatalf("idempotency record = %+v", ir)
		}
		if _, err := s.GetIdempotencyKey(ctx, "key-9"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("GetIdempotencyKey(missing) = %v", err)
		}

		// Pruning forgets old keys but keeps the jobs.
		late := job("j-3", "bob", fedschedv1.JobState_JOB_STATE_PENDING)
		late.Job.SubmitTime = timestamppb.New(t0.Add(48 * time.Hour))
		if _, _, err := s.PutJobIfNewKey(ctx, "key-3", []byte("h3"), late); err != nil {
			t.Fatal(err)
		}
		n, err := s.PruneIdempotencyKeys(ctx, t0.Add(24*time.Hour))
		if err != nil || n != 1 {
			t.Fatalf("Prune = %d, %v; want 1", n, err)
		}
		if _, err := s.GetIdempotencyKey(ctx, "key-1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("pruned key still there: %v", err)
		}
		if _, err := s.GetIdempotencyKey(ctx, "key-3"); err != nil {
			t.Fatalf("young key pruned: %v", err)
		}
		if _, err := s.GetJob(ctx, "j-1"); err != nil {
			t.Fatalf("pruning removed a job: %v", err)
		}

		// Deleting a job forgets its key.
		if err := s.DeleteJob(ctx, "j-3"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetIdempotencyKey(ctx, "key-3"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("key of a deleted job still there: %v", err)
		}
	})
}

func TestPutJobIfNewKeyConcurrent(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		const n = 16
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			created int
			ids     = map[string]bool{}
		)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rec := job(fmt.Sprintf("c-%02d", i), "alice", fedschedv1.JobState_JOB_STATE_PENDING)
				got, c, err := s.PutJobIfNewKey(ctx, "same", []byte("h"), rec)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if c {
					created++
				}
				ids[got.ID()] = true
			}()
		}
		wg.Wait()
		if created != 1 || len(ids) != 1 {
			t.Fatalf("%d submissions with one key: created %d jobs, answered with ids %v", n, created, ids)
		}
	})
}

func TestListJobs(t *testing.T) {
	P, R, C := fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.JobState_JOB_STATE_RUNNING, fedschedv1.JobState_JOB_STATE_COMPLETED
	states := []fedschedv1.JobState{P, R, C}
	users := []string{"alice", "bob", "carol"}
	var all []JobRecord
	for i := range 40 {
		all = append(all, job(fmt.Sprintf("s.%06d", i), users[(i/2)%3], states[i%3]))
	}
	queries := map[string]JobQuery{
		"everything":           {},
		"one state":            {States: []fedschedv1.JobState{R}},
		"two states":           {States: []fedschedv1.JobState{C, P}},
		"a state twice":        {States: []fedschedv1.JobState{P, P}},
		"one user":             {User: "bob"},
		"user and state":       {User: "carol", States: []fedschedv1.JobState{P, C}},
		"unknown user":         {User: "dave"},
		"state with no jobs":   {States: []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_REJECTED}},
		"unspecified is empty": {States: []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_UNSPECIFIED}},
	}
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		// Insert out of order: listing must still be by id.
		for i := len(all) - 1; i >= 0; i-- {
			if err := s.PutJob(ctx, all[i]); err != nil {
				t.Fatal(err)
			}
		}
		// Move one job to another state: the state index must follow.
		moved := job(all[0].ID(), all[0].Job.Spec.User, C)
		if err := s.PutJob(ctx, moved); err != nil {
			t.Fatal(err)
		}
		current := slices.Clone(all)
		current[0] = moved

		for name, q := range queries {
			var want []string
			for _, r := range current {
				if q.matches(r.Job) {
					want = append(want, r.ID())
				}
			}
			for _, size := range []int{0, 1, 3, 7, 1000} {
				t.Run(fmt.Sprintf("%s/page size %d", name, size), func(t *testing.T) {
					q := q
					q.PageSize = size
					var got []string
					for pages := 0; ; pages++ {
						if pages > 100 {
							t.Fatal("pagination does not end")
						}
						page, next, err := s.ListJobs(ctx, q)
						if err != nil {
							t.Fatal(err)
						}
						if size > 0 && len(page) > size {
							t.Fatalf("page of %d jobs, page size %d", len(page), size)
						}
						if next != "" && len(page) == 0 {
							t.Fatal("empty page with a next token")
						}
						for _, r := range page {
							got = append(got, r.ID())
						}
						if next == "" {
							break
						}
						q.PageToken = next
					}
					if !slices.Equal(got, want) {
						t.Fatalf("got %v\nwant %v", got, want)
					}
				})
			}
		}

		if _, _, err := s.ListJobs(ctx, JobQuery{PageToken: "!!"}); !errors.Is(err, ErrInvalidPageToken) {
			t.Errorf("garbage token: %v", err)
		}
		_, next, err := s.ListJobs(ctx, JobQuery{User: "bob", PageSize: 1})
		if err != nil || next == "" {
			t.Fatalf("first page: %q %v", next, err)
		}
		if _, _, err := s.ListJobs(ctx, JobQuery{User: "alice", PageToken: next}); !errors.Is(err, ErrInvalidPageToken) {
			t.Errorf("token reused with other filters: %v", err)
		}
	})
}

func TestReservations(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		r1 := ReservationRecord{ID: "r-2", JobID: "j-1", Procs: 8, Start: t0, End: t0.Add(time.Hour), Overbooked: true}
		r2 := ReservationRecord{ID: "r-1", Procs: 2, Start: t0, End: t0.Add(time.Minute), Fixed: true, Note: "maintenance"}
		for _, r := range []ReservationRecord{r1, r2} {
			if err := s.PutReservation(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.GetReservation(ctx, "r-2")
		if err != nil || !sameReservation(got, r1) {
			t.Fatalf("GetReservation = %+v, %v", got, err)
		}
		list, err := s.ListReservations(ctx)
		if err != nil || len(list) != 2 || !sameReservation(list[0], r2) || !sameReservation(list[1], r1) {
			t.Fatalf("ListReservations = %+v, %v", list, err)
		}
		if err := s.DeleteReservation(ctx, "r-2"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetReservation(ctx, "r-2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted reservation: %v", err)
		}
		if err := s.PutReservation(ctx, ReservationRecord{}); !errors.Is(err, ErrInvalid) {
			t.Fatalf("reservation without id: %v", err)
		}
	})
}

func sameReservation(a, b ReservationRecord) bool {
	return a.ID == b.ID && a.JobID == b.JobID && a.Procs == b.Procs && a.Start.Equal(b.Start) &&
		a.End.Equal(b.End) && a.Overbooked == b.Overbooked && a.Fixed == b.Fixed && a.Note == b.Note
}

func TestSLAOutcomes(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		open := SLARecord{JobID: "j-1", Outcome: fedschedv1.SlaOutcome_SLA_OUTCOME_OPEN, Fee: 10, Penalty: 20, PoF: 0.1}
		if err := s.PutSLAOutcome(ctx, open); err != nil {
			t.Fatal(err)
		}
		met := open
		met.Outcome, met.DecidedAt = fedschedv1.SlaOutcome_SLA_OUTCOME_MET, t0
		if err := s.PutSLAOutcome(ctx, met); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetSLAOutcome(ctx, "j-1")
		if err != nil || got.Outcome != met.Outcome || !got.DecidedAt.Equal(t0) || got.Fee != 10 || got.Penalty != 20 || got.PoF != 0.1 {
			t.Fatalf("GetSLAOutcome = %+v, %v", got, err)
		}
		list, err := s.ListSLAOutcomes(ctx)
		if err != nil || len(list) != 1 {
			t.Fatalf("ListSLAOutcomes = %+v, %v", list, err)
		}
		if _, err := s.GetSLAOutcome(ctx, "j-2"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing SLA: %v", err)
		}
	})
}

func TestStatsAndMeta(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		if _, err := s.GetStats(ctx, "ratios"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing stats: %v", err)
		}
		for _, blob := range [][]byte{[]byte("v1"), {}, []byte("v3\x00\x01")} {
			if err := s.PutStats(ctx, "ratios", blob); err != nil {
				t.Fatal(err)
			}
			got, err := s.GetStats(ctx, "ratios")
			if err != nil || string(got) != string(blob) {
				t.Fatalf("GetStats = %q, %v; want %q", got, err, blob)
			}
		}

		if v, err := s.SchemaVersion(ctx); err != nil || v != CurrentSchemaVersion {
			t.Fatalf("SchemaVersion = %d, %v", v, err)
		}
		if _, err := s.GetMeta(ctx, "site"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("missing meta: %v", err)
		}
		// A user key that looks like an internal one stays apart from it.
		if err := s.PutMeta(ctx, "schema_version", "99"); err != nil {
			t.Fatal(err)
		}
		if v, _ := s.SchemaVersion(ctx); v != CurrentSchemaVersion {
			t.Fatalf("PutMeta overwrote the schema version: %d", v)
		}
		if err := s.PutMeta(ctx, "site", "site-a"); err != nil {
			t.Fatal(err)
		}
		if v, err := s.GetMeta(ctx, "site"); err != nil || v != "site-a" {
			t.Fatalf("GetMeta = %q, %v", v, err)
		}
		var last uint64
		for range 5 {
			n, err := s.NextSequence(ctx)
			if err != nil || n <= last {
				t.Fatalf("NextSequence = %d after %d, %v", n, last, err)
			}
			last = n
		}
	})
}

func TestApplyIsAllOrNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		a := job("a-1", "alice", fedschedv1.JobState_JOB_STATE_PENDING)
		err := s.Apply(ctx, Changes{
			PutJobs:         []JobRecord{a},
			PutReservations: []ReservationRecord{{ID: ""}}, // invalid
		})
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("Apply with an invalid record = %v", err)
		}
		if _, err := s.GetJob(ctx, "a-1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("a failed Apply wrote a job: %v", err)
		}

		// A job accepted with its reservation and SLA, in one go.
		err = s.Apply(ctx, Changes{
			PutJobs:         []JobRecord{a},
			PutReservations: []ReservationRecord{{ID: "r-1", JobID: "a-1", Procs: 4, Start: t0, End: t0.Add(time.Hour)}},
			PutSLAOutcomes:  []SLARecord{{JobID: "a-1", Outcome: fedschedv1.SlaOutcome_SLA_OUTCOME_OPEN}},
			PutStats:        map[string][]byte{"ratios": []byte("x")},
		})
		if err != nil {
			t.Fatal(err)
		}
		// Ended: the reservation goes, the job and SLA change.
		done := job("a-1", "alice", fedschedv1.JobState_JOB_STATE_COMPLETED)
		err = s.Apply(ctx, Changes{
			PutJobs:            []JobRecord{done},
			DeleteReservations: []string{"r-1"},
			PutSLAOutcomes:     []SLARecord{{JobID: "a-1", Outcome: fedschedv1.SlaOutcome_SLA_OUTCOME_MET, DecidedAt: t0}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if r, _ := s.ListReservations(ctx); len(r) != 0 {
			t.Fatalf("reservations left: %v", r)
		}
		page, _, err := s.ListJobs(ctx, JobQuery{States: []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_PENDING}})
		if err != nil || len(page) != 0 {
			t.Fatalf("pending jobs after completion: %v, %v", page, err)
		}
	})
}

func TestClosedAndCancelled(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := s.GetJob(ctx, "x"); !errors.Is(err, context.Canceled) {
			t.Fatalf("GetJob with a cancelled context = %v", err)
		}
		if err := s.PutJob(ctx, job("x", "u", 1)); !errors.Is(err, context.Canceled) {
			t.Fatalf("PutJob with a cancelled context = %v", err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("second Close = %v", err)
		}
		bg := context.Background()
		if _, err := s.GetJob(bg, "x"); !errors.Is(err, ErrClosed) {
			t.Fatalf("GetJob after Close = %v", err)
		}
		if err := s.PutJob(bg, job("x", "u", 1)); !errors.Is(err, ErrClosed) {
			t.Fatalf("PutJob after Close = %v", err)
		}
		if _, err := s.NextSequence(bg); !errors.Is(err, ErrClosed) {
			t.Fatalf("NextSequence after Close = %v", err)
		}
	})
}

// TestApplyRefusesOversizeKeys: every store refuses, as invalid, a change
// with a key bbolt cannot hold (WALStore must, before it logs it; see
// TestWALRefusesKeysTheFileCannotHold), and still takes the next write.
func TestApplyRefusesOversizeKeys(t *testing.T) {
	forEachStore(t, func(t *testing.T, s Store) {
		ctx := context.Background()
		for name, c := range oversizeKeyChanges() {
			if err := s.Apply(ctx, c); !errors.Is(err, ErrInvalid) {
				t.Errorf("%s: Apply = %v, want ErrInvalid", name, err)
			}
		}
		if err := s.PutJob(ctx, job("ok-1", "alice", fedschedv1.JobState_JOB_STATE_PENDING)); err != nil {
			t.Fatal(err)
		}
	})
}
