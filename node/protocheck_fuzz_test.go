package node

import (
	"errors"
	"testing"
	"unicode"

	"google.golang.org/protobuf/proto"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// FuzzValidateReport decodes arbitrary bytes as a peer's ReportOutcome and
// checks the validator never panics and accepts only reports of ended jobs
// with a decided SLA outcome.
func FuzzValidateReport(f *testing.F) {
	for _, st := range []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_COMPLETED, fedschedv1.JobState_JOB_STATE_PENDING, 99} {
		b, _ := proto.Marshal(&fedschedv1.ReportOutcomeRequest{AgreementId: "s1.000000000001", OriginJobId: "s0.000000000001",
			Job: &fedschedv1.Job{Id: "s1.000000000001", State: st, SlaOutcome: fedschedv1.SlaOutcome_SLA_OUTCOME_MET}})
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var req fedschedv1.ReportOutcomeRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		err := validateReport(&req)
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error %v does not wrap ErrInvalidRequest", err)
			}
			return
		}
		j := req.GetJob()
		if !terminalState(j.GetState()) || j.GetSlaOutcome() == fedschedv1.SlaOutcome_SLA_OUTCOME_OPEN || req.GetAgreementId() == "" {
			t.Fatalf("accepted %v", &req)
		}
	})
}

// FuzzValidateStates decodes arbitrary bytes as a ListJobs request: its
// state filter is accepted only if every state is one the API defines.
func FuzzValidateStates(f *testing.F) {
	b, _ := proto.Marshal(&fedschedv1.ListJobsRequest{States: []fedschedv1.JobState{1, 99}})
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var req fedschedv1.ListJobsRequest
		if proto.Unmarshal(b, &req) != nil {
			return
		}
		if validateStates(req.GetStates()) == nil {
			for _, s := range req.GetStates() {
				if s < 0 || s > fedschedv1.JobState_JOB_STATE_REJECTED {
					t.Fatalf("accepted state %d", s)
				}
			}
		}
	})
}

// FuzzPrintable: a name printable accepts has no control, format or
// separator character and is valid UTF-8.
func FuzzPrintable(f *testing.F) {
	for _, s := range []string{"alice", "ali\u202Ece", "a\u200Bb", "José", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !printable(s) {
			return
		}
		for _, r := range s {
			if r == unicode.ReplacementChar || unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp) {
				t.Fatalf("printable(%q) accepted %U", s, r)
			}
		}
	})
}
