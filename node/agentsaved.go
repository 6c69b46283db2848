package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/fedsched/fedsched/delegation"
	"github.com/fedsched/fedsched/node/store"
	"github.com/fedsched/fedsched/plan"
	fedschedv1 "github.com/fedsched/fedsched/proto/fedsched/v1"
	"github.com/fedsched/fedsched/site"
)

// savedFromStore reads what today's node keeps in its store as the site
// agent's site.Saved (the switch's recovery step, docs/architecture.md
// "The node as the agent's driver"): a restarted node rebuilds its
// agent with site.Restore(agentConfig, now, saved) instead of recover's
// own core. It maps:
//
//   - PENDING jobs with a reservation (or queued) to waiting jobs, RUNNING
//     jobs, and CANCELLED ones still running, to running jobs, in id order
//     (the queue order a node's recovery gives too);
//   - jobs being delegated (PENDING, reason DELEGATED) to jobs being
//     offered, or agreeing with the peer their route names;
//   - DELEGATED jobs to delegated jobs awaiting their report (a Terminate
//     owed when their agreement still has one pending);
//   - peers' agreements with an outcome pending to owed reports;
//   - operators' fixed reservations, the runtime statistics, and the id
//     counter (the highest sequence number of a job or agreement).
//
// What a node does not keep is not in it: the peer histories (a node
// keeps them in memory only), when an owed message became owed (resent
// from the restart), and the local end an offer had to beat (any quote
// does, as recoverInflight). The standing rules are the store's, their
// instances laid again by Restore.
func savedFromStore(ctx context.Context, st store.Store, self string) (*site.Saved, error) {
	s := &site.Saved{PulledAt: site.NeverPulled, History: map[string]delegation.History{}, Jobs: map[site.JobKey]*site.SavedJob{},
		Reports: map[site.JobKey]site.OwedReport{}, Reservations: map[int64]plan.FixedSpec{}, Standing: map[string]plan.Standing{}}
	rules, err := st.ListStanding(ctx)
	if err != nil {
		return nil, err
	}
	for _, rec := range rules {
		s.Standing[rec.ID] = newStanding(rec).rule
	}
	if blob, err := st.GetStats(ctx, statsBlob); err == nil {
		s.Stats = blob
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	var recs []store.JobRecord
	for token := ""; ; {
		page, next, err := st.ListJobs(ctx, store.JobQuery{PageSize: store.MaxPageSize, PageToken: token})
		if err != nil {
			return nil, err
		}
		recs = append(recs, page...)
		if next == "" {
			break
		}
		token = next
	}
	slices.SortFunc(recs, func(a, b store.JobRecord) int { return compareIDs(a.ID(), b.ID()) })
	agreements, err := st.ListAgreements(ctx)
	if err != nil {
		return nil, err
	}
	byJob := map[string]*agreementRec{}
	for _, r := range agreements {
		var a agreementRec
		if err := json.Unmarshal(r.Body, &a); err != nil {
			return nil, fmt.Errorf("stored agreement %s: %w", r.ID, err)
		}
		s.Seq = max(s.Seq, a.Seq)
		switch {
		case a.Role == roleOrigin:
			byJob[a.JobID] = &a
		case a.Role == rolePeer && a.Pending == "outcome":
			k, err := keyOfID(a.JobID)
			if err != nil {
				return nil, fmt.Errorf("stored agreement %s: %w", r.ID, err)
			}
			var j fedschedv1.Job
			if err := unmarshalJob(a.PeerJob, &j); err != nil {
				return nil, fmt.Errorf("stored agreement %s: %w", r.ID, err)
			}
			s.Reports[k] = site.OwedReport{Outcome: agentOutcome(&j), Since: a.Updated}
		}
	}
	order := int64(0)
	for _, rec := range recs {
		j := rec.Job
		seq, own := seqOf(self, j.GetId())
		if !own {
			continue
		}
		s.Seq = max(s.Seq, int64(seq))
		key := site.JobKey{Site: self, ID: int64(seq)}
		if o := j.GetOriginSite(); o != "" && o != self {
			a, ok := byJobAt(agreements, j.GetId())
			if !ok {
				continue
			}
			if key, err = keyOfID(a.JobID); err != nil {
				return nil, err
			}
		}
		pj := planJob(j.GetSpec(), int64(seq), j.GetSubmitTime().AsTime().Unix())
		sj := &site.SavedJob{Key: key, Spec: pj, Route: agentRoute(j.GetRoute())}
		if key.Site != self {
			sj.Peer = key.Site
			if a, ok := byJobAt(agreements, j.GetId()); ok {
				sj.HoldID = a.Quote.HoldID // a repeated agree names it
			}
		}
		if r := j.GetReservation(); r != nil {
			sj.Placement = plan.Placement{Start: r.GetStart().AsTime().Unix(), End: r.GetEnd().AsTime().Unix(), PoF: j.GetPof(), Reason: plan.ReasonPlacedInFull}
			if j.GetOverbooked() {
				sj.Placement.Reason = plan.ReasonOverbooked
			}
		} else {
			sj.Placement = plan.Placement{Reason: plan.ReasonQueued}
		}
		state := j.GetState()
		switch {
		case state == fedschedv1.JobState_JOB_STATE_PENDING && j.GetReason() == fedschedv1.Reason_REASON_DELEGATED:
			sj.Phase = site.PhaseOffering
			sj.Offer = site.OfferDecision{Offer: true, LocalEnd: plan.Forever, StartNow: j.GetMessage() == acfOffering}
			for _, h := range j.GetRoute() {
				if h.GetSite() == self && h.GetReason() == fedschedv1.Reason_REASON_DELEGATED && h.GetPeerSite() != "" {
					// An agree written ahead: to a quote, or to the hold
					// of an RQF taker (the hop marked taken).
					sj.Phase, sj.Peer, sj.HandOver, sj.HoldID = site.PhaseAgreeing, h.GetPeerSite(), h.GetTaken(), h.GetHoldId()
				}
			}
			if sj.Phase == site.PhaseAgreeing && !sj.HandOver {
				sj.Price = quotedPrice(j, sj.Peer)
			}
		case state == fedschedv1.JobState_JOB_STATE_PENDING:
			order++
			sj.Phase, sj.Order = site.PhaseWaiting, order
		case state == fedschedv1.JobState_JOB_STATE_RUNNING,
			state == fedschedv1.JobState_JOB_STATE_CANCELLED && j.GetStartTime() != nil && j.GetEndTime() == nil:
			order++
			sj.Phase, sj.Order = site.PhaseRunning, order
			// The run's slot is the reservation it started in, as the
			// agent's start decided it and the node's recovery restores
			// it: the start time the record shows may be a second or so
			// later (the turn's commit came first), past the end of a
			// slot that short.
			sj.Start, sj.End = sj.Placement.Start, sj.Placement.End
			sj.Cancelled = state == fedschedv1.JobState_JOB_STATE_CANCELLED
		case state == fedschedv1.JobState_JOB_STATE_DELEGATED, state == fedschedv1.JobState_JOB_STATE_CANCELLED:
			a := byJob[j.GetId()]
			if a == nil || a.State == delegation.Complete || a.State == delegation.Terminated {
				continue // settled
			}
			sj.Phase, sj.Peer = site.PhaseDelegated, a.Peer
			sj.Cancelled = state == fedschedv1.JobState_JOB_STATE_CANCELLED
			sj.Terminate, sj.TerminateSince = a.Pending == "terminate", a.Updated
		default:
			continue
		}
		s.Jobs[key] = sj
	}
	res, err := st.ListReservations(ctx)
	if err != nil {
		return nil, err
	}
	id := int64(0)
	for _, r := range res {
		if r.Fixed {
			id--
			s.Reservations[id] = plan.FixedSpec{ID: id, Name: r.ID, Procs: r.Procs, Start: r.Start.Unix(), End: r.End.Unix()}
			s.FixedSeq = id
		}
	}
	return s, nil
}

// quotedPrice is the price of peer's last offer for j, as the record's
// quote answers keep it: the price a restored agree agreed to (the intent
// hop names the peer, not the price). The agreed slot is kept nowhere:
// the delegation takes the peer's from its report (settleReport).
func quotedPrice(j *fedschedv1.Job, peer string) float64 {
	qa := j.GetQuoteAnswers()
	for i := len(qa) - 1; i >= 0; i-- {
		if qa[i].GetPeerSite() == peer && qa[i].GetOffered() {
			return qa[i].GetPrice()
		}
	}
	return 0
}

func unmarshalJob(b []byte, j *fedschedv1.Job) error { return proto.Unmarshal(b, j) }

// byJobAt finds the peer agreement under which job id (this site's id of
// a peer's job) runs here.
func byJobAt(recs []store.AgreementRecord, id string) (*agreementRec, bool) {
	for _, r := range recs {
		var a agreementRec
		if json.Unmarshal(r.Body, &a) == nil && a.Role == rolePeer && a.PeerJobID == id {
			return &a, true
		}
	}
	return nil, false
}
