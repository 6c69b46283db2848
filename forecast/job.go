package forecast

import (
	"fmt"
	"math"
	"math/bits"
	"strings"

	"github.com/fedsched/fedsched/swf"
)

// Job is a job as the forecaster sees it: the attributes known when it is
// submitted, plus what is learnt when it completes (Runtime, End). Times are
// integer seconds on the trace's clock (SWF: relative to UnixStartTime).
// -1 means unknown for the attribute fields, as in SWF.
type Job struct {
	ID       int64
	Submit   int64 // submission time
	End      int64 // completion time: Submit + Wait + Runtime
	Runtime  int64 // actual runtime; only known after End; < 0 unknown
	Estimate int64 // the user's runtime estimate (SWF requested time); <= 0 none
	User     int64
	Group    int64
	App      int64 // application (SWF executable number)
	Queue    int64
	Procs    int64 // processors used (allocated, else requested)
}

// FromSWF converts SWF jobs to forecaster jobs, in the same order. The
// completion time is Submit + Wait + Runtime, with an unknown (negative)
// wait taken as 0 and an unknown runtime leaving End = Submit (such jobs
// never enter a history: see Forecaster.Observe). The returned slice is new
// and owned by the caller.
func FromSWF(jobs []swf.Job) []Job {
	out := make([]Job, len(jobs))
	for i, s := range jobs {
		wait := max(s.Wait, 0)
		end := s.Submit + wait
		if s.Runtime > 0 {
			end += s.Runtime
		}
		out[i] = Job{
			ID:       s.ID,
			Submit:   s.Submit,
			End:      end,
			Runtime:  s.Runtime,
			Estimate: s.ReqTime,
			User:     s.User,
			Group:    s.Group,
			App:      s.Executable,
			Queue:    s.Queue,
			Procs:    s.Procs(),
		}
	}
	return out
}

// EpochFromHeader returns the Epoch (see SearchConfig.Epoch) for a trace: its
// UnixStartTime shifted by the local time zone's offset, so that the
// weekday and hour keys are in the site's local time. The offset is taken
// from the header's "TimeZone" field (seconds east of UTC) when present and
// is otherwise 0 (UTC). Daylight saving time is ignored: a fixed offset keeps
// the keys deterministic without time zone data.
func EpochFromHeader(h swf.Header) int64 {
	var off int64
	if v, ok := h.Fields["TimeZone"]; ok {
		var x int64
		if _, err := fmt.Sscan(v, &x); err == nil && x > -86400 && x < 86400 {
			off = x
		}
	}
	return h.UnixStartTime + off
}

// Attr is an attribute of a job known at submission time, usable in a
// partition key. The time attributes are computed from Submit + Epoch.
type Attr uint8

// The attributes a partition key can be built from.
const (
	AttrUser     Attr = iota // user id
	AttrGroup                // group id (the SWF analogue of the thesis's VO)
	AttrApp                  // application / executable (the thesis's job name)
	AttrQueue                // queue number
	AttrProcs                // processor band: 1, 2, 3-4, 5-8, ... (powers of two)
	AttrEstimate             // band of the user's estimate: half-octaves (factor √2)
	AttrWeek                 // calendar week of submission (weeks start on Monday)
	AttrWeekday              // day of week of submission, 0 = Sunday
	AttrHour                 // hour of day of submission, 0-23
	numAttrs
)

// AllAttrs returns every attribute, in the order of their bits in AttrSet.
// The slice is new on each call.
func AllAttrs() []Attr {
	return []Attr{AttrUser, AttrGroup, AttrApp, AttrQueue, AttrProcs, AttrEstimate, AttrWeek, AttrWeekday, AttrHour}
}

var attrNames = [numAttrs]string{"user", "group", "app", "queue", "procs", "estimate", "week", "weekday", "hour"}

// String returns the attribute's short name, as used by ParseAttrSet.
func (a Attr) String() string {
	if a < numAttrs {
		return attrNames[a]
	}
	return fmt.Sprintf("attr(%d)", uint8(a))
}

const (
	secondsPerDay  = 86400
	secondsPerWeek = 7 * secondsPerDay
	// mondayOffset shifts Unix time so that week boundaries fall on Monday
	// 00:00 (1970-01-01 was a Thursday; the first Monday is 4 days later).
	mondayOffset = 4 * secondsPerDay
)

// floorDiv is integer division rounding towards minus infinity.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// value returns the key value of attribute a for job j; epoch is the Unix
// time (in local time) of the trace's time 0.
func (a Attr) value(j *Job, epoch int64) int64 {
	switch a {
	case AttrUser:
		return j.User
	case AttrGroup:
		return j.Group
	case AttrApp:
		return j.App
	case AttrQueue:
		return j.Queue
	case AttrProcs:
		if j.Procs <= 0 {
			return -1
		}
		return int64(bits.Len64(uint64(j.Procs - 1)))
	case AttrEstimate:
		return estimateBand(j.Estimate)
	case AttrWeek:
		return floorDiv(epoch+j.Submit-mondayOffset, secondsPerWeek)
	case AttrWeekday:
		d := floorDiv(epoch+j.Submit, secondsPerDay)
		return ((d+4)%7 + 7) % 7
	case AttrHour:
		t := epoch + j.Submit
		return (t - floorDiv(t, secondsPerDay)*secondsPerDay) / 3600
	}
	return 0
}

// estimateBand is the half-octave band of an estimate: floor(2·log2(e)),
// -1 for no estimate. Humans pick round values (5, 15, 30, 60 minutes ...),
// which land in distinct bands.
func estimateBand(e int64) int64 {
	if e <= 0 {
		return -1
	}
	return int64(math.Floor(2 * math.Log2(float64(e))))
}

// AttrSet is a set of attributes: the definition of a partitioning. The
// empty set is the root partitioning (one partition holding every job).
type AttrSet uint16

// NewAttrSet returns the set holding the given attributes.
func NewAttrSet(attrs ...Attr) AttrSet {
	var s AttrSet
	for _, a := range attrs {
		s |= 1 << a
	}
	return s
}

// Has reports whether a is in the set.
func (s AttrSet) Has(a Attr) bool { return s&(1<<a) != 0 }

// With returns the set plus a.
func (s AttrSet) With(a Attr) AttrSet { return s | 1<<a }

// Without returns the set minus a.
func (s AttrSet) Without(a Attr) AttrSet { return s &^ (1 << a) }

// Len is the number of attributes in the set.
func (s AttrSet) Len() int { return bits.OnesCount16(uint16(s)) }

// Attrs lists the attributes of the set in bit order.
func (s AttrSet) Attrs() []Attr {
	var out []Attr
	for a := Attr(0); a < numAttrs; a++ {
		if s.Has(a) {
			out = append(out, a)
		}
	}
	return out
}

// String renders the set as "user+estimate", or "all" for the root set
// (one partition of all jobs).
func (s AttrSet) String() string {
	if s == 0 {
		return "all"
	}
	names := make([]string, 0, s.Len())
	for _, a := range s.Attrs() {
		names = append(names, a.String())
	}
	return strings.Join(names, "+")
}

// ParseAttrSet parses the String form of a set ("user+week", "all").
// Unknown names yield an error wrapping ErrUnknownAttr.
func ParseAttrSet(text string) (AttrSet, error) {
	text = strings.TrimSpace(strings.ToLower(text))
	if text == "all" || text == "" {
		return 0, nil
	}
	var s AttrSet
	for _, name := range strings.Split(text, "+") {
		name = strings.TrimSpace(name)
		found := false
		for a := Attr(0); a < numAttrs; a++ {
			if attrNames[a] == name {
				s = s.With(a)
				found = true
				break
			}
		}
		if !found {
			return 0, fmt.Errorf("%w: %q", ErrUnknownAttr, name)
		}
	}
	return s, nil
}

// key identifies one partition: the attribute set and the job's value for
// each attribute in it (zero for the others).
type key struct {
	set  AttrSet
	vals [numAttrs]int64
}

// keyOf returns the partition key of j under set s.
func keyOf(s AttrSet, j *Job, epoch int64) key {
	k := key{set: s}
	for a := Attr(0); a < numAttrs; a++ {
		if s.Has(a) {
			k.vals[a] = a.value(j, epoch)
		}
	}
	return k
}

// String renders a key as "user=12,week=2801".
func (k key) String() string {
	if k.set == 0 {
		return "all"
	}
	var b strings.Builder
	for i, a := range k.set.Attrs() {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%d", a, k.vals[a])
	}
	return b.String()
}
