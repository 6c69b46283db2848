package swf

import "testing"

func TestKeepSpan(t *testing.T) {
	jobs := []Job{{ID: 1, Submit: 100}, {ID: 2, Submit: 150}, {ID: 3, Submit: 199}, {ID: 4, Submit: 200}, {ID: 5, Submit: 500}}
	for _, tc := range []struct {
		span int64
		want int
	}{
		{0, 5}, {-1, 5}, {1, 1}, {50, 1}, {51, 2}, {99, 2}, {100, 3}, {101, 4}, {400, 4}, {401, 5}, {1 << 40, 5},
	} {
		if got := len(KeepSpan(jobs, tc.span)); got != tc.want {
			t.Errorf("KeepSpan(span=%d) kept %d jobs, want %d", tc.span, got, tc.want)
		}
	}
	if got := KeepSpan(nil, 10); len(got) != 0 {
		t.Errorf("KeepSpan(nil) = %v", got)
	}
}
