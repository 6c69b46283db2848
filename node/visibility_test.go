package node

import (
	"reflect"
	"testing"

	"github.com/fedsched/fedsched/node/auth"
)

// TestSeenBy: what a user sees of a site's snapshot (docs/security.md,
// "What a user sees"), against the whole snapshot that operators, sites
// and insecure callers get.
func TestSeenBy(t *testing.T) {
	wait := &WaitReason{Kind: "resources", Message: "behind x"}
	snap := &SiteSnapshot{Site: "a", Procs: 8, Free: 1, Running: 2, Pending: 1,
		Entries: []PlanEntry{
			{Kind: EntryRunning, ID: "a.1", User: "alice", Procs: 2, Start: 10, End: 20, Estimate: 10},
			{Kind: EntryRunning, ID: "a.2", User: "bob", Procs: 3, Start: 10, End: 30, Estimate: 20, PoF: 0.1, Overbooked: true},
			{Kind: EntryPending, ID: "a.3", User: "bob", Procs: 4, Start: 30, End: 40, Estimate: 10, Wait: wait},
			{Kind: EntryHold, ID: "h.1", Name: "c", Procs: 1, Start: 20, End: 25, Estimate: 5},
			{Kind: EntryFixed, ID: "r.1", Name: "maintenance", Procs: 8, Start: 50, End: 60},
			{Kind: EntryDown, ID: "down", Procs: 1, Start: 0, End: 100},
		},
		Queued: []PlanEntry{{Kind: EntryPending, ID: "a.4", User: "bob", Procs: 1}, {Kind: EntryPending, ID: "a.5", User: "alice", Procs: 1}},
		Jobs:   []JobView{{ID: "a.1", User: "alice"}, {ID: "a.2", User: "bob"}, {ID: "a.3", User: "bob"}, {ID: "a.5", User: "alice"}, {ID: "a.6", User: "alice", State: "DELEGATED"}},
		Agreements: []AgreementView{
			{ID: "g.1", Role: roleOrigin, JobID: "a.6", Other: "b"},
			{ID: "g.2", Role: roleOrigin, JobID: "a.7", Other: "b"},
			{ID: "g.3", Role: rolePeer, JobID: "c.9", Other: "c"},
		},
		Peers: []PeerView{{Site: "b"}},
	}
	for _, k := range []auth.Kind{auth.Operator, auth.Site, auth.Insecure} {
		if got := snap.seenBy(auth.Identity{Kind: k, Name: "x"}); got != snap {
			t.Errorf("%v sees a changed snapshot", k)
		}
	}
	got := snap.seenBy(auth.Identity{Kind: auth.User, Name: "alice"})
	want := &SiteSnapshot{Site: "a", Procs: 8, Free: 1, Running: 2, Pending: 1,
		Entries: []PlanEntry{
			snap.Entries[0],
			{Kind: EntryRunning, Procs: 3, Start: 10, End: 30},
			{Kind: EntryPending, Procs: 4, Start: 30, End: 40},
			{Kind: EntryHold, Procs: 1, Start: 20, End: 25},
			snap.Entries[4], snap.Entries[5],
		},
		Queued:     []PlanEntry{snap.Queued[1]},
		Jobs:       []JobView{snap.Jobs[0], snap.Jobs[3], snap.Jobs[4]},
		Agreements: []AgreementView{snap.Agreements[0]},
		Peers:      snap.Peers,
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("alice sees\n%+v\nwant\n%+v", got, want)
	}
	if len(snap.Jobs) != 5 || snap.Entries[1].User != "bob" {
		t.Error("seenBy changed the snapshot it was given")
	}
}
