package e2e

import (
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// TestCheckOutcome: the summary's outcome check accepts records that
// agree with their outcome and names those that do not (the identity it
// replaces, Accepted == Met+Violated+Cancelled+Open, held by construction).
func TestCheckOutcome(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) *timestamppb.Timestamp { return timestamppb.New(t0.Add(time.Duration(s) * time.Second)) }
	// job: estimate 100 s, deadline t0+300, reservation [resStart, resEnd).
	job := func(outcome fedschedv1.SlaOutcome, state fedschedv1.JobState, resStart, resEnd int, start, end *timestamppb.Timestamp) *fedschedv1.Job {
		return &fedschedv1.Job{Id: "j", State: state, SlaOutcome: outcome,
			Spec:        &fedschedv1.JobSpec{EstimateSeconds: 100, Deadline: at(300)},
			Reservation: &fedschedv1.Reservation{Start: at(resStart), End: at(resEnd)}, StartTime: start, EndTime: end}
	}
	const (
		met       = fedschedv1.SlaOutcome_SLA_OUTCOME_MET
		violated  = fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED
		cancelled = fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED
		open      = fedschedv1.SlaOutcome_SLA_OUTCOME_OPEN
		completed = fedschedv1.JobState_JOB_STATE_COMPLETED
		killed    = fedschedv1.JobState_JOB_STATE_KILLED
		running   = fedschedv1.JobState_JOB_STATE_RUNNING
	)
	lost := job(violated, fedschedv1.JobState_JOB_STATE_FAILED, 10, 110, at(10), at(20))
	lost.Reason = fedschedv1.Reason_REASON_FAILED_LOST_ON_RESTART
	for name, tc := range map[string]struct {
		j  *fedschedv1.Job
		ok bool
	}{
		"met, ran in its slot":             {job(met, completed, 10, 110, at(10), at(90)), true},
		"met, late start, slot moved":      {job(met, completed, 10, 110, at(15), at(115)), true},
		"met, killed after full estimate":  {job(met, killed, 10, 110, at(10), at(110)), true},
		"violated, killed when overbooked": {job(violated, killed, 10, 60, at(10), at(60)), true},
		"violated, lost":                   {lost, true},
		"violated, never started":          {job(violated, fedschedv1.JobState_JOB_STATE_FAILED, 10, 110, nil, at(20)), true},
		"open while running":               {job(open, running, 10, 110, at(10), nil), true},
		"met, never started":               {job(met, completed, 10, 110, nil, nil), false},
		"met, killed before its estimate":  {job(met, killed, 10, 60, at(10), at(60)), false},
		"met, ran past its slot":           {job(met, completed, 10, 110, at(10), at(150)), false},
		"met, started before its slot":     {job(met, completed, 10, 110, at(2), at(50)), false},
		"violated, ran fine and in time":   {job(violated, completed, 10, 110, at(10), at(90)), false},
		"reservation past the deadline":    {job(met, completed, 250, 350, at(250), at(340)), false},
		"cancelled SLA of a completed job": {job(cancelled, completed, 10, 110, at(10), at(90)), false},
		"open after the end":               {job(open, completed, 10, 110, at(10), at(90)), false},
	} {
		if err := CheckOutcome(tc.j, time.Second); (err == nil) != tc.ok {
			t.Errorf("%s: CheckOutcome = %v, want ok %v", name, err, tc.ok)
		}
	}
}
