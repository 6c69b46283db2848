package swf

import (
	"fmt"
	"testing"
)

// refParseJob is the plain reference of parseJob: split the line into
// fields, then parse each with parseNumber.
func refParseJob(line []byte) (Job, error) {
	var f [][]byte
	for i := 0; i < len(line); {
		for i < len(line) && isSpace(line[i]) {
			i++
		}
		if i == len(line) {
			break
		}
		start := i
		for i < len(line) && !isSpace(line[i]) {
			i++
		}
		f = append(f, line[start:i])
	}
	if len(f) != NumFields {
		return Job{}, fmt.Errorf("expected %d fields, got %d", NumFields, len(f))
	}
	var v [NumFields]int64
	for i := range f {
		x, err := parseNumber(f[i])
		if err != nil {
			return Job{}, fmt.Errorf("field %d (%s): %w", i+1, fieldNames[i], err)
		}
		v[i] = x
	}
	return Job{
		ID: v[0], Submit: v[1], Wait: v[2], Runtime: v[3], AllocProcs: v[4],
		AvgCPU: v[5], UsedMem: v[6], ReqProcs: v[7], ReqTime: v[8], ReqMem: v[9],
		Status: v[10], User: v[11], Group: v[12], Executable: v[13],
		Queue: v[14], Partition: v[15], PrecedingJob: v[16], ThinkTime: v[17],
	}, nil
}

// FuzzParseJob checks the one-pass job parser against the reference: same
// job, same error text.
func FuzzParseJob(f *testing.F) {
	for _, s := range []string{
		"1 0 10 100 4 -1 -1 4 200 -1 1 3 1 -1 1 -1 -1 -1",
		"  2\t5 +3 1.5e2 8 -1 -1 8 3600 -1 0 1 1 1 1 1 -1 -1 ",
		"3 0 0 999999999999999999 1 1 1 1 1 1 1 1 1 1 1 1 1 1",
		"3 0 0 9999999999999999999 1 1 1 1 1 1 1 1 1 1 1 1 1 1",
		"4 0 0 - 1 1 1 1 1 1 1 1 1 1 1 1 1 1",
		"5 0 0 12x 1 1 1 1 1 1 1 1 1 1 1 1 1",
		"6 0 0 1 1 1 1",
		"7 0 0 --1 1 1 1 1 1 1 1 1 1 1 1 1 1 1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, gerr := parseJob([]byte(s))
		want, werr := refParseJob([]byte(s))
		if (gerr == nil) != (werr == nil) || gerr != nil && gerr.Error() != werr.Error() || got != want {
			t.Fatalf("parseJob(%q) = %+v, %v; reference %+v, %v", s, got, gerr, want, werr)
		}
	})
}
