package swf_test

import (
	"bytes"
	"strconv"
	"testing"

	"github.com/fedsched/fedsched/swf"
	"github.com/fedsched/fedsched/traces"
)

// readEmbedded parses one embedded trace from its raw gzip bytes, which also
// exercises the reader's gzip sniffing.
func readEmbedded(tb testing.TB, name string) *swf.Trace {
	tb.Helper()
	b, err := traces.Bytes(name)
	if err != nil {
		tb.Fatal(err)
	}
	tr, err := swf.Read(bytes.NewReader(b), name, swf.Options{})
	if err != nil {
		tb.Fatalf("Read %s: %v", name, err)
	}
	return tr
}

// TestRealTraces checks the job counts and machine sizes of the embedded
// traces against their headers and traces/README.md.
func TestRealTraces(t *testing.T) {
	tests := []struct {
		name      string
		jobs      int
		procs     int64
		firstID   int64
		lastID    int64
		estimates bool // every job has ReqTime > 0 or -1, and some have > 0
	}{
		// KTH: the header's MaxRecords is 28476 (MaxJobs 28490 minus the
		// 14 jobs the cleaning filter removed), ids 15..28490.
		{traces.KTH, 28476, 100, 15, 28490, true},
		// HPC2N: a sample; 3,170 job lines (the file ends in a blank line).
		{traces.HPC2N, 3170, 240, 1, 7183, true},
		// NASA: MaxRecords 18239.
		{traces.NASA, 18239, 128, 1, 42264, false},
		// Lublin: MaxRecords 10000, only MaxNodes in the header.
		{traces.Lublin, 10000, 256, 1, 10000, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := readEmbedded(t, tt.name)
			if len(tr.Jobs) != tt.jobs {
				t.Errorf("%d jobs, want %d", len(tr.Jobs), tt.jobs)
			}
			if mr := tr.Header.Fields["MaxRecords"]; tt.name != traces.HPC2N && mr != strconv.Itoa(tt.jobs) {
				t.Errorf("header MaxRecords %q, parsed %d jobs", mr, len(tr.Jobs))
			}
			if got := tr.Header.Procs(); got != tt.procs {
				t.Errorf("Procs() = %d, want %d", got, tt.procs)
			}
			if tr.Skipped != 0 {
				t.Errorf("Skipped = %d", tr.Skipped)
			}
			if len(tr.Jobs) > 0 {
				if first, last := tr.Jobs[0].ID, tr.Jobs[len(tr.Jobs)-1].ID; first != tt.firstID || last != tt.lastID {
					t.Errorf("ids %d..%d, want %d..%d", first, last, tt.firstID, tt.lastID)
				}
			}
			withEst := 0
			for _, j := range tr.Jobs {
				if j.ReqTime > 0 {
					withEst++
				}
			}
			if tt.estimates != (withEst > 0) {
				t.Errorf("%d jobs with estimates, want estimates=%v", withEst, tt.estimates)
			}
		})
	}
}

func TestKTHHeader(t *testing.T) {
	h := readEmbedded(t, traces.KTH).Header
	if h.MaxProcs != 100 || h.MaxNodes != 100 {
		t.Errorf("MaxProcs %d, MaxNodes %d", h.MaxProcs, h.MaxNodes)
	}
	if h.UnixStartTime != 843480031 || h.TimeZoneString != "Europe/Stockholm" {
		t.Errorf("UnixStartTime %d, TimeZoneString %q", h.UnixStartTime, h.TimeZoneString)
	}
	if h.Fields["Acknowledge"] != "Lars Malinowsky" {
		t.Errorf("Acknowledge = %q", h.Fields["Acknowledge"])
	}
}

func TestHPC2NDecimalsAndPartitions(t *testing.T) {
	tr := readEmbedded(t, traces.HPC2N)
	if want := []string{"1 DEFAULT", "2 ALL"}; len(tr.Header.Partitions) != 2 ||
		tr.Header.Partitions[0] != want[0] || tr.Header.Partitions[1] != want[1] {
		t.Errorf("Partitions = %q", tr.Header.Partitions)
	}
	// Last job line: " 7183  4950011  15715    129   50 129.02 18432 ..."
	last := tr.Jobs[len(tr.Jobs)-1]
	if last.ID != 7183 || last.AvgCPU != 129 || last.UsedMem != 18432 {
		t.Errorf("last job = %+v", last)
	}
}

// TestSanitizeKTH pins the per-rule counts on KTH. The federation digest
// (§4.2, caveat on rule 4) states that rule 4 affects 475 jobs of this file,
// 411 of which overran their estimate by under a minute.
func TestSanitizeKTH(t *testing.T) {
	tr := readEmbedded(t, traces.KTH)
	before := append([]swf.Job(nil), tr.Jobs...)

	clip, rc := tr.Sanitize(swf.DefaultSanitizeOptions())
	wantClip := swf.SanitizeReport{In: 28476, Out: 28467, SiteProcs: 100,
		Rule2Fixed: 219, Rule2Dropped: 1, Rule3NoRuntime: 8, Rule4Clipped: 475}
	if rc != wantClip {
		t.Errorf("clip report = %+v\nwant          %+v", rc, wantClip)
	}
	if len(clip) != rc.Out {
		t.Errorf("clip: %d jobs, report says %d", len(clip), rc.Out)
	}

	opts := swf.DefaultSanitizeOptions()
	opts.Rule4 = swf.Rule4Drop
	drop, rd := tr.Sanitize(opts)
	wantDrop := wantClip
	wantDrop.Rule4Clipped, wantDrop.Rule4Dropped, wantDrop.Out = 0, 475, 28467-475
	if rd != wantDrop {
		t.Errorf("drop report = %+v\nwant          %+v", rd, wantDrop)
	}
	if len(drop) != rd.Out {
		t.Errorf("drop: %d jobs, report says %d", len(drop), rd.Out)
	}

	// Of the 475, 411 overran by under a minute.
	under := 0
	for _, j := range tr.Jobs {
		if j.ReqTime > 0 && j.Runtime > j.ReqTime && j.Runtime-j.ReqTime < 60 {
			under++
		}
	}
	if under != 411 {
		t.Errorf("%d jobs overran by under a minute, want 411", under)
	}

	for i, j := range clip {
		if j.Procs() < 1 || j.Procs() > 100 || j.Runtime <= 0 || j.ReqTime <= 0 || j.Runtime > j.ReqTime {
			t.Fatalf("sanitised job %d invalid: %+v", i, j)
		}
		if i > 0 && j.Submit < clip[i-1].Submit {
			t.Fatalf("sanitised jobs not sorted at %d", i)
		}
	}
	for i := range before {
		if before[i] != tr.Jobs[i] {
			t.Fatalf("Sanitize modified the trace at job %d", i)
		}
	}
}

// TestSanitizeNoEstimateTraces shows why rule 5 must be switchable: on NASA
// and Lublin it would drop every job.
func TestSanitizeNoEstimateTraces(t *testing.T) {
	for _, name := range []string{traces.NASA, traces.Lublin} {
		tr := readEmbedded(t, name)
		_, rep := tr.Sanitize(swf.DefaultSanitizeOptions())
		if rep.Out != 0 {
			t.Errorf("%s with rule 5: %d jobs left, want 0", name, rep.Out)
		}
		opts := swf.DefaultSanitizeOptions()
		opts.RequireEstimate = false
		_, rep = tr.Sanitize(opts)
		if rep.Out == 0 || rep.Rule5NoEstimate != 0 || rep.Rule4Clipped != 0 {
			t.Errorf("%s without rule 5: %+v", name, rep)
		}
		t.Logf("%s: %v", name, rep)
	}
}

// BenchmarkReadKTH measures decompressing and parsing the whole embedded KTH
// trace (28,476 jobs, about 390 KB of gzip).
func BenchmarkReadKTH(b *testing.B) {
	raw, err := traces.Bytes(traces.KTH)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	for b.Loop() {
		tr, err := swf.Read(bytes.NewReader(raw), traces.KTH, swf.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if len(tr.Jobs) != 28476 {
			b.Fatalf("%d jobs", len(tr.Jobs))
		}
	}
}

// BenchmarkSanitizeKTH measures the sanitiser on the parsed KTH trace.
func BenchmarkSanitizeKTH(b *testing.B) {
	tr := readEmbedded(b, traces.KTH)
	opts := swf.DefaultSanitizeOptions()
	b.ReportAllocs()
	for b.Loop() {
		tr.Sanitize(opts)
	}
}
