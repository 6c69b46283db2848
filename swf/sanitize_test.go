package swf

import (
	"errors"
	"reflect"
	"testing"
)

// sj builds a job with the fields the sanitisation rules look at.
func sj(id, submit, runtime, alloc, req, reqTime, status int64) Job {
	return Job{ID: id, Submit: submit, Runtime: runtime, AllocProcs: alloc,
		ReqProcs: req, ReqTime: reqTime, Status: status, Wait: 0, Line: int(id)}
}

func TestSanitizeRules(t *testing.T) {
	noR5 := SanitizeOptions{Rule4: Rule4Clip}
	tests := []struct {
		name string
		in   Job
		site int64
		opts SanitizeOptions
		want *Job // nil: dropped
		rep  SanitizeReport
	}{
		{"valid job untouched", sj(1, 0, 100, 4, 4, 200, 1), 10, DefaultSanitizeOptions(),
			ptr(sj(1, 0, 100, 4, 4, 200, 1)), SanitizeReport{}},

		// Rule 1.
		{"r1 too wide", sj(1, 0, 100, 11, 11, 200, 1), 10, DefaultSanitizeOptions(),
			nil, SanitizeReport{Rule1TooWide: 1}},
		{"r1 exactly site size", sj(1, 0, 100, 10, 10, 200, 1), 10, DefaultSanitizeOptions(),
			ptr(sj(1, 0, 100, 10, 10, 200, 1)), SanitizeReport{}},
		{"r1 judged on requested when allotted unknown and job failed", sj(1, 0, 100, -1, 11, 200, 0), 10, DefaultSanitizeOptions(),
			nil, SanitizeReport{Rule1TooWide: 1}},
		{"r1 skipped without site size", sj(1, 0, 100, 1000, 1000, 200, 1), 0, DefaultSanitizeOptions(),
			ptr(sj(1, 0, 100, 1000, 1000, 200, 1)), SanitizeReport{}},
		{"r1 site size from options", sj(1, 0, 100, 11, 11, 200, 1), 0, SanitizeOptions{SiteProcs: 10, RequireEstimate: true},
			nil, SanitizeReport{Rule1TooWide: 1}},
		{"r1 argument overrides options", sj(1, 0, 100, 11, 11, 200, 1), 20, SanitizeOptions{SiteProcs: 10, RequireEstimate: true},
			ptr(sj(1, 0, 100, 11, 11, 200, 1)), SanitizeReport{}},

		// Rule 2.
		{"r2 none allotted, completed: allotted = requested", sj(1, 0, 100, -1, 4, 200, 1), 10, DefaultSanitizeOptions(),
			ptr(sj(1, 0, 100, 4, 4, 200, 1)), SanitizeReport{Rule2Fixed: 1}},
		{"r2 zero allotted, completed", sj(1, 0, 100, 0, 4, 200, 1), 10, DefaultSanitizeOptions(),
			ptr(sj(1, 0, 100, 4, 4, 200, 1)), SanitizeReport{Rule2Fixed: 1}},
		{"r2 none allotted, failed: unchanged", sj(1, 0, 100, -1, 4, 200, 0), 10, DefaultSanitizeOptions(),
			ptr(sj(1, 0, 100, -1, 4, 200, 0)), SanitizeReport{}},
		{"r2 requested > allotted: requested = allotted", sj(1, 0, 100, 4, 6, 200, 1), 10, DefaultSanitizeOptions(),
			ptr(sj(1, 0, 100, 4, 4, 200, 1)), SanitizeReport{Rule2Fixed: 1}},
		{"r2 requested < allotted: requested = allotted", sj(1, 0, 100, 8, 7, 200, 0), 10, DefaultSanitizeOptions(),
			ptr(sj(1, 0, 100, 8, 8, 200, 0)), SanitizeReport{Rule2Fixed: 1}},
		{"r2 requested unknown: kept as is", sj(1, 0, 100, 8, -1, 200, 1), 10, DefaultSanitizeOptions(),
			ptr(sj(1, 0, 100, 8, -1, 200, 1)), SanitizeReport{}},
		{"r2 both invalid", sj(1, 0, 100, -1, -1, 200, 1), 10, DefaultSanitizeOptions(),
			nil, SanitizeReport{Rule2Dropped: 1}},
		{"r2 both zero", sj(1, 0, 100, 0, 0, 200, 1), 10, DefaultSanitizeOptions(),
			nil, SanitizeReport{Rule2Dropped: 1}},
		{"r2 repair then r1 drop", sj(1, 0, 100, -1, 12, 200, 1), 10, DefaultSanitizeOptions(),
			nil, SanitizeReport{Rule2Fixed: 1, Rule1TooWide: 1}},
		{"r2 repair to allotted saves job from r1", sj(1, 0, 100, 8, 12, 200, 1), 10, DefaultSanitizeOptions(),
			ptr(sj(1, 0, 100, 8, 8, 200, 1)), SanitizeReport{Rule2Fixed: 1}},

		// Rule 3.
		{"r3 zero runtime", sj(1, 0, 0, 4, 4, 200, 1), 10, DefaultSanitizeOptions(),
			nil, SanitizeReport{Rule3NoRuntime: 1}},
		{"r3 unknown runtime", sj(1, 0, -1, 4, 4, 200, 1), 10, DefaultSanitizeOptions(),
			nil, SanitizeReport{Rule3NoRuntime: 1}},
		{"r3 one second", sj(1, 0, 1, 4, 4, 200, 1), 10, DefaultSanitizeOptions(),
			ptr(sj(1, 0, 1, 4, 4, 200, 1)), SanitizeReport{}},

		// Rule 4.
		{"r4 overran, clip", sj(1, 0, 230, 4, 4, 200, 1), 10, DefaultSanitizeOptions(),
			ptr(sj(1, 0, 200, 4, 4, 200, 1)), SanitizeReport{Rule4Clipped: 1}},
		{"r4 overran, drop", sj(1, 0, 230, 4, 4, 200, 1), 10, SanitizeOptions{Rule4: Rule4Drop, RequireEstimate: true},
			nil, SanitizeReport{Rule4Dropped: 1}},
		{"r4 exactly the estimate", sj(1, 0, 200, 4, 4, 200, 1), 10, SanitizeOptions{Rule4: Rule4Drop, RequireEstimate: true},
			ptr(sj(1, 0, 200, 4, 4, 200, 1)), SanitizeReport{}},
		{"r4 not applied without estimate", sj(1, 0, 230, 4, 4, -1, 1), 10, SanitizeOptions{Rule4: Rule4Drop},
			ptr(sj(1, 0, 230, 4, 4, -1, 1)), SanitizeReport{}},

		// Rule 5.
		{"r5 no estimate", sj(1, 0, 100, 4, 4, -1, 1), 10, DefaultSanitizeOptions(),
			nil, SanitizeReport{Rule5NoEstimate: 1}},
		{"r5 zero estimate", sj(1, 0, 100, 4, 4, 0, 1), 10, DefaultSanitizeOptions(),
			nil, SanitizeReport{Rule5NoEstimate: 1}},
		{"r5 off", sj(1, 0, 100, 4, 4, -1, 1), 10, noR5,
			ptr(sj(1, 0, 100, 4, 4, -1, 1)), SanitizeReport{}},

		// Precedence: a job is counted under the first rule that drops it.
		{"r2 before r3", sj(1, 0, -1, -1, -1, -1, 1), 10, DefaultSanitizeOptions(),
			nil, SanitizeReport{Rule2Dropped: 1}},
		{"r1 before r3", sj(1, 0, -1, 20, 20, -1, 1), 10, DefaultSanitizeOptions(),
			nil, SanitizeReport{Rule1TooWide: 1}},
		{"r3 before r5", sj(1, 0, 0, 4, 4, -1, 1), 10, DefaultSanitizeOptions(),
			nil, SanitizeReport{Rule3NoRuntime: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := []Job{tt.in}
			orig := tt.in
			out, rep := Sanitize(in, tt.site, tt.opts)
			if in[0] != orig {
				t.Errorf("input modified: %+v", in[0])
			}
			var want []Job
			if tt.want != nil {
				want = []Job{*tt.want}
			}
			if len(out) != len(want) || (len(out) == 1 && out[0] != want[0]) {
				t.Errorf("out = %+v, want %+v", out, want)
			}
			wantRep := tt.rep
			wantRep.In, wantRep.Out = 1, len(want)
			wantRep.SiteProcs = tt.site
			if wantRep.SiteProcs == 0 {
				wantRep.SiteProcs = tt.opts.SiteProcs
			}
			if rep != wantRep {
				t.Errorf("report = %+v\nwant     %+v", rep, wantRep)
			}
			if rep.In != rep.Out+rep.Dropped() {
				t.Errorf("In %d != Out %d + Dropped %d", rep.In, rep.Out, rep.Dropped())
			}
		})
	}
}

func ptr(j Job) *Job { return &j }

func TestSanitizeSortsBySubmit(t *testing.T) {
	in := []Job{
		sj(1, 50, 10, 1, 1, 20, 1),
		sj(2, 10, 10, 1, 1, 20, 1),
		sj(3, 50, 10, 1, 1, 20, 1),
		sj(4, 10, 10, 1, 1, 20, 1),
		sj(5, 0, 10, 1, 1, 20, 1),
	}
	orig := append([]Job(nil), in...)
	out, rep := Sanitize(in, 1, DefaultSanitizeOptions())
	var ids []int64
	for _, j := range out {
		ids = append(ids, j.ID)
	}
	if want := []int64{5, 2, 4, 1, 3}; !reflect.DeepEqual(ids, want) {
		t.Errorf("order = %v, want %v (stable by submit)", ids, want)
	}
	if !rep.Reordered {
		t.Error("Reordered = false")
	}
	if !reflect.DeepEqual(in, orig) {
		t.Error("input slice reordered")
	}
	if _, rep := Sanitize(out, 1, DefaultSanitizeOptions()); rep.Reordered {
		t.Error("sorted input reported as reordered")
	}
}

func TestSanitizeEmpty(t *testing.T) {
	out, rep := Sanitize(nil, 10, DefaultSanitizeOptions())
	if len(out) != 0 || rep != (SanitizeReport{SiteProcs: 10}) {
		t.Errorf("out %v, rep %+v", out, rep)
	}
}

func TestTraceSanitizeUsesHeader(t *testing.T) {
	tr := &Trace{Header: Header{MaxNodes: 10}, Jobs: []Job{sj(1, 0, 10, 11, 11, 20, 1), sj(2, 0, 10, 10, 10, 20, 1)}}
	out, rep := tr.Sanitize(DefaultSanitizeOptions())
	if len(out) != 1 || rep.Rule1TooWide != 1 || rep.SiteProcs != 10 {
		t.Errorf("header size: out %v, rep %+v", out, rep)
	}
	opts := DefaultSanitizeOptions()
	opts.SiteProcs = 11
	if out, rep := tr.Sanitize(opts); len(out) != 2 || rep.SiteProcs != 11 {
		t.Errorf("explicit size: out %v, rep %+v", out, rep)
	}
}

func TestParseRule4(t *testing.T) {
	tests := []struct {
		in   string
		want Rule4Mode
		ok   bool
	}{
		{"clip", Rule4Clip, true}, {"drop", Rule4Drop, true}, {"DROP", Rule4Drop, true},
		{" clip ", Rule4Clip, true}, {"", 0, false}, {"cut", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseRule4(tt.in)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("ParseRule4(%q) = %v, %v", tt.in, got, err)
		}
		if !tt.ok && !errors.Is(err, ErrInvalidOption) {
			t.Errorf("ParseRule4(%q): error %v does not wrap ErrInvalidOption", tt.in, err)
		}
		if tt.ok {
			if back, _ := ParseRule4(got.String()); back != got {
				t.Errorf("String round trip of %v failed", got)
			}
		}
	}
}

func TestDefaultSanitizeOptions(t *testing.T) {
	o := DefaultSanitizeOptions()
	if o.Rule4 != Rule4Clip || !o.RequireEstimate || o.SiteProcs != 0 {
		t.Errorf("DefaultSanitizeOptions() = %+v", o)
	}
}
