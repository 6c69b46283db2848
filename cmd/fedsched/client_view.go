package main

// Output of the client commands: readable enum names, the --json views
// (field names are snake_case and stable; scripts rely on them) and the
// human tables.

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/fedsched/fedsched/node"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// enumName strips the enum's prefix from a value name; the UNSPECIFIED value
// is "", and a value unknown to this build (a newer node) stays its number.
func enumName(name, prefix string) string {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return name
	}
	if rest == "UNSPECIFIED" {
		return ""
	}
	return rest
}

// stateName is PENDING, RUNNING, ... ("" for UNSPECIFIED).
func stateName(s fedschedv1.JobState) string { return enumName(s.String(), "JOB_STATE_") }

// reasonName is placed_in_full, overbooked, ... ("" for UNSPECIFIED).
func reasonName(r fedschedv1.Reason) string {
	return strings.ToLower(enumName(r.String(), "REASON_"))
}

// outcomeName is open, met, violated, cancelled ("" for none).
func outcomeName(o fedschedv1.SlaOutcome) string {
	return strings.ToLower(enumName(o.String(), "SLA_OUTCOME_"))
}

// parseState reads a state filter: "pending", "PENDING" or
// "JOB_STATE_PENDING".
func parseState(s string) (fedschedv1.JobState, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	name = strings.TrimPrefix(name, "JOB_STATE_")
	if v, ok := fedschedv1.JobState_value["JOB_STATE_"+name]; ok && v != 0 {
		return fedschedv1.JobState(v), nil
	}
	var names []string
	for i := int32(1); ; i++ {
		n, ok := fedschedv1.JobState_name[i]
		if !ok {
			break
		}
		names = append(names, strings.TrimPrefix(n, "JOB_STATE_"))
	}
	return 0, invalidArg("--state %q: want one of %s", s, strings.Join(names, ", "))
}

// orDash is s, or "-" when s is empty, for table cells.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// --- JSON views -----------------------------------------------------------

type reservationJSON struct {
	Start *string `json:"start"`
	End   *string `json:"end"`
	Procs int32   `json:"procs"`
	Site  string  `json:"site"`
}

type hopJSON struct {
	Site     string  `json:"site"`
	PeerSite string  `json:"peer_site"`
	Reason   string  `json:"reason"`
	Message  string  `json:"message"`
	Time     *string `json:"time"`
	Taken    bool    `json:"taken"`
}

type transitionJSON struct {
	From    string  `json:"from"`
	To      string  `json:"to"`
	Reason  string  `json:"reason"`
	Message string  `json:"message"`
	Time    *string `json:"time"`
}

// jobJSON is a job in --json output. Unset times and an absent reservation
// or exit code are null; route and history are always arrays.
type jobJSON struct {
	ID          string           `json:"id"`
	State       string           `json:"state"`
	Reason      string           `json:"reason"`
	Message     string           `json:"message"`
	Site        string           `json:"site"`
	OriginSite  string           `json:"origin_site"`
	User        string           `json:"user"`
	App         string           `json:"app"`
	Procs       int32            `json:"procs"`
	EstimateS   int64            `json:"estimate_s"`
	SimRuntimeS int64            `json:"sim_runtime_s"`
	Release     *string          `json:"release"`
	Deadline    *string          `json:"deadline"`
	Fee         float64          `json:"fee"`
	Penalty     float64          `json:"penalty"`
	Command     []string         `json:"command"`
	Workdir     string           `json:"workdir"`
	SubmitTime  *string          `json:"submit_time"`
	StartTime   *string          `json:"start_time"`
	EndTime     *string          `json:"end_time"`
	UpdateTime  *string          `json:"update_time"`
	Reservation *reservationJSON `json:"reservation"`
	PoF         float64          `json:"pof"`
	Overbooked  bool             `json:"overbooked"`
	SLAOutcome  string           `json:"sla_outcome"`
	ExitCode    *int32           `json:"exit_code"`
	Route       []hopJSON        `json:"route"`
	History     []transitionJSON `json:"history"`
}

// tsJSON is an instant as RFC 3339 in UTC, or nil when unset.
func tsJSON(ts *timestamppb.Timestamp) *string {
	if ts == nil {
		return nil
	}
	s := ts.AsTime().UTC().Format(time.RFC3339Nano)
	return &s
}

func reservationView(r *fedschedv1.Reservation) *reservationJSON {
	if r == nil {
		return nil
	}
	return &reservationJSON{Start: tsJSON(r.GetStart()), End: tsJSON(r.GetEnd()), Procs: r.GetProcs(), Site: r.GetSite()}
}

func routeView(route []*fedschedv1.RouteHop) []hopJSON {
	out := make([]hopJSON, 0, len(route))
	for _, h := range route {
		out = append(out, hopJSON{Site: h.GetSite(), PeerSite: h.GetPeerSite(), Reason: reasonName(h.GetReason()),
			Message: h.GetMessage(), Time: tsJSON(h.GetTime()), Taken: h.GetTaken()})
	}
	return out
}

func historyView(hist []*fedschedv1.Transition) []transitionJSON {
	out := make([]transitionJSON, 0, len(hist))
	for _, t := range hist {
		out = append(out, transitionJSON{From: stateName(t.GetFrom()), To: stateName(t.GetTo()),
			Reason: reasonName(t.GetReason()), Message: t.GetMessage(), Time: tsJSON(t.GetTime())})
	}
	return out
}

func jobView(j *fedschedv1.Job) jobJSON {
	sp := j.GetSpec()
	v := jobJSON{
		ID: j.GetId(), State: stateName(j.GetState()), Reason: reasonName(j.GetReason()), Message: j.GetMessage(),
		Site: j.GetSite(), OriginSite: j.GetOriginSite(), User: sp.GetUser(), App: sp.GetApp(),
		Procs: sp.GetProcs(), EstimateS: sp.GetEstimateSeconds(), SimRuntimeS: sp.GetSimRuntimeSeconds(),
		Release: tsJSON(sp.GetRelease()), Deadline: tsJSON(sp.GetDeadline()), Fee: sp.GetFee(), Penalty: sp.GetPenalty(),
		Command: sp.GetCommand(), Workdir: sp.GetWorkdir(),
		SubmitTime: tsJSON(j.GetSubmitTime()), StartTime: tsJSON(j.GetStartTime()), EndTime: tsJSON(j.GetEndTime()),
		UpdateTime:  tsJSON(j.GetUpdateTime()),
		Reservation: reservationView(j.GetReservation()), PoF: j.GetPof(), Overbooked: j.GetOverbooked(),
		SLAOutcome: outcomeName(j.GetSlaOutcome()), Route: routeView(j.GetRoute()), History: historyView(j.GetHistory()),
	}
	if v.Command == nil {
		v.Command = []string{}
	}
	if j != nil && j.ExitCode != nil {
		code := j.GetExitCode()
		v.ExitCode = &code
	}
	return v
}

// emitJSON writes v indented, for one object or an array.
func emitJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// emitJSONLine writes v on one line, for streams.
func emitJSONLine(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// --- human output ---------------------------------------------------------

// humanTime is how every command writes an instant for people: in UTC,
// to the second, with the zone ("2026-05-02 06:00:00Z"), the same in
// tables, key/value output and explain's summary (node.TimeLayout), so that
// times from sites in different zones compare at a glance.
const humanTime = node.TimeLayout

// tsHuman is an instant in humanTime, or "-" when unset.
func tsHuman(ts *timestamppb.Timestamp) string {
	if ts == nil {
		return "-"
	}
	return ts.AsTime().UTC().Format(humanTime)
}

func reservationHuman(r *fedschedv1.Reservation) string {
	if r == nil {
		return "-"
	}
	s := fmt.Sprintf("%s → %s", tsHuman(r.GetStart()), tsHuman(r.GetEnd()))
	if r.GetStart() != nil && r.GetEnd() != nil {
		s += " (" + formatDuration(r.GetEnd().AsTime().Sub(r.GetStart().AsTime())) + ")"
	}
	if r.GetProcs() > 0 {
		s += fmt.Sprintf(" on %d procs", r.GetProcs())
	}
	if r.GetSite() != "" {
		s += " at " + r.GetSite()
	}
	return s
}

func reasonHuman(r fedschedv1.Reason, msg string) string {
	s := orDash(reasonName(r))
	if msg != "" {
		s += ": " + msg
	}
	return s
}

// kv prints aligned "key  value" lines.
type kv struct{ tw *tabwriter.Writer }

func newKV(w io.Writer) kv { return kv{tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)} }

func (k kv) add(key, format string, args ...any) {
	fmt.Fprintf(k.tw, "%s\t%s\n", key, oneLine(fmt.Sprintf(format, args...)))
}

func (k kv) flush() error { return k.tw.Flush() }

// oneLine keeps a server-provided text from breaking a table row.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\t\r\n") {
		return s
	}
	return strings.Join(strings.Fields(s), " ")
}

// printJob prints one job as key/value lines: the decision first, then the
// spec and the times.
func printJob(w io.Writer, j *fedschedv1.Job) error {
	k := newKV(w)
	sp := j.GetSpec()
	k.add("id", "%s", j.GetId())
	k.add("state", "%s", orDash(stateName(j.GetState())))
	k.add("reason", "%s", reasonHuman(j.GetReason(), j.GetMessage()))
	k.add("site", "%s", orDash(j.GetSite()))
	if o := j.GetOriginSite(); o != "" && o != j.GetSite() {
		k.add("origin site", "%s", o)
	}
	k.add("reservation", "%s", reservationHuman(j.GetReservation()))
	if j.GetOverbooked() {
		k.add("pof", "%.4g (overbooked)", j.GetPof())
	} else if j.GetPof() > 0 {
		k.add("pof", "%.4g", j.GetPof())
	}
	if o := outcomeName(j.GetSlaOutcome()); o != "" {
		k.add("sla", "%s", o)
	}
	k.add("user", "%s", orDash(sp.GetUser()))
	if sp.GetApp() != "" {
		k.add("app", "%s", sp.GetApp())
	}
	k.add("procs", "%d", sp.GetProcs())
	k.add("estimate", "%s", formatSeconds(sp.GetEstimateSeconds()))
	if sp.GetRelease() != nil {
		k.add("release", "%s", tsHuman(sp.GetRelease()))
	}
	if sp.GetDeadline() != nil {
		k.add("deadline", "%s", tsHuman(sp.GetDeadline()))
		k.add("fee / penalty", "%g / %g VC", sp.GetFee(), sp.GetPenalty())
	} else {
		k.add("deadline", "- (best effort)")
	}
	if len(sp.GetCommand()) > 0 {
		k.add("command", "%s", strings.Join(sp.GetCommand(), " "))
	}
	k.add("submitted", "%s", tsHuman(j.GetSubmitTime()))
	if j.GetStartTime() != nil {
		k.add("started", "%s", tsHuman(j.GetStartTime()))
	}
	if j.GetEndTime() != nil {
		k.add("ended", "%s", tsHuman(j.GetEndTime()))
	}
	if j != nil && j.ExitCode != nil {
		k.add("exit code", "%d", j.GetExitCode())
	}
	if n := len(j.GetRoute()); n > 0 {
		k.add("route", "%s", routeHuman(j.GetRoute()))
	}
	return k.flush()
}

// routeHuman is the route on one line: site-a → site-b (delegated);
// site-b ← site-a (received_from_peer). The arrow points the way the job
// went: a hop's site is where it was recorded, and a receiving site's peer
// is where the job came from.
func routeHuman(route []*fedschedv1.RouteHop) string {
	var parts []string
	for _, h := range route {
		p := h.GetSite()
		if h.GetPeerSite() != "" {
			arrow := " → "
			if h.GetReason() == fedschedv1.Reason_REASON_RECEIVED_FROM_PEER {
				arrow = " ← "
			}
			p += arrow + h.GetPeerSite()
		}
		if r := reasonName(h.GetReason()); r != "" {
			p += " (" + r + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}

// printRouteTable prints a job's route, oldest hop first.
func printRouteTable(w io.Writer, route []*fedschedv1.RouteHop) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tSITE\tPEER\tREASON\tMESSAGE")
	for _, h := range route {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", tsHuman(h.GetTime()), orDash(oneLine(h.GetSite())),
			orDash(oneLine(h.GetPeerSite())), orDash(reasonName(h.GetReason())), oneLine(h.GetMessage()))
	}
	return tw.Flush()
}

// printHistoryTable prints a job's state changes, oldest first.
func printHistoryTable(w io.Writer, hist []*fedschedv1.Transition) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tFROM\tTO\tREASON\tMESSAGE")
	for _, t := range hist {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", tsHuman(t.GetTime()), orDash(stateName(t.GetFrom())),
			orDash(stateName(t.GetTo())), orDash(reasonName(t.GetReason())), oneLine(t.GetMessage()))
	}
	return tw.Flush()
}
