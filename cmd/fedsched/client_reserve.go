package main

// The operators' reservation commands: reserve, reservations, unreserve.

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// --- reserve --------------------------------------------------------------

type reserveFlags struct {
	conn     connFlags
	name     string
	procs    int32
	start    timeValue
	end      timeValue
	every    durationValue
	until    timeValue
	weekdays []string
	displace bool
}

func newReserveCmd() *cobra.Command {
	var f reserveFlags
	cmd := &cobra.Command{
		Use:   "reserve --procs N --start TIME --end TIME [--every DURATION [--until TIME] [--weekday DAY ...]] [--name NAME] [--displace]",
		Short: "Reserve processors of a site for a fixed time, once or repeating (operators)",
		Long: `Hold processors of a site for exactly [--start, --end): a fixed reservation,
for maintenance or an interactive session. No policy moves, shortens or
overbooks it; jobs are planned around it.

With --every it is a standing reservation: the slot repeats every DURATION
(at least 1h, at least the slot's length), until --until if given, and with
--weekday only on those days (UTC). The site keeps its instances in its plan
a week ahead (see 'fedsched reservations').

If accepted jobs are in the way the site refuses (FailedPrecondition) and
names them; --displace re-plans waiting jobs around the reservation instead,
rejecting those left without a slot in their window (an accepted SLA is then
violated). Running jobs in the way always refuse it.

Times: RFC 3339 (2026-05-01T12:00:00Z), now, or +DURATION relative to the
site's current time (+2h, +1d). Durations: 90s, 2h, 1h30m, 2d.`,
		Example: `  fedsched reserve --procs 64 --start 2026-05-02T06:00:00Z --end 2026-05-02T10:00:00Z --name maintenance
  fedsched reserve --procs 8 --start +1h --end +3h --displace --json
  fedsched reserve --procs 16 --start 2026-05-04T08:00:00Z --end 2026-05-04T10:00:00Z --every 1d --weekday mon,thu --name course`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runReserve(cmd, &f) },
	}
	f.conn.register(cmd, "print the reservation and the displaced jobs as a JSON object")
	fl := cmd.Flags()
	fl.StringVar(&f.name, "name", "", "a name for people (e.g. maintenance)")
	fl.Int32Var(&f.procs, "procs", 0, "processors to hold (required, >= 1)")
	fl.Var(&f.start, "start", "first instant held: RFC 3339, now or +DURATION (required)")
	fl.Var(&f.end, "end", "first instant after the slot: RFC 3339 or +DURATION (required)")
	fl.Var(&f.every, "every", "repeat the slot every DURATION (a standing reservation), e.g. 1d, 7d")
	fl.Var(&f.until, "until", "with --every: no instance starts at or after this time (default: no end)")
	fl.StringSliceVar(&f.weekdays, "weekday", nil, "with --every: only on these days, UTC (mon, tue, ...; repeatable or comma-separated)")
	fl.BoolVar(&f.displace, "displace", false, "re-plan waiting jobs in the way (or reject them) instead of refusing")
	return cmd
}

func runReserve(cmd *cobra.Command, f *reserveFlags) error {
	req, err := f.request()
	if err != nil {
		return err
	}
	c, err := f.conn.dial(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx := cmd.Context()
	if err := f.times(ctx, c, req); err != nil {
		return err
	}
	resp, err := call(ctx, c, func(ctx context.Context) (*fedschedv1.CreateReservationResponse, error) {
		return c.rpc.CreateReservation(ctx, req)
	})
	w := cmd.OutOrStdout()
	if err != nil {
		if conflict, ok := node.ReservationConflictOf(err); ok && f.conn.json {
			// Scripts get what is in the way on stdout; the error line
			// still goes to stderr and the exit status is 1.
			if jerr := emitJSON(w, map[string]conflictJSON{"conflict": conflictView(conflict)}); jerr != nil {
				return jerr
			}
		}
		return err
	}
	if f.conn.json {
		return emitJSON(w, reserveJSON{Reservation: fixedResView(resp.GetReservation()), Displaced: displacedView(resp.GetDisplaced())})
	}
	if err := printFixedRes(w, resp.GetReservation()); err != nil {
		return err
	}
	if len(resp.GetDisplaced()) > 0 {
		fmt.Fprintln(w, "\ndisplaced:")
		return printDisplacedTable(w, resp.GetDisplaced())
	}
	return nil
}

// request checks the flags that need no call and builds the request,
// times aside.
func (f *reserveFlags) request() (*fedschedv1.CreateReservationRequest, error) {
	if f.procs < 1 {
		return nil, invalidArg("--procs must be >= 1, got %d", f.procs)
	}
	if !f.start.t.set {
		return nil, invalidArg("--start is required")
	}
	if !f.end.t.set {
		return nil, invalidArg("--end is required")
	}
	req := &fedschedv1.CreateReservationRequest{Name: f.name, Procs: f.procs, Displace: f.displace}
	if f.every.d != 0 {
		if f.every.d < 0 {
			return nil, invalidArg("--every must be > 0, got %s", formatDuration(f.every.d))
		}
		every, err := wholeSeconds(f.every.d)
		if err != nil {
			return nil, invalidArg("--every: %v", err)
		}
		req.EverySeconds = every
	} else {
		if f.until.t.set {
			return nil, invalidArg("--until needs --every")
		}
		if len(f.weekdays) > 0 {
			return nil, invalidArg("--weekday needs --every")
		}
	}
	for _, d := range f.weekdays {
		wd, err := parseWeekday(d)
		if err != nil {
			return nil, err
		}
		req.Weekdays = append(req.Weekdays, wd)
	}
	return req, nil
}

// times resolves --start, --end and --until into req; relative times
// count from the site's clock.
func (f *reserveFlags) times(ctx context.Context, c *siteClient, req *fedschedv1.CreateReservationRequest) error {
	now := time.Now()
	if f.start.t.rel || f.end.t.rel || f.until.t.rel {
		var err error
		if now, err = siteNow(ctx, c); err != nil {
			return err
		}
	}
	for _, x := range []struct {
		flag string
		v    *timeValue
		dst  **timestamppb.Timestamp
	}{{"--start", &f.start, &req.Start}, {"--end", &f.end, &req.End}, {"--until", &f.until, &req.Until}} {
		if !x.v.t.set {
			continue
		}
		ts := timestamppb.New(x.v.t.resolve(now))
		if err := ts.CheckValid(); err != nil {
			return invalidArg("%s %s: out of range", x.flag, x.v.raw)
		}
		*x.dst = ts
	}
	start, end := req.GetStart().AsTime(), req.GetEnd().AsTime()
	if !end.After(start) {
		return invalidArg("--end %s is not after --start %s", end.UTC().Format(time.RFC3339), start.UTC().Format(time.RFC3339))
	}
	if req.GetEverySeconds() > 0 && time.Duration(req.GetEverySeconds())*time.Second < end.Sub(start) {
		return invalidArg("--every %s is shorter than the slot (%s): instances would overlap",
			formatSeconds(req.GetEverySeconds()), formatDuration(end.Sub(start)))
	}
	return nil
}

// parseWeekday reads mon, monday, Mon, MONDAY or WEEKDAY_MONDAY.
func parseWeekday(s string) (fedschedv1.Weekday, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	name = strings.TrimPrefix(name, "WEEKDAY_")
	for v := fedschedv1.Weekday_WEEKDAY_MONDAY; v <= fedschedv1.Weekday_WEEKDAY_SUNDAY; v++ {
		full := strings.TrimPrefix(v.String(), "WEEKDAY_")
		if name != "" && (name == full || name == full[:3]) {
			return v, nil
		}
	}
	return 0, invalidArg("--weekday %q: want mon, tue, wed, thu, fri, sat or sun", s)
}

// weekdayShort is mon, tue, ... ("" for UNSPECIFIED).
func weekdayShort(d fedschedv1.Weekday) string {
	n := strings.ToLower(enumName(d.String(), "WEEKDAY_"))
	if len(n) > 3 && d >= fedschedv1.Weekday_WEEKDAY_MONDAY && d <= fedschedv1.Weekday_WEEKDAY_SUNDAY {
		return n[:3]
	}
	return n
}

// --- reservations ---------------------------------------------------------

func newReservationsCmd() *cobra.Command {
	var f connFlags
	cmd := &cobra.Command{
		Use:   "reservations",
		Short: "List a site's fixed and standing reservations",
		Long: `List the site's fixed and standing reservations that are not over, oldest
first: the slot, the rule of a standing one, and the instances the site's
plan holds now (a standing reservation's instances are laid a horizon ahead,
a week by default).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := f.dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			resp, err := call(cmd.Context(), c, func(ctx context.Context) (*fedschedv1.ListReservationsResponse, error) {
				return c.rpc.ListReservations(ctx, &fedschedv1.ListReservationsRequest{})
			})
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if f.json {
				out := make([]fixedResJSON, 0, len(resp.GetReservations()))
				for _, r := range resp.GetReservations() {
					out = append(out, fixedResView(r))
				}
				return emitJSON(w, out)
			}
			return printFixedResTable(w, resp.GetReservations())
		},
	}
	f.register(cmd, "print the reservations as a JSON array")
	return cmd
}

// --- unreserve ------------------------------------------------------------

func newUnreserveCmd() *cobra.Command {
	var f connFlags
	cmd := &cobra.Command{
		Use:   "unreserve RESERVATION_ID",
		Short: "Delete a fixed reservation, or a standing one with all its instances",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return unary(cmd, &f, func(ctx context.Context, c *siteClient) (*fedschedv1.DeleteReservationResponse, error) {
				return c.rpc.DeleteReservation(ctx, &fedschedv1.DeleteReservationRequest{ReservationId: args[0]})
			}, func(r *fedschedv1.DeleteReservationResponse) any { return fixedResView(r.GetReservation()) },
				func(w io.Writer, resp *fedschedv1.DeleteReservationResponse) error {
					k := newKV(w)
					r := resp.GetReservation()
					k.add("deleted", "%s", orDash(r.GetId()))
					if r.GetName() != "" {
						k.add("name", "%s", r.GetName())
					}
					if p := r.GetProblem(); p != "" {
						k.add("freed", "nothing: it held no processors (%s)", oneLine(p))
					} else {
						k.add("freed", "%d procs over %d slot(s) in the plan", r.GetProcs(), len(r.GetInstances()))
					}
					return k.flush()
				})
		},
	}
	f.register(cmd, "print the deleted reservation as a JSON object")
	return cmd
}

// --- views ----------------------------------------------------------------

type windowJSON struct {
	Start *string `json:"start"`
	End   *string `json:"end"`
}

// fixedResJSON is a reservation in --json output. Unset times are null;
// weekdays and instances are always arrays.
type fixedResJSON struct {
	ID        string       `json:"id"`
	Name      string       `json:"name"`
	Procs     int32        `json:"procs"`
	Start     *string      `json:"start"`
	End       *string      `json:"end"`
	EveryS    int64        `json:"every_s"`
	Until     *string      `json:"until"`
	Weekdays  []string     `json:"weekdays"`
	Site      string       `json:"site"`
	Instances []windowJSON `json:"instances"`
	// Problem says why a stored reservation holds nothing (the site
	// restarted smaller); empty when it is in the plan.
	Problem string `json:"problem,omitempty"`
}

type displacedJSON struct {
	JobID       string           `json:"job_id"`
	State       string           `json:"state"`
	Reason      string           `json:"reason"`
	Message     string           `json:"message"`
	SLAOutcome  string           `json:"sla_outcome"`
	Previous    *reservationJSON `json:"previous"`
	Reservation *reservationJSON `json:"reservation"`
}

type reserveJSON struct {
	Reservation fixedResJSON    `json:"reservation"`
	Displaced   []displacedJSON `json:"displaced"`
}

type conflictJSON struct {
	JobIDs         []string `json:"job_ids"`
	RunningJobIDs  []string `json:"running_job_ids"`
	HeldJobIDs     []string `json:"held_job_ids"`
	ReservationIDs []string `json:"reservation_ids"`
	Displace       bool     `json:"displace"`
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func conflictView(c *fedschedv1.ReservationConflict) conflictJSON {
	return conflictJSON{JobIDs: nonNil(c.GetJobIds()), RunningJobIDs: nonNil(c.GetRunningJobIds()), HeldJobIDs: nonNil(c.GetHeldJobIds()),
		ReservationIDs: nonNil(c.GetReservationIds()), Displace: c.GetDisplace()}
}

func fixedResView(r *fedschedv1.FixedReservation) fixedResJSON {
	v := fixedResJSON{ID: r.GetId(), Name: r.GetName(), Procs: r.GetProcs(), Start: tsJSON(r.GetStart()), End: tsJSON(r.GetEnd()),
		EveryS: r.GetEverySeconds(), Until: tsJSON(r.GetUntil()), Site: r.GetSite(), Weekdays: []string{}, Instances: []windowJSON{},
		Problem: r.GetProblem()}
	for _, d := range r.GetWeekdays() {
		v.Weekdays = append(v.Weekdays, weekdayShort(d))
	}
	for _, w := range r.GetInstances() {
		v.Instances = append(v.Instances, windowJSON{Start: tsJSON(w.GetStart()), End: tsJSON(w.GetEnd())})
	}
	return v
}

func displacedView(ds []*fedschedv1.DisplacedJob) []displacedJSON {
	out := make([]displacedJSON, 0, len(ds))
	for _, d := range ds {
		out = append(out, displacedJSON{JobID: d.GetJobId(), State: stateName(d.GetState()), Reason: reasonName(d.GetReason()),
			Message: d.GetMessage(), SLAOutcome: outcomeName(d.GetSlaOutcome()), Previous: reservationView(d.GetPrevious()),
			Reservation: reservationView(d.GetReservation())})
	}
	return out
}

// slotHuman is a slot on one line: start → end (length).
func slotHuman(start, end *timestamppb.Timestamp) string {
	s := tsHuman(start) + " → " + tsHuman(end)
	if start != nil && end != nil {
		s += " (" + formatDuration(end.AsTime().Sub(start.AsTime())) + ")"
	}
	return s
}

// repeatsHuman is the rule of a standing reservation, or "-".
func repeatsHuman(r *fedschedv1.FixedReservation) string {
	if r.GetEverySeconds() <= 0 {
		return "-"
	}
	s := "every " + formatSeconds(r.GetEverySeconds())
	if len(r.GetWeekdays()) > 0 {
		var days []string
		for _, d := range r.GetWeekdays() {
			days = append(days, weekdayShort(d))
		}
		s += " on " + strings.Join(days, ",") + " (UTC)"
	}
	if r.GetUntil() != nil {
		s += " until " + tsHuman(r.GetUntil())
	}
	return s
}

func printFixedRes(w io.Writer, r *fedschedv1.FixedReservation) error {
	k := newKV(w)
	k.add("id", "%s", orDash(r.GetId()))
	if r.GetName() != "" {
		k.add("name", "%s", r.GetName())
	}
	k.add("procs", "%d", r.GetProcs())
	k.add("slot", "%s", slotHuman(r.GetStart(), r.GetEnd()))
	if r.GetEverySeconds() > 0 {
		k.add("repeats", "%s", repeatsHuman(r))
		if in := r.GetInstances(); len(in) > 0 {
			k.add("instances", "%d in the plan, next %s", len(in), slotHuman(in[0].GetStart(), in[0].GetEnd()))
		} else {
			k.add("instances", "none in the plan yet")
		}
	}
	if p := r.GetProblem(); p != "" {
		k.add("problem", "%s", oneLine(p))
	}
	k.add("site", "%s", orDash(r.GetSite()))
	return k.flush()
}

// printFixedResTable prints one row per reservation.
func printFixedResTable(w io.Writer, rs []*fedschedv1.FixedReservation) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPROCS\tSTART\tEND\tREPEATS\tIN PLAN\tNEXT")
	for _, r := range rs {
		next := "-"
		if in := r.GetInstances(); len(in) > 0 {
			next = tsHuman(in[0].GetStart())
		}
		if p := r.GetProblem(); p != "" {
			next = "not held: " + oneLine(p)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\n", oneLine(r.GetId()), orDash(oneLine(r.GetName())), r.GetProcs(),
			tsHuman(r.GetStart()), tsHuman(r.GetEnd()), repeatsHuman(r), len(r.GetInstances()), next)
	}
	return tw.Flush()
}

// printDisplacedTable prints what a reservation did to each displaced job.
func printDisplacedTable(w io.Writer, ds []*fedschedv1.DisplacedJob) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "JOB\tSTATE\tWAS\tNOW\tSLA")
	for _, d := range ds {
		now := "-"
		if r := d.GetReservation(); r != nil {
			now = tsHuman(r.GetStart()) + " → " + tsHuman(r.GetEnd())
		}
		was := "-"
		if r := d.GetPrevious(); r != nil {
			was = tsHuman(r.GetStart()) + " → " + tsHuman(r.GetEnd())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", oneLine(d.GetJobId()), orDash(stateName(d.GetState())), was, now, orDash(outcomeName(d.GetSlaOutcome())))
	}
	return tw.Flush()
}
