package node

import (
	"testing"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

func TestExpandOutputPattern(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"out-%j.txt", "out-a.000000000001.txt"},
		{"%u/%j.%%j", "alice/a.000000000001.%j"},
		{"100%", "100%"},
		{"%x%", "%x%"},
		{"", ""},
	} {
		if got := ExpandOutputPattern(tc.in, "a.000000000001", "alice"); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestOutputPaths(t *testing.T) {
	for _, tc := range []struct {
		name             string
		spec             *fedschedv1.JobSpec
		wantOut, wantErr string
	}{
		{"defaults", &fedschedv1.JobSpec{}, "", ""},
		{"relative to workdir, error follows output", &fedschedv1.JobSpec{Workdir: "/w", Output: "o-%j"}, "/w/o-J", "/w/o-J"},
		{"relative to the job dir", &fedschedv1.JobSpec{Output: "o", Error: "e"}, "/jd/o", "/jd/e"},
		{"error only", &fedschedv1.JobSpec{Error: "/abs/e-%u"}, "", "/abs/e-u"},
	} {
		tc.spec.User = "u"
		out, errp := outputPaths(tc.spec, "J", "/jd")
		if out != tc.wantOut || errp != tc.wantErr {
			t.Errorf("%s: got %q %q, want %q %q", tc.name, out, errp, tc.wantOut, tc.wantErr)
		}
	}
}
