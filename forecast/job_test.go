package forecast

import (
	"errors"
	"testing"

	"github.com/fedsched/fedsched/swf"
)

func TestFromSWF(t *testing.T) {
	in := []swf.Job{
		{ID: 1, Submit: 10, Wait: 5, Runtime: 100, AllocProcs: 4, ReqTime: 600, User: 3, Group: 4, Executable: 5, Queue: 6},
		{ID: 2, Submit: 20, Wait: -1, Runtime: 50, AllocProcs: -1, ReqProcs: 8, ReqTime: -1},
		{ID: 3, Submit: 30, Wait: 7, Runtime: -1},
	}
	got := FromSWF(in)
	want := []Job{
		{ID: 1, Submit: 10, End: 115, Runtime: 100, Estimate: 600, User: 3, Group: 4, App: 5, Queue: 6, Procs: 4},
		{ID: 2, Submit: 20, End: 70, Runtime: 50, Estimate: -1, Procs: 8},
		{ID: 3, Submit: 30, End: 37, Runtime: -1, Procs: 0},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("job %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestEpochFromHeader(t *testing.T) {
	h := swf.Header{UnixStartTime: 843480031, Fields: map[string]string{"TimeZone": "3600"}}
	if got := EpochFromHeader(h); got != 843480031+3600 {
		t.Errorf("epoch %d", got)
	}
	if got := EpochFromHeader(swf.Header{UnixStartTime: 5}); got != 5 {
		t.Errorf("epoch without time zone %d", got)
	}
}

func TestAttrValues(t *testing.T) {
	// 1996-09-23 was a Monday; KTH's first job time 0 is 14:00:31 CEST
	// (12:00:31 UTC), epoch 843480031 + 3600 puts it at 13:00:31 "local"
	// (CET, no DST).
	epoch := int64(843480031 + 3600)
	j := &Job{Submit: 0, Procs: 5, Estimate: 3600}
	tests := map[Attr]int64{
		AttrWeekday:  1,  // Monday
		AttrHour:     13, // 13:00:31
		AttrProcs:    3,  // 5..8
		AttrEstimate: 23, // floor(2·log2 3600) = floor(23.63)
	}
	for a, want := range tests {
		if got := a.value(j, epoch); got != want {
			t.Errorf("%v = %d, want %d", a, got, want)
		}
	}
	// The week changes at Monday 00:00 local time, not before.
	mon := floorDiv(epoch, secondsPerDay)*secondsPerDay - epoch // Monday 00:00
	w0 := AttrWeek.value(&Job{Submit: mon}, epoch)
	if AttrWeek.value(&Job{Submit: mon - 1}, epoch) != w0-1 || AttrWeek.value(&Job{Submit: mon + 7*secondsPerDay - 1}, epoch) != w0 {
		t.Error("week boundaries are not on Monday 00:00")
	}
	for procs, band := range map[int64]int64{1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 64: 6, 0: -1} {
		if got := AttrProcs.value(&Job{Procs: procs}, 0); got != band {
			t.Errorf("procs %d band %d, want %d", procs, got, band)
		}
	}
	if AttrEstimate.value(&Job{Estimate: -1}, 0) != -1 {
		t.Error("no estimate must be its own band")
	}
	// Negative times (before the epoch) still give valid hours and days.
	if h := AttrHour.value(&Job{Submit: -1}, 0); h != 23 {
		t.Errorf("hour of -1 s = %d", h)
	}
	if d := AttrWeekday.value(&Job{Submit: -1}, 0); d != 3 { // 1969-12-31 was a Wednesday
		t.Errorf("weekday of -1 s = %d", d)
	}
}

func TestAttrSetStringParse(t *testing.T) {
	tests := map[string]AttrSet{
		"all":                0,
		"user":               NewAttrSet(AttrUser),
		"user+estimate+week": NewAttrSet(AttrUser, AttrEstimate, AttrWeek),
		"group+app+queue":    NewAttrSet(AttrGroup, AttrApp, AttrQueue),
		"procs+weekday+hour": NewAttrSet(AttrProcs, AttrWeekday, AttrHour),
	}
	for text, want := range tests {
		got, err := ParseAttrSet(text)
		if err != nil || got != want || got.String() != text {
			t.Errorf("%q: parsed %v (%v), string %q", text, got, err, got.String())
		}
	}
	if _, err := ParseAttrSet("user+vo"); !errors.Is(err, ErrUnknownAttr) {
		t.Errorf("unknown attribute: %v", err)
	}
	s := NewAttrSet(AttrUser, AttrHour)
	if !s.Has(AttrHour) || s.Without(AttrHour) != NewAttrSet(AttrUser) || s.Len() != 2 || s.With(AttrWeek).Len() != 3 {
		t.Error("set algebra")
	}
}

// FuzzParseAttrSet checks that parsing never panics and that whatever
// parses round-trips through String.
func FuzzParseAttrSet(f *testing.F) {
	for _, seed := range []string{"all", "user", "user+estimate", "USER + week", "", "+", "user++", "vo"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := ParseAttrSet(text)
		if err != nil {
			if !errors.Is(err, ErrUnknownAttr) {
				t.Fatalf("error %v does not wrap ErrUnknownAttr", err)
			}
			return
		}
		back, err := ParseAttrSet(s.String())
		if err != nil || back != s {
			t.Fatalf("%q → %v → %q → %v, %v", text, s, s.String(), back, err)
		}
	})
}
