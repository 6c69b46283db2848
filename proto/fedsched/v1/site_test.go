package fedschedv1

import (
	"bufio"
	"os"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestEnumsStartWithUnspecified(t *testing.T) {
	enums := File_fedsched_v1_site_proto.Enums()
	if enums.Len() == 0 {
		t.Fatal("no enums")
	}
	for i := range enums.Len() {
		e := enums.Get(i)
		zero := e.Values().ByNumber(0)
		if zero == nil || !strings.HasSuffix(string(zero.Name()), "_UNSPECIFIED") {
			t.Errorf("enum %s: value 0 is not *_UNSPECIFIED", e.Name())
		}
		prefix := upperSnake(string(e.Name())) + "_"
		for j := range e.Values().Len() {
			if v := e.Values().Get(j); !strings.HasPrefix(string(v.Name()), prefix) {
				t.Errorf("enum %s: value %s lacks prefix %s", e.Name(), v.Name(), prefix)
			}
		}
	}
}

func upperSnake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}

// TestEverythingIsDocumented checks that every message, enum, enum value,
// field and rpc in site.proto has a comment right above it.
func TestEverythingIsDocumented(t *testing.T) {
	f, err := os.Open("site.proto")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	decl := regexp.MustCompile(`^\s*(message|enum|service|rpc)\s+\w+` + // declarations
		`|^\s*(repeated\s+|optional\s+)?[\w.]+(<[\w., ]+>)?\s+\w+\s*=\s*\d+\s*;` + // fields
		`|^\s*[A-Z][A-Z0-9_]*\s*=\s*\d+\s*;`) // enum values
	prev, n := "", 0
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		trimmed := strings.TrimSpace(text)
		if decl.MatchString(text) && !strings.HasPrefix(trimmed, "option ") {
			n++
			if !strings.HasPrefix(prev, "//") {
				t.Errorf("site.proto:%d: %q has no comment above it", line, trimmed)
			}
		}
		prev = trimmed
	}
	t.Logf("%d declarations checked", n)
	if n < 100 {
		t.Fatalf("found only %d declarations; is the pattern broken?", n)
	}
}

// TestDurationsAreNamedInSeconds: every int64 in the API says its unit, so
// that no caller guesses between seconds, milliseconds and bytes.
func TestDurationsAreNamedInSeconds(t *testing.T) {
	msgs := File_fedsched_v1_site_proto.Messages()
	for i := range msgs.Len() {
		fields := msgs.Get(i).Fields()
		for j := range fields.Len() {
			fd := fields.Get(j)
			name := string(fd.Name())
			if fd.Kind() == protoreflect.Int64Kind && !strings.HasSuffix(name, "_seconds") && !strings.HasSuffix(name, "_bytes") {
				t.Errorf("%s.%s: an int64 must name its unit: *_seconds for a duration, *_bytes for a size or offset", msgs.Get(i).Name(), fd.Name())
			}
		}
	}
}

func TestJobRoundTrips(t *testing.T) {
	code := int32(3)
	job := &Job{
		Id: "site-a.000000000001", State: JobState_JOB_STATE_COMPLETED, Reason: Reason_REASON_EXITED,
		Spec: &JobSpec{Procs: 2, EstimateSeconds: 60, User: "alice", Command: []string{"true"},
			Env: map[string]string{"A": "1"}, Deadline: timestamppb.Now()},
		ExitCode:   &code,
		SlaOutcome: SlaOutcome_SLA_OUTCOME_MET,
		Route:      []*RouteHop{{Site: "site-a", Reason: Reason_REASON_PLACED_IN_FULL}},
	}
	b, err := proto.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	var back Job
	if err := proto.Unmarshal(b, &back); err != nil || !proto.Equal(job, &back) {
		t.Fatalf("binary round trip: %v", err)
	}
	j, err := protojson.Marshal(job)
	if err != nil {
		t.Fatal(err)
	}
	var fromJSON Job
	if err := protojson.Unmarshal(j, &fromJSON); err != nil || !proto.Equal(job, &fromJSON) {
		t.Fatalf("JSON round trip: %v", err)
	}
	if back.ExitCode == nil || back.GetExitCode() != 3 {
		t.Fatal("exit code presence lost")
	}
}
