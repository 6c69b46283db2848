package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
)

// --- status ---------------------------------------------------------------

func newStatusCmd() *cobra.Command {
	var f connFlags
	cmd := &cobra.Command{
		Use:   "status [JOB_ID]",
		Short: "Describe the site (capabilities and load), or one job",
		Args:  usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := f.dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			if len(args) == 1 {
				return showJob(cmd, c, f.json, args[0])
			}
			return showSite(cmd, c, f.json)
		},
	}
	f.register(cmd, "print the site or the job as a JSON object")
	return cmd
}

// siteJSON is the --json output of status without a job id.
type siteJSON struct {
	Name        string  `json:"name"`
	Procs       int32   `json:"procs"`
	Policy      string  `json:"policy"`
	FreeProcs   int32   `json:"free_procs"`
	RunningJobs int32   `json:"running_jobs"`
	PendingJobs int32   `json:"pending_jobs"`
	Executor    string  `json:"executor"`
	TimeScale   float64 `json:"time_scale"`
	Overbooking bool    `json:"overbooking"`
	PoFMax      float64 `json:"pof_max"`
	Now         *string `json:"now"`
	Version     string  `json:"version"`
	// RQF: when the idle site next asks its peers for work by itself
	// (null: not an RQF site, not idle, or asking now), and whether a
	// round of asking is on its way.
	NextPull *string `json:"next_pull"`
	Pulling  bool    `json:"pulling"`
}

func showSite(cmd *cobra.Command, c *siteClient, asJSON bool) error {
	resp, err := call(cmd.Context(), c, func(ctx context.Context) (*fedschedv1.GetSiteResponse, error) {
		return c.rpc.GetSite(ctx, &fedschedv1.GetSiteRequest{})
	})
	if err != nil {
		return err
	}
	s := resp.GetSite()
	w := cmd.OutOrStdout()
	if asJSON {
		return emitJSON(w, siteJSON{
			Name: s.GetName(), Procs: s.GetProcs(), Policy: s.GetPolicy(), FreeProcs: s.GetFreeProcs(),
			RunningJobs: s.GetRunningJobs(), PendingJobs: s.GetPendingJobs(), Executor: s.GetExecutor(),
			TimeScale: s.GetTimeScale(), Overbooking: s.GetOverbooking(), PoFMax: s.GetPofMax(),
			Now: tsJSON(s.GetNow()), Version: s.GetVersion(), NextPull: tsJSON(s.GetNextPull()), Pulling: s.GetPulling(),
		})
	}
	k := newKV(w)
	k.add("site", "%s", orDash(s.GetName()))
	k.add("procs", "%d (%d free)", s.GetProcs(), s.GetFreeProcs())
	k.add("policy", "%s", orDash(s.GetPolicy()))
	k.add("running", "%d jobs", s.GetRunningJobs())
	k.add("pending", "%d jobs", s.GetPendingJobs())
	k.add("executor", "%s", orDash(s.GetExecutor()))
	k.add("time scale", "%gx", s.GetTimeScale())
	if s.GetOverbooking() {
		k.add("overbooking", "on (pof_max %g)", s.GetPofMax())
	} else {
		k.add("overbooking", "off")
	}
	k.add("site time", "%s", tsHuman(s.GetNow()))
	switch {
	case s.GetPulling():
		k.add("rqf", "asking peers for work now")
	case s.GetNextPull() != nil:
		k.add("rqf", "idle: asks peers for work at %s", tsHuman(s.GetNextPull()))
	}
	k.add("version", "%s", orDash(s.GetVersion()))
	return k.flush()
}

func showJob(cmd *cobra.Command, c *siteClient, asJSON bool, id string) error {
	resp, err := call(cmd.Context(), c, func(ctx context.Context) (*fedschedv1.GetJobResponse, error) {
		return c.rpc.GetJob(ctx, &fedschedv1.GetJobRequest{JobId: id})
	})
	if err != nil {
		return err
	}
	if asJSON {
		return emitJSON(cmd.OutOrStdout(), jobView(resp.GetJob()))
	}
	return printJob(cmd.OutOrStdout(), resp.GetJob())
}

// --- jobs ---------------------------------------------------------------

type jobsFlags struct {
	conn   connFlags
	states []string
	user   string
	limit  int
	all    bool
	format string
}

func newJobsCmd() *cobra.Command {
	var f jobsFlags
	cmd := &cobra.Command{
		Use:   "jobs [--all] [--state S ...] [--user U] [--limit N] [--format COLUMNS]",
		Short: "List a site's active jobs (running, waiting, delegated); --all adds the history",
		Long: `List the jobs submitted to a site (wherever they run), like squeue: the active
ones first (running, then waiting in the order they are planned to start,
then delegated), then, with --all, the ended ones newest first.

--state (repeatable, or comma-separated) lists exactly the jobs in those
states: PENDING, RUNNING, DELEGATED, COMPLETED, KILLED, FAILED, CANCELLED,
REJECTED. --limit N keeps the N most recent jobs (highest ids) of the
selection. --format chooses the columns, comma-separated, from:
` + strings.Join(jobColumnNames(), ", ") + `
(default: ` + defaultJobColumns + `).

PLANNED is the start the site's plan holds for a waiting job; START the
actual start; ELAPSED how long the job has run (so far). REASON says, for a
waiting job, what it waits for (processors held by named jobs until a time,
a fixed reservation by name, the jobs ahead of it, its release time, a peer
quote in flight); for others why they are in their state. Times are UTC.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return runJobs(cmd, &f) },
	}
	f.conn.register(cmd, "print the jobs as a JSON array")
	fl := cmd.Flags()
	fl.StringSliceVar(&f.states, "state", nil, "only jobs in this state (repeatable)")
	fl.StringVar(&f.user, "user", "", "only jobs of this user (default: every user)")
	fl.IntVar(&f.limit, "limit", 0, "only the N most recent jobs (0: all)")
	fl.BoolVar(&f.all, "all", false, "also the ended jobs (completed, killed, failed, cancelled, rejected), newest first")
	fl.StringVar(&f.format, "format", defaultJobColumns, "comma-separated columns to print")
	return cmd
}

// maxPageSize is the server's cap on a page.
const maxPageSize = 1000

// activeStates are what `fedsched jobs` lists without --all.
var activeStates = []fedschedv1.JobState{fedschedv1.JobState_JOB_STATE_RUNNING, fedschedv1.JobState_JOB_STATE_PENDING, fedschedv1.JobState_JOB_STATE_DELEGATED}

func runJobs(cmd *cobra.Command, f *jobsFlags) error {
	if f.limit < 0 {
		return invalidArg("--limit must be >= 0, got %d", f.limit)
	}
	cols, err := parseJobColumns(f.format)
	if err != nil {
		return err
	}
	req := &fedschedv1.ListJobsRequest{User: f.user}
	seen := map[fedschedv1.JobState]bool{}
	for _, s := range f.states {
		st, err := parseState(s)
		if err != nil {
			return err
		}
		if !seen[st] {
			seen[st] = true
			req.States = append(req.States, st)
		}
	}
	if len(req.States) == 0 && !f.all {
		req.States = activeStates
	}
	c, err := f.conn.dial(cmd)
	if err != nil {
		return err
	}
	defer c.Close()
	jobs, err := listAll(cmd.Context(), c, req, 0)
	if err != nil {
		return err
	}
	jobs = squeueOrder(jobs, f.limit)
	w := cmd.OutOrStdout()
	if f.conn.json {
		out := make([]jobJSON, 0, len(jobs))
		for _, j := range jobs {
			out = append(out, jobView(j))
		}
		return emitJSON(w, out)
	}
	var now time.Time
	for _, j := range jobs {
		if j.GetState() == fedschedv1.JobState_JOB_STATE_RUNNING && slices.Contains(cols, "elapsed") {
			// Elapsed time is measured by the site's clock (which may
			// run faster than the wall clock).
			if resp, err := call(cmd.Context(), c, func(ctx context.Context) (*fedschedv1.GetSiteResponse, error) {
				return c.rpc.GetSite(ctx, &fedschedv1.GetSiteRequest{})
			}); err == nil && resp.GetSite().GetNow() != nil {
				now = resp.GetSite().GetNow().AsTime()
			}
			break
		}
	}
	return printJobsTable(w, jobs, cols, now)
}

// squeueOrder keeps the limit most recent jobs (0: all) and orders them as
// `fedsched jobs` prints them: running (by start), waiting (by planned
// start), delegated, then the ended ones newest first.
func squeueOrder(jobs []*fedschedv1.Job, limit int) []*fedschedv1.Job {
	if limit > 0 && len(jobs) > limit {
		slices.SortFunc(jobs, func(a, b *fedschedv1.Job) int { return compareJobIDs(b.GetId(), a.GetId()) })
		jobs = jobs[:limit]
	}
	rank := func(j *fedschedv1.Job) int {
		switch j.GetState() {
		case fedschedv1.JobState_JOB_STATE_RUNNING:
			return 0
		case fedschedv1.JobState_JOB_STATE_PENDING:
			return 1
		case fedschedv1.JobState_JOB_STATE_DELEGATED:
			return 2
		}
		return 3
	}
	startOf := func(j *fedschedv1.Job) int64 {
		if st := j.GetStartTime(); st != nil {
			return st.GetSeconds()
		}
		if r := j.GetReservation(); r != nil {
			return r.GetStart().GetSeconds()
		}
		return 1 << 62
	}
	slices.SortStableFunc(jobs, func(a, b *fedschedv1.Job) int {
		ra, rb := rank(a), rank(b)
		switch {
		case ra != rb:
			return ra - rb
		case ra <= 1:
			if c := cmp.Compare(startOf(a), startOf(b)); c != 0 {
				return c
			}
			return compareJobIDs(a.GetId(), b.GetId())
		case ra == 2:
			return compareJobIDs(a.GetId(), b.GetId())
		}
		return compareJobIDs(b.GetId(), a.GetId())
	})
	return jobs
}

// compareJobIDs orders ids of one site by submission (longer ids are
// newer: the sequence number is zero-padded, so equal lengths sort as
// strings).
func compareJobIDs(a, b string) int {
	return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
}

// jobColumn is one column of the jobs table.
type jobColumn struct {
	name string
	cell func(j *fedschedv1.Job, now time.Time) string
}

const defaultJobColumns = "id,state,user,procs,estimate,submitted,planned,start,elapsed,site,reason"

var jobColumns = []jobColumn{
	{"id", func(j *fedschedv1.Job, _ time.Time) string { return oneLine(j.GetId()) }},
	{"state", func(j *fedschedv1.Job, _ time.Time) string { return orDash(stateName(j.GetState())) }},
	{"user", func(j *fedschedv1.Job, _ time.Time) string { return orDash(oneLine(j.GetSpec().GetUser())) }},
	{"app", func(j *fedschedv1.Job, _ time.Time) string { return orDash(oneLine(j.GetSpec().GetApp())) }},
	{"procs", func(j *fedschedv1.Job, _ time.Time) string { return fmt.Sprint(j.GetSpec().GetProcs()) }},
	{"estimate", func(j *fedschedv1.Job, _ time.Time) string { return formatSeconds(j.GetSpec().GetEstimateSeconds()) }},
	{"submitted", func(j *fedschedv1.Job, _ time.Time) string { return tsHuman(j.GetSubmitTime()) }},
	{"planned", func(j *fedschedv1.Job, _ time.Time) string {
		if r := j.GetReservation(); r != nil && j.GetStartTime() == nil && j.GetState() != fedschedv1.JobState_JOB_STATE_REJECTED {
			return tsHuman(r.GetStart())
		}
		return "-"
	}},
	{"start", func(j *fedschedv1.Job, _ time.Time) string { return tsHuman(j.GetStartTime()) }},
	{"end", func(j *fedschedv1.Job, _ time.Time) string { return tsHuman(j.GetEndTime()) }},
	{"elapsed", func(j *fedschedv1.Job, now time.Time) string {
		st := j.GetStartTime()
		switch {
		case st == nil:
			return "-"
		case j.GetEndTime() != nil:
			return formatDuration(j.GetEndTime().AsTime().Sub(st.AsTime()))
		case !now.IsZero():
			return formatDuration(max(0, now.Sub(st.AsTime())))
		}
		return "-"
	}},
	{"site", func(j *fedschedv1.Job, _ time.Time) string { return orDash(oneLine(j.GetSite())) }},
	{"pof", func(j *fedschedv1.Job, _ time.Time) string {
		if j.GetOverbooked() || j.GetPof() > 0 {
			return fmt.Sprintf("%.3f", j.GetPof())
		}
		return "-"
	}},
	{"route", func(j *fedschedv1.Job, _ time.Time) string { return orDash(oneLine(routeHuman(j.GetRoute()))) }},
	{"reason", func(j *fedschedv1.Job, _ time.Time) string { return oneLine(jobReason(j)) }},
}

func jobColumnNames() []string {
	names := make([]string, len(jobColumns))
	for i, c := range jobColumns {
		names[i] = c.name
	}
	return names
}

func parseJobColumns(format string) ([]string, error) {
	var cols []string
	for _, c := range strings.Split(format, ",") {
		c = strings.ToLower(strings.TrimSpace(c))
		if c == "" {
			continue
		}
		if !slices.Contains(jobColumnNames(), c) {
			return nil, invalidArg("--format: unknown column %q; want some of %s", c, strings.Join(jobColumnNames(), ","))
		}
		cols = append(cols, c)
	}
	if len(cols) == 0 {
		return nil, invalidArg("--format: no column given; want some of %s", strings.Join(jobColumnNames(), ","))
	}
	return cols, nil
}

// jobReason is what a waiting job waits for, or the reason of its state.
func jobReason(j *fedschedv1.Job) string {
	if w := j.GetWait(); w != nil && j.GetState() == fedschedv1.JobState_JOB_STATE_PENDING {
		return w.GetKind() + ": " + w.GetMessage()
	}
	r := orDash(reasonName(j.GetReason()))
	if j.GetState() == fedschedv1.JobState_JOB_STATE_DELEGATED && j.GetSite() != "" {
		r += " to " + j.GetSite()
	}
	return r
}

// printJobsTable prints one row per job with the chosen columns.
func printJobsTable(w io.Writer, jobs []*fedschedv1.Job, cols []string, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	byName := map[string]jobColumn{}
	for _, c := range jobColumns {
		byName[c.name] = c
	}
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(cols, "\t")))
	for _, j := range jobs {
		cells := make([]string, len(cols))
		for i, c := range cols {
			cells[i] = byName[c].cell(j, now)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

// listAll follows the pages of a listing to its end, or until limit jobs
// (limit 0: no limit).
func listAll(ctx context.Context, c *siteClient, req *fedschedv1.ListJobsRequest, limit int) ([]*fedschedv1.Job, error) {
	var jobs []*fedschedv1.Job
	tokens := map[string]bool{}
	for {
		if limit > 0 {
			req.PageSize = int32(min(limit-len(jobs), maxPageSize))
		}
		resp, err := call(ctx, c, func(ctx context.Context) (*fedschedv1.ListJobsResponse, error) {
			return c.rpc.ListJobs(ctx, req)
		})
		if err != nil {
			return nil, err
		}
		jobs = append(jobs, resp.GetJobs()...)
		if limit > 0 && len(jobs) >= limit {
			return jobs[:limit], nil
		}
		next := resp.GetNextPageToken()
		if next == "" {
			return jobs, nil
		}
		if tokens[next] {
			// A broken server must not keep us here forever.
			return nil, status.Errorf(codes.Internal, "%s: ListJobs returned page token %q twice", c.addr, next)
		}
		tokens[next] = true
		req.PageToken = next
	}
}

// --- cancel ---------------------------------------------------------------

func newCancelCmd() *cobra.Command {
	var (
		f   connFlags
		msg string
	)
	cmd := &cobra.Command{
		Use:   "cancel JOB_ID [--message M]",
		Short: "Cancel a job that has not ended (cancelling a cancelled job changes nothing)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return unary(cmd, &f, func(ctx context.Context, c *siteClient) (*fedschedv1.CancelJobResponse, error) {
				return c.rpc.CancelJob(ctx, &fedschedv1.CancelJobRequest{JobId: args[0], Message: msg})
			}, func(r *fedschedv1.CancelJobResponse) any { return jobView(r.GetJob()) },
				func(w io.Writer, r *fedschedv1.CancelJobResponse) error {
					k := newKV(w)
					j := r.GetJob()
					k.add("id", "%s", j.GetId())
					k.add("state", "%s", orDash(stateName(j.GetState())))
					k.add("reason", "%s", reasonHuman(j.GetReason(), j.GetMessage()))
					return k.flush()
				})
		},
	}
	f.register(cmd, "print the cancelled job as a JSON object")
	cmd.Flags().StringVar(&msg, "message", "", "note recorded with the cancellation")
	return cmd
}

// --- watch ----------------------------------------------------------------

// eventJSON is one line of watch --json.
type eventJSON struct {
	Sequence      uint64  `json:"sequence"`
	Time          *string `json:"time"`
	JobID         string  `json:"job_id"`
	PreviousState string  `json:"previous_state"`
	State         string  `json:"state"`
	Reason        string  `json:"reason"`
	Message       string  `json:"message"`
	Site          string  `json:"site"`
	Job           jobJSON `json:"job"`
}

func newWatchCmd() *cobra.Command {
	var (
		f       connFlags
		initial bool
	)
	cmd := &cobra.Command{
		Use:   "watch [JOB_ID] [--initial]",
		Short: "Stream job state changes (of one job, or of every job of the site) until Ctrl-C",
		Long: `Print one line per state change of the site's jobs (or of one job): time, job
id, previous → new state, reason. --initial first prints the current state
of every live job (PENDING, RUNNING, DELEGATED). Stops on Ctrl-C (exit
status 0) or when the node ends the stream. --timeout bounds connecting,
not the stream.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			req := &fedschedv1.WatchJobsRequest{SendInitial: initial}
			if len(args) == 1 {
				req.JobId = args[0]
			}
			c, err := f.dial(cmd)
			if err != nil {
				return err
			}
			defer c.Close()
			return runWatch(cmd.Context(), c, req, cmd.OutOrStdout(), f.json)
		},
	}
	f.register(cmd, "print one JSON object per event, one per line")
	cmd.Flags().BoolVar(&initial, "initial", false, "start with the current state of every live job")
	return cmd
}

func runWatch(ctx context.Context, c *siteClient, req *fedschedv1.WatchJobsRequest, w io.Writer, asJSON bool) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// --timeout bounds opening the stream (connecting), not its life.
	var timer *time.Timer
	if c.timeout > 0 {
		timer = time.AfterFunc(c.timeout, cancel)
	}
	stream, err := c.rpc.WatchJobs(sctx, req)
	if timer != nil && !timer.Stop() {
		if ctx.Err() != nil {
			return nil // interrupted
		}
		return status.Errorf(codes.DeadlineExceeded, "%s: no stream within %s (--timeout)", c.addr, formatDuration(c.timeout))
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return c.wrap(ctx, err, false)
	}
	lines := &eventPrinter{w: w}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil // the node ended the stream
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil // Ctrl-C: the normal way to stop watching
			}
			return c.wrap(ctx, err, false)
		}
		if asJSON {
			j := ev.GetJob()
			err = emitJSONLine(w, eventJSON{
				Sequence: ev.GetSequence(), Time: tsJSON(ev.GetTime()), JobID: j.GetId(),
				PreviousState: stateName(ev.GetPreviousState()), State: stateName(j.GetState()),
				Reason: reasonName(j.GetReason()), Message: j.GetMessage(), Site: j.GetSite(), Job: jobView(j),
			})
		} else {
			err = lines.event(ev)
		}
		if err != nil {
			return err // stdout is gone (a closed pipe)
		}
	}
}

// eventPrinter prints watch events one line at a time (a stream cannot wait
// for a whole table to align it): fixed-width columns that grow as needed.
type eventPrinter struct {
	w      io.Writer
	widths [3]int
}

func (t *eventPrinter) event(ev *fedschedv1.JobEvent) error {
	j := ev.GetJob()
	prev := stateName(ev.GetPreviousState())
	if prev == "" {
		prev = "-"
	}
	cols := [3]string{tsHuman(ev.GetTime()), oneLine(j.GetId()), prev + " → " + orDash(stateName(j.GetState()))}
	var b strings.Builder
	for i, col := range cols {
		n := utf8.RuneCountInString(col)
		t.widths[i] = max(t.widths[i], n)
		b.WriteString(col)
		b.WriteString(strings.Repeat(" ", t.widths[i]-n+2))
	}
	b.WriteString(reasonHuman(j.GetReason(), oneLine(j.GetMessage())))
	if s := j.GetSite(); s != "" && j.GetState() == fedschedv1.JobState_JOB_STATE_DELEGATED {
		b.WriteString(" (at " + oneLine(s) + ")")
	}
	_, err := fmt.Fprintln(t.w, b.String())
	return err
}

// --- explain --------------------------------------------------------------

// explainJSON is the --json output of explain.
type explainJSON struct {
	ID          string           `json:"id"`
	State       string           `json:"state"`
	Site        string           `json:"site"`
	OriginSite  string           `json:"origin_site"`
	Summary     string           `json:"summary"`
	Reasons     []string         `json:"reasons"`
	Reservation *reservationJSON `json:"reservation"`
	PoF         float64          `json:"pof"`
	PoFMax      float64          `json:"pof_max"`
	Route       []hopJSON        `json:"route"`
	History     []transitionJSON `json:"history"`
	Job         jobJSON          `json:"job"`
}

func newExplainCmd() *cobra.Command {
	var f connFlags
	cmd := &cobra.Command{
		Use:   "explain JOB_ID",
		Short: "Tell why a job is where it is: reasons, reservation, PoF, route and history",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return unary(cmd, &f, func(ctx context.Context, c *siteClient) (*fedschedv1.ExplainResponse, error) {
				return c.rpc.Explain(ctx, &fedschedv1.ExplainRequest{JobId: args[0]})
			}, func(r *fedschedv1.ExplainResponse) any { return explainView(r) }, printExplain)
		},
	}
	f.register(cmd, "print the explanation as a JSON object")
	return cmd
}

func explainReservation(r *fedschedv1.ExplainResponse) *fedschedv1.Reservation {
	if res := r.GetReservation(); res != nil {
		return res
	}
	return r.GetJob().GetReservation()
}

func explainView(r *fedschedv1.ExplainResponse) explainJSON {
	j := r.GetJob()
	reasons := make([]string, 0, len(r.GetReasons()))
	for _, x := range r.GetReasons() {
		reasons = append(reasons, reasonName(x))
	}
	return explainJSON{
		ID: j.GetId(), State: stateName(j.GetState()), Site: j.GetSite(), OriginSite: j.GetOriginSite(),
		Summary: r.GetSummary(), Reasons: reasons, Reservation: reservationView(explainReservation(r)),
		PoF: r.GetPof(), PoFMax: r.GetPofMax(), Route: routeView(j.GetRoute()), History: historyView(j.GetHistory()),
		Job: jobView(j),
	}
}

func printExplain(w io.Writer, r *fedschedv1.ExplainResponse) error {
	j := r.GetJob()
	if s := strings.TrimSpace(r.GetSummary()); s != "" {
		fmt.Fprintf(w, "%s\n\n", s)
	}
	k := newKV(w)
	k.add("id", "%s", j.GetId())
	k.add("state", "%s", orDash(stateName(j.GetState())))
	var reasons []string
	for _, x := range r.GetReasons() {
		reasons = append(reasons, reasonName(x))
	}
	k.add("reasons", "%s", orDash(strings.Join(reasons, ", ")))
	if msg := j.GetMessage(); msg != "" {
		k.add("message", "%s", msg)
	}
	k.add("site", "%s", orDash(j.GetSite()))
	if o := j.GetOriginSite(); o != "" && o != j.GetSite() {
		k.add("origin site", "%s", o)
	}
	k.add("reservation", "%s", reservationHuman(explainReservation(r)))
	k.add("pof", "%s", pofHuman(r))
	if wt := j.GetWait(); wt != nil {
		k.add("waits for", "%s (%s)", wt.GetMessage(), wt.GetKind())
	}
	if o := outcomeName(j.GetSlaOutcome()); o != "" {
		k.add("sla", "%s", o)
	}
	if err := k.flush(); err != nil {
		return err
	}
	if as := j.GetQuoteAnswers(); len(as) > 0 {
		fmt.Fprintln(w, "\npeers asked for a quote:")
		if err := printAnswersTable(w, as); err != nil {
			return err
		}
	}
	if len(j.GetRoute()) > 0 {
		fmt.Fprintln(w, "\nroute:")
		if err := printRouteTable(w, j.GetRoute()); err != nil {
			return err
		}
	}
	fmt.Fprintln(w, "\nhistory:")
	return printHistoryTable(w, j.GetHistory())
}

// pofHuman says what the job's probability of failure means: a PoF is
// compared with the threshold only for an overbooked job; a risk rejection
// has no accepted PoF to show.
func pofHuman(r *fedschedv1.ExplainResponse) string {
	j := r.GetJob()
	switch {
	case j.GetReason() == fedschedv1.Reason_REASON_REJECTED_RISK && j.GetState() == fedschedv1.JobState_JOB_STATE_REJECTED:
		if r.GetPofMax() > 0 {
			return fmt.Sprintf("- (rejected: every gap in the job's window was too risky for the acceptance test, pof_max %.4g)", r.GetPofMax())
		}
		return "- (rejected: every gap in the job's window was too risky for the acceptance test)"
	case j.GetOverbooked() && r.GetPofMax() > 0:
		verdict := "within"
		if r.GetPof() > r.GetPofMax() {
			verdict = "above"
		}
		return fmt.Sprintf("%.4g (overbooked; pof_max %.4g: %s)", r.GetPof(), r.GetPofMax(), verdict)
	case j.GetOverbooked() || r.GetPof() > 0:
		return fmt.Sprintf("%.4g (overbooked)", r.GetPof())
	case j.GetReservation() != nil:
		return "0 (reserved for its full estimate)"
	}
	return "-"
}

// printAnswersTable prints every peer's answer to a request for a quote.
func printAnswersTable(w io.Writer, as []*fedschedv1.QuoteAnswer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tPEER\tANSWER\tPRICE\tDETAIL")
	for _, a := range as {
		ans, price := "offered", fmt.Sprintf("%.2f", a.GetPrice())
		if !a.GetOffered() {
			ans, price = "refused: "+orDash(reasonName(a.GetRefusal())), "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", tsHuman(a.GetTime()), orDash(oneLine(a.GetPeerSite())), ans, price, oneLine(a.GetMessage()))
	}
	return tw.Flush()
}
