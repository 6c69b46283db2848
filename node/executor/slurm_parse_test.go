package executor

import (
	"testing"
	"time"
)

func TestParseSinfoNodesAndUsable(t *testing.T) {
	nodes, err := ParseSinfoNodes("n1|4|idle\nn2|4|mix\nn3|8|drain\nn4|4|down*\nn1|4|idle\nn5|2|alloc\nn6|2|drng\nn7|2|idle~\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 7 {
		t.Fatalf("%d nodes, want 7 (n1 once): %+v", len(nodes), nodes)
	}
	usable := 0
	for _, n := range nodes {
		if n.Usable() {
			usable += n.CPUs
		}
	}
	if usable != 4+4+2 {
		t.Errorf("usable CPUs %d, want 10 (idle, mix, alloc)", usable)
	}
	for _, bad := range []string{"n1|x|idle", "n1|4", "n1|-1|idle"} {
		if _, err := ParseSinfoNodes(bad); err == nil {
			t.Errorf("ParseSinfoNodes(%q) accepted", bad)
		}
	}
}

func TestParseScontrolJob(t *testing.T) {
	line := "JobId=42 JobName=a.000000000001 UserId=root(0) JobState=FAILED Reason=NonZeroExitCode Dependency=(null) Requeue=0 ExitCode=3:0 Comment=fedsched:a.000000000001"
	st, err := parseScontrolJob(line)
	if err != nil || st.SlurmID != "42" || st.Name != "a.000000000001" || st.State != "FAILED" || st.ExitCode != 3 || st.Signal != 0 {
		t.Fatalf("%+v, %v", st, err)
	}
	if _, err := parseScontrolJob("JobId=1 ExitCode=x:0 JobState=FAILED"); err == nil {
		t.Error("bad ExitCode accepted")
	}
	if _, err := parseScontrolJob("slurm_load_jobs error: Invalid job id specified"); err == nil {
		t.Error("an error message parsed as a job")
	}
}

func TestExitOfMapsSlurmStates(t *testing.T) {
	at := time.Unix(100, 0)
	for _, tc := range []struct {
		state     string
		code, sig int
		asked     KillCause
		want      Exit
	}{
		{"COMPLETED", 0, 0, CauseNone, Exit{ExitCode: 0}},
		{"FAILED", 3, 0, CauseNone, Exit{ExitCode: 3}},
		{"FAILED", 0, 9, CauseNone, Exit{ExitCode: 137, Signaled: true, Signal: 9}},
		{"TIMEOUT", 0, 15, CauseNone, Exit{ExitCode: 143, Signaled: true, Signal: 15, Killed: true, Cause: CauseDeadline}},
		{"CANCELLED", 0, 15, CauseRequest, Exit{ExitCode: 143, Signaled: true, Signal: 15, Killed: true, Cause: CauseRequest}},
		{"CANCELLED", 0, 15, CauseDeadline, Exit{ExitCode: 143, Signaled: true, Signal: 15, Killed: true, Cause: CauseDeadline}},
		{"COMPLETED", 0, 0, CauseRequest, Exit{Killed: true, Cause: CauseRequest}},
		{"CANCELLED", 0, 15, CauseNone, Exit{ExitCode: 143, Signaled: true, Signal: 15, ProviderFailed: true}},
		{"NODE_FAIL", 0, 0, CauseNone, Exit{ProviderFailed: true}},
		{"BOOT_FAIL", 0, 0, CauseNone, Exit{ProviderFailed: true}},
	} {
		j := &slurmJob{id: "j", slurmID: "7", killCause: tc.asked}
		got := exitOf(j, slurmJobState{State: tc.state, ExitCode: tc.code, Signal: tc.sig}, at)
		tc.want.JobID, tc.want.At = "j", at
		got.Detail = ""
		if got != tc.want {
			t.Errorf("%s %d:%d asked %q: got %+v, want %+v", tc.state, tc.code, tc.sig, tc.asked, got, tc.want)
		}
	}
}

func FuzzParseSlurmOutput(f *testing.F) {
	f.Add("n1|4|idle\n", "1|a|RUNNING|None\n", "JobId=1 JobState=FAILED ExitCode=1:0")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, sinfo, squeue, scontrol string) {
		if nodes, err := ParseSinfoNodes(sinfo); err == nil {
			for _, n := range nodes {
				if n.CPUs < 0 {
					t.Fatalf("negative CPUs from %q", sinfo)
				}
			}
		}
		if jobs, err := ParseSqueue(squeue); err == nil {
			for id, j := range jobs {
				if id == "" || j.SlurmID != id {
					t.Fatalf("bad job %+v from %q", j, squeue)
				}
			}
		}
		parseScontrolJob(scontrol) //nolint:errcheck // must not panic
	})
}
