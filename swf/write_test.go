package swf

import (
	"bytes"
	"strings"
	"testing"
)

// TestWriteReadsBack: what Write writes, Read reads back field for field,
// header included.
func TestWriteReadsBack(t *testing.T) {
	jobs := []Job{
		{ID: 1, Submit: 0, Wait: 5, Runtime: 100, AllocProcs: 4, AvgCPU: -1, UsedMem: -1, ReqProcs: 4, ReqTime: 600, ReqMem: -1, Status: 1,
			User: 3, Group: 1, Executable: 7, Queue: 1, Partition: -1, PrecedingJob: -1, ThinkTime: -1},
		{ID: 2, Submit: -3600, Wait: 0, Runtime: 42, AllocProcs: 1, ReqTime: 60, Status: 5, User: 9, Executable: -1, Queue: -1},
	}
	var b bytes.Buffer
	if err := Write(&b, []string{"MaxProcs: 64", "Note: seeded history"}, jobs); err != nil {
		t.Fatal(err)
	}
	tr, err := Read(&b, "h.swf", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Header.Procs() != 64 {
		t.Errorf("header MaxProcs %d, want 64", tr.Header.Procs())
	}
	if len(tr.Jobs) != len(jobs) {
		t.Fatalf("%d jobs read back, want %d", len(tr.Jobs), len(jobs))
	}
	for i, j := range tr.Jobs {
		j.Line = 0
		if j != jobs[i] {
			t.Errorf("job %d: read %+v, wrote %+v", i, j, jobs[i])
		}
	}
	if err := Write(&b, []string{"two\nlines"}, nil); err == nil || !strings.Contains(err.Error(), "spans lines") {
		t.Errorf("a header line with a newline: %v", err)
	}
}
