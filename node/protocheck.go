package node

import (
	"fmt"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// terminalState reports whether s is a known terminal job state.
func terminalState(s fedschedv1.JobState) bool {
	switch s {
	case fedschedv1.JobState_JOB_STATE_COMPLETED, fedschedv1.JobState_JOB_STATE_KILLED, fedschedv1.JobState_JOB_STATE_FAILED,
		fedschedv1.JobState_JOB_STATE_CANCELLED, fedschedv1.JobState_JOB_STATE_REJECTED:
		return true
	}
	return false
}

// validateReport checks a peer's ReportOutcome: it reports how a job ended,
// so the job must be in a terminal state and its SLA outcome, if any, a
// decided one. Anything else would move the origin's job back to a live
// state under a finished agreement.
func validateReport(req *fedschedv1.ReportOutcomeRequest) error {
	if err := noUnknownFields(req); err != nil {
		return err
	}
	j := req.GetJob()
	switch {
	case req.GetAgreementId() == "":
		return fmt.Errorf("agreement_id is required: %w", ErrInvalidRequest)
	case j == nil:
		return fmt.Errorf("job is required: %w", ErrInvalidRequest)
	case !terminalState(j.GetState()):
		return fmt.Errorf("job state %v is not terminal: an outcome is reported once the job has ended: %w", j.GetState(), ErrInvalidRequest)
	case len(j.GetMessage()) > maxMessageLen:
		return fmt.Errorf("job message: at most %d bytes: %w", maxMessageLen, ErrInvalidRequest)
	}
	if _, ok := fedschedv1.Reason_name[int32(j.GetReason())]; !ok {
		return fmt.Errorf("job reason %d is not a known reason: %w", j.GetReason(), ErrInvalidRequest)
	}
	switch j.GetSlaOutcome() {
	case fedschedv1.SlaOutcome_SLA_OUTCOME_UNSPECIFIED, fedschedv1.SlaOutcome_SLA_OUTCOME_MET, fedschedv1.SlaOutcome_SLA_OUTCOME_VIOLATED,
		fedschedv1.SlaOutcome_SLA_OUTCOME_CANCELLED:
	default:
		return fmt.Errorf("job sla_outcome %v is not a decided outcome: %w", j.GetSlaOutcome(), ErrInvalidRequest)
	}
	return nil
}

// validateStates checks a ListJobs state filter: every value must be a
// state this site knows (UNSPECIFIED is allowed and matches nothing).
func validateStates(states []fedschedv1.JobState) error {
	for _, s := range states {
		if _, ok := fedschedv1.JobState_name[int32(s)]; !ok {
			return fmt.Errorf("states: %d is not a job state (want PENDING, RUNNING, DELEGATED, COMPLETED, KILLED, FAILED, CANCELLED or REJECTED): %w", s, ErrInvalidRequest)
		}
	}
	return nil
}
