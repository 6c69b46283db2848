package node

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// wireFed runs site agents whose messages go through the wire codec and
// protobuf encoding, as RPCs would carry them (no network): every request
// is answered at once by the Step of the peer it is for.
type wireFed struct {
	t      *testing.T
	agents map[string]*site.Agent
	wires  map[string]agentWire
	log    []site.Decision
	sites  map[site.JobKey][]string // where each decision about a job was made
	down   map[string]bool          // transport failures to these sites
	names  []string                 // the sites, in the order they tick
}

func (f *wireFed) candidates(self string) site.PeerView {
	return wireView{f: f, self: self}
}

type wireView struct {
	f    *wireFed
	self string
}

func (v wireView) Candidates(now int64) []delegation.Candidate {
	var out []delegation.Candidate
	for _, n := range v.f.names {
		if n == v.self {
			continue
		}
		a := v.f.agents[n]
		o := a.Site().Outlook(now, 3600, 4*3600, 24*3600)
		out = append(out, delegation.Candidate{Site: n, Procs: a.Site().Config().Procs, FreeNow: o[0], Free1h: o[1], Free4h: o[2], Free24h: o[3]})
	}
	return out
}

// reencode is m through protobuf's wire format.
func reencode[T proto.Message](t *testing.T, m T) T {
	t.Helper()
	if any(m) == nil {
		return m
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	out := m.ProtoReflect().New().Interface().(T)
	if err := proto.Unmarshal(b, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// flush carries out what name's agent decided and sent, until nothing is
// left.
func (f *wireFed) flush(name string, now int64) {
	r := f.agents[name].Ready()
	for _, d := range r.Decisions {
		f.log = append(f.log, d)
		f.sites[d.Job] = append(f.sites[d.Job], name+":"+d.Kind.String())
	}
	for _, m := range r.Messages {
		if answerKind(m.Kind) == 0 && m.Kind != site.KindRelease {
			f.t.Fatalf("%s sent the answer %v outside a request's Step", name, m.Kind)
		}
		f.call(name, m, now)
	}
}

// call sends request m from name as its RPC and Steps the answer back.
func (f *wireFed) call(name string, m site.Message, now int64) {
	t := f.t
	method, req, err := f.wires[name].request(m)
	if err != nil {
		t.Fatal(err)
	}
	req = reencode(t, req)
	var resp proto.Message
	var rerr error
	if f.down[m.To] {
		rerr = ToStatus(fmt.Errorf("site %s unreachable: %w", m.To, ErrUnavailable))
	} else {
		pm, err := f.wires[m.To].step(req, now)
		if err != nil {
			t.Fatalf("%s %v: %v", method, m.Kind, err)
		}
		if pm.Kind != m.Kind || pm.Job != m.Job && m.Kind != site.KindQueueRequest || pm.From != name {
			t.Fatalf("%s: sent %v %v from %s, stepped %v %v from %s", method, m.Kind, m.Job, name, pm.Kind, pm.Job, pm.From)
		}
		peer := f.agents[m.To]
		peer.Step(now, pm)
		// The peer's batch: its answer goes back as the response, the
		// rest is carried out as usual.
		r := peer.Ready()
		resp, rerr = f.wires[m.To].response(pm, r.Messages, now)
		if rerr != nil {
			rerr = ToStatus(rerr)
		} else if resp != nil {
			resp = reencode(t, resp)
		}
		want := answerKind(pm.Kind)
		for _, d := range r.Decisions {
			f.log = append(f.log, d)
			f.sites[d.Job] = append(f.sites[d.Job], m.To+":"+d.Kind.String())
		}
		for _, o := range r.Messages {
			if o.Kind != want {
				f.call(m.To, o, now)
			}
		}
	}
	if a, ok := f.wires[name].answer(m, m.To, resp, rerr); ok {
		f.agents[name].Step(now, a)
		f.flush(name, now)
	}
}

func newWireFed(t *testing.T, transfer delegation.TransferMode) *wireFed {
	f := emptyWireFed(t, "o", "p")
	for _, c := range []site.Config{{Name: "o", Procs: 2, Policy: plan.EASY}, {Name: "p", Procs: 16, Policy: plan.EASY}} {
		c.Peers, c.Transfer = f.candidates(c.Name), transfer
		a, err := site.New(c)
		if err != nil {
			t.Fatal(err)
		}
		f.agents[c.Name], f.wires[c.Name] = a, agentWire{site: c.Name}
	}
	return f
}

// emptyWireFed is a wireFed of the named sites, their agents still to be
// made (with f.candidates(name) as their PeerView).
func emptyWireFed(t *testing.T, names ...string) *wireFed {
	return &wireFed{t: t, agents: map[string]*site.Agent{}, wires: map[string]agentWire{}, sites: map[site.JobKey][]string{}, down: map[string]bool{}, names: names}
}

func (f *wireFed) tick(now int64) {
	for _, n := range f.names {
		if f.agents[n].NextWake(now) <= now {
			f.agents[n].Tick(now)
			f.flush(n, now)
		}
	}
}

func (f *wireFed) submit(now, id int64, procs int, est int64) {
	f.agents["o"].Submit(now, id, plan.Job{Procs: procs, Estimate: est, Release: now, Deadline: plan.Forever})
	f.flush("o", now)
	f.tick(now)
}

func (f *wireFed) want(t *testing.T, k site.JobKey, want string) {
	t.Helper()
	if got := fmt.Sprint(f.sites[k]); got != want {
		t.Fatalf("decisions about %v: %s, want %s", k, got, want)
	}
}

// TestAgentWireDelegates: a job an ACF origin cannot start goes to the
// peer over the wire (quote, agree), runs there, and its report comes
// back; a cancelled one is terminated there. Every message goes through
// its RPC's request and response, encoded as protobuf.
func TestAgentWireDelegates(t *testing.T) {
	f := newWireFed(t, delegation.ACF)
	f.submit(0, 1, 2, 1000) // runs at o
	f.submit(0, 2, 2, 1000) // o is full: to p
	f.want(t, site.JobKey{Site: "o", ID: 2}, "[o:offer o:agree p:accept o:delegate p:start]")
	f.agents["p"].End(500, site.JobKey{Site: "o", ID: 2}, true)
	f.flush("p", 500)
	f.want(t, site.JobKey{Site: "o", ID: 2}, "[o:offer o:agree p:accept o:delegate p:start p:end p:report o:outcome p:acked]")
	if h := f.agents["o"].History()["p"]; h.Jobs != 1 {
		t.Fatalf("the origin's history of p: %+v", h)
	}
	for _, d := range f.log {
		// The peer's accept carries the route the quote request carried.
		if d.Kind == site.DecideAccept && d.Peer == "o" && (len(d.Route) != 2 || d.Route[0].Site != "o" || d.Route[0].Action != delegation.ActionSubmitted || !d.Route.WasAt("p")) {
			t.Fatalf("the peer's route: %+v", d.Route)
		}
	}

	f.submit(600, 3, 2, 1000)
	k3 := site.JobKey{Site: "o", ID: 3}
	f.agents["o"].Cancel(700, k3)
	f.flush("o", 700)
	f.want(t, k3, "[o:offer o:agree p:accept o:delegate p:start o:cancel o:terminate p:cancel p:kill o:acked]")
	f.agents["p"].End(701, k3, false)
	f.flush("p", 701)
	for _, d := range f.log {
		if d.Kind == site.DecideOutcome && d.Job == k3 && (!d.Outcome.Cancelled || d.Outcome.Start != 600 || d.Outcome.End != 701) {
			t.Fatalf("the outcome of the cancelled job: %+v", d.Outcome)
		}
	}
	if f.agents["o"].Busy() && len(f.sites[k3]) == 0 {
		t.Fatal("nothing decided")
	}
}

// TestAgentWireFailures: a transport failure is no answer (the agent
// gives up on the peer after its reply period); a refused agree is an
// answer with its reason, and the origin keeps the job.
func TestAgentWireFailures(t *testing.T) {
	f := newWireFed(t, delegation.ACF)
	f.submit(0, 1, 2, 1000)
	f.down["p"] = true
	f.submit(0, 2, 2, 1000)
	k2 := site.JobKey{Site: "o", ID: 2}
	f.want(t, k2, "[o:offer]")
	f.tick(60) // the reply period is over: the job waits at home
	f.want(t, k2, "[o:offer o:accept]")
	if h := f.agents["o"].History()["p"]; h.Failures != 1 {
		t.Fatalf("history of p: %+v", h)
	}

	// An agree the peer no longer has a hold for.
	w := f.wires["p"]
	m := site.Message{Kind: site.KindAgree, From: "o", To: "p", Job: site.JobKey{Site: "o", ID: 9}}
	_, req, _ := f.wires["o"].request(m)
	pm, err := w.step(reencode(t, req), 0)
	if err != nil {
		t.Fatal(err)
	}
	f.agents["p"].Step(0, pm)
	_, rerr := w.response(pm, f.agents["p"].Ready().Messages, 0)
	if !errors.Is(rerr, ErrJobFinished) {
		t.Fatalf("a refused agree: %v", rerr)
	}
	a, ok := f.wires["o"].answer(m, "p", nil, ToStatus(rerr))
	if !ok || a.Kind != site.KindAgreed || a.Offer != nil || a.Reason == "" {
		t.Fatalf("the origin's answer to a refused agree: %+v %v", a, ok)
	}
	if _, ok := f.wires["o"].answer(m, "p", nil, ToStatus(fmt.Errorf("x: %w", ErrUnavailable))); ok {
		t.Fatal("a transport failure answered the agree")
	}
}

// TestAgentWireIDs: job, hold and agreement ids parse back to their keys,
// and malformed ones are refused.
func TestAgentWireIDs(t *testing.T) {
	for _, k := range []site.JobKey{{Site: "a", ID: 1}, {Site: "site.with.dots", ID: 123456789012}} {
		if got, err := keyOfID(wireID(k)); err != nil || got != k {
			t.Fatalf("%v: %v %v", k, got, err)
		}
		if got, err := keyOfHold(k.String()); err != nil || got != k {
			t.Fatalf("%v: %v %v", k, got, err)
		}
	}
	for _, bad := range []string{"", "a", ".1", "a.x", "a.0", "a/", "/1", "a/-1"} {
		_, e1 := keyOfID(bad)
		_, e2 := keyOfHold(bad)
		if e1 == nil && e2 == nil {
			t.Fatalf("%q parsed", bad)
		}
	}
}

// TestAgentWireRefusal: a quote the agent refuses has the node's reason
// code for its refusal.
func TestAgentWireRefusal(t *testing.T) {
	f := newWireFed(t, delegation.ACF)
	w := f.wires["p"]
	m := site.Message{Kind: site.KindQuoteRequest, From: "o", To: "p", Job: site.JobKey{Site: "o", ID: 1}, Spec: plan.Job{Procs: 64, Estimate: 10, Deadline: plan.Forever},
		Route: delegation.Route{{Site: "o", Action: delegation.ActionSubmitted}}}
	_, req, _ := f.wires["o"].request(m)
	pm, err := w.step(reencode(t, req), 0)
	if err != nil {
		t.Fatal(err)
	}
	f.agents["p"].Step(0, pm)
	resp, err := w.response(pm, f.agents["p"].Ready().Messages, 0)
	if err != nil {
		t.Fatal(err)
	}
	if r := resp.(*fedschedv1.QuoteResponse); r.GetRefusal() != fedschedv1.Reason_REASON_REJECTED_TOO_WIDE || r.GetOffer() != nil {
		t.Fatalf("a too-wide job's refusal: %v", r)
	}
}

// TestAgentWireRQF: an idle peer takes a waiting job from the origin's
// queue over the wire (queue request, queue, take), and the hand-over is
// two-phase as a node's: the Take's response is empty, and the origin
// agrees to the taker's hold with its own Agree RPC, whose agreed makes
// the job the taker's. A refused take comes back as the Take's error
// (taken, with its reason), and the taker's hold goes.
func TestAgentWireRQF(t *testing.T) {
	f := newWireFed(t, delegation.RQF)
	o := f.agents["o"]
	o.Submit(0, 1, plan.Job{Procs: 2, Estimate: 1000, Deadline: plan.Forever})
	o.Submit(0, 2, plan.Job{Procs: 2, Estimate: 1000, Deadline: plan.Forever})
	f.flush("o", 0)
	f.tick(0)
	w := f.agents["p"].NextWake(0)
	f.tick(w) // the idle peer's round, on its grid
	f.tick(w) // its pass starts what it took
	k2 := site.JobKey{Site: "o", ID: 2}
	f.want(t, k2, "[o:accept o:agree p:accept o:delegate p:start]")
	for _, d := range f.log {
		if d.Kind == site.DecideAccept && d.Job == k2 && d.Peer == "o" {
			if len(d.Route) < 3 || d.Route[0].Action != delegation.ActionSubmitted || d.Route.Hops() != 1 || !d.Route.WasAt("p") {
				t.Fatalf("the taker's route: %+v", d.Route)
			}
		}
	}

	// The take's response and its answer, alone.
	take := site.Message{Kind: site.KindTake, From: "p", To: "o", Job: k2}
	agree := site.Message{Kind: site.KindAgree, From: "o", To: "p", Job: k2}
	resp, err := f.wires["o"].response(take, []site.Message{agree}, w)
	if r, ok := resp.(*fedschedv1.TakeResponse); err != nil || !ok || proto.Size(r) != 0 {
		t.Fatalf("a take answered by an agree: %v, %v; want an empty TakeResponse", resp, err)
	}
	if a, ok := f.wires["p"].answer(take, "o", reencode(t, resp), nil); ok {
		t.Fatalf("an accepted take Steps %+v; its answer is the agree", a)
	}
	if method, req, err := f.wires["o"].request(agree); err != nil || method != "Agree" || req.(*fedschedv1.AgreeRequest).GetHoldId() != k2.String() {
		t.Fatalf("the hand-over's agree goes as %s %v (%v), want Agree to hold %s", method, req, err, k2)
	}
	// The taker's hold is new at every take: the agree names it, and so
	// does its refusal (a late one must not settle a later hand-over).
	agree.HoldID = "o/2#7"
	if _, req, err := f.wires["o"].request(agree); err != nil || req.(*fedschedv1.AgreeRequest).GetHoldId() != agree.HoldID {
		t.Fatalf("the agree to hold %s goes as %v (%v)", agree.HoldID, req, err)
	} else if m, err := f.wires["p"].step(reencode(t, req), w); err != nil || m.Job != k2 || m.HoldID != agree.HoldID {
		t.Fatalf("the agree to hold %s comes as %+v (%v)", agree.HoldID, m, err)
	}
	if a, ok := f.wires["o"].answer(agree, "p", nil, ToStatus(fmt.Errorf("no hold: %w", ErrJobFinished))); !ok || a.Kind != site.KindAgreed || a.Offer != nil || a.HoldID != agree.HoldID {
		t.Fatalf("the refused agree to hold %s: %+v", agree.HoldID, a)
	}

	// A take of a job that does not wait at the origin.
	p := f.agents["p"]
	k9 := site.JobKey{Site: "o", ID: 9}
	p.Step(w, site.Message{Kind: site.KindQueue, From: "o", To: "p", Jobs: []site.QueuedJob{{Job: k9,
		Spec: plan.Job{Procs: 2, Estimate: 100, Deadline: plan.Forever}, Route: delegation.Route{{Site: "o", Action: delegation.ActionSubmitted}}}}})
	if p.Site().Holds() != 1 {
		t.Fatalf("the taker holds %d slots, want 1", p.Site().Holds())
	}
	f.flush("p", w) // the take, refused over the wire
	if p.Site().Holds() != 0 {
		t.Fatal("the refused take's hold stays at the taker")
	}
}

// TestAgentWireOffer: an offer's flags and an open end survive the wire.
func TestAgentWireOffer(t *testing.T) {
	for _, o := range []site.Offer{
		{Quote: delegation.Quote{Site: "p", HoldID: "o/1", Start: 10, End: 20, PoF: 0.2, Price: 3, Expires: 70}, Overbooked: true},
		{Quote: delegation.Quote{Site: "p", HoldID: "o/2", Start: 10, End: plan.Forever, Expires: 70}, Queued: true},
	} {
		got := agentOffer(reencode(t, wireOffer(&o)))
		if *got != o {
			t.Fatalf("%+v came back as %+v", o, *got)
		}
	}
}
