// Package discovery lets the sites of a federation find each other: each
// site gossips a compact capability digest with hashicorp/memberlist, and
// learns which sites exist, how to reach their gRPC API, and roughly how
// much room they have.
//
// Gossip is a hint; a quote is a promise. Nothing in this package is a
// reason to delegate a job: it only tells a site whom to ask for a quote,
// and, through a Prober, whether a site gossip gave up on is really gone.
//
// # Basics
//
// A [Digest] is what a site says about itself: site id, gRPC address,
// processors, queue policy, free processors now and in 1, 4 and 24 hours,
// whether it overbooks, when it changed, and the protocol version it speaks.
// It travels as memberlist node metadata in a versioned binary encoding of
// at most [MaxDigestSize] bytes (265), about half of memberlist's 512-byte
// limit. Its first byte is the encoding version; a digest with a version
// this code does not know fails to decode with [ErrUnknownVersion], and the
// member shows it in Member.DigestErr.
//
// A [Membership] is one site's membership:
//
//	cfg := discovery.DefaultConfig()
//	cfg.NodeName = "site-a"
//	cfg.Seeds = []string{"10.0.0.2:7946"}
//	m, err := discovery.New(cfg, site.Digest) // starts memberlist's listeners
//	...
//	n, err := m.Join(nil)                      // Config.Seeds; retry later if 0
//	go m.Run(ctx)                              // refresh the digest, rejoin if alone
//	for ev := range m.Events() { ... }         // SiteJoined, SiteLeft, SiteUpdated
//	...
//	m.Leave(5 * time.Second)                   // peers see Left, not Dead
//	m.Shutdown()                               // stops the listeners, closes Events
//
// [Membership.Members] lists every site known, the local one included,
// sorted by name, with its gossip state ([Alive], [Dead], [Left]) and its
// digest; a site that is leaving says so in its digest (Digest.Leaving)
// before it goes. [Membership.Update] re-advertises the local digest after the site
// changed it; it does nothing if the digest did not change.
// [Membership.Events] delivers changes on a buffered channel that never
// blocks memberlist: when it is full, events are dropped and counted
// ([Membership.DroppedEvents]), and the reader should resynchronise from
// Members.
//
// # Dead peers
//
// Gossip marks a site Dead when memberlist's probes have failed for a
// while; that may be a partition of the gossip network while the site's
// gRPC API is fine. The rule: a member gossip marks Suspect or Dead is
// unconfirmed until a probe of its gRPC address fails. [Confirm] applies it
// to one member with a [Prober] (the node's gRPC health check), [Classify]
// to a list, sorting the members into Reachable (may be asked for quotes),
// Unconfirmed (wait) and Down (may be acted on: the site may re-place the
// work it delegated there); [Membership.Reachable] is the common case. None
// of them start goroutines that outlive the call; the caller decides when to
// check.
//
// # Tests and partitions
//
// [DefaultLocalConfig] binds 127.0.0.1 with an OS-assigned port and
// memberlist's local timers; [Membership.LocalAddr] returns the port
// assigned. [PartitionTransport] wraps a transport from [NewNetTransport] and
// drops traffic to blocked addresses at runtime; [Cut] and [Mend] cut and
// restore the link between two sites.
//
// # Caveats
//
//   - memberlist.Create, called by New, starts memberlist's goroutines (UDP
//     and TCP listeners, probe, gossip and push/pull timers); they run until
//     Shutdown. Leave must come before Shutdown; after it, it returns
//     ErrShutdown.
//   - The view of members is built from memberlist's event callbacks, the
//     only place memberlist lets node fields be read without a data race
//     (its Members returns pointers it rewrites in place). memberlist sends
//     no event when a member becomes Suspect, so Members never reports
//     [Suspect]: a member goes from Alive to Dead when the suspicion
//     timeout expires. Confirm and Classify treat Suspect like Dead should a
//     caller build such a Member itself.
//   - memberlist's leave callback does not say whether a member left or
//     died (memberlist.Node.State is never set). A member is reported Left
//     when its last digest had Leaving set, which Membership.Leave
//     advertises, and pushes to every peer over TCP, before memberlist's
//     leave message; a peer that still misses it reports the member Dead,
//     and Confirm's probe then finds it down.
//   - Members that left or died stay in the view, with their last digest,
//     until they come back; the view is not pruned.
//   - A site that died cannot rejoin under its name at another address
//     until the others forget it, unless Config.ReclaimAfter is set; one
//     that Left can.
//   - Dead is also reported for a site whose gossip is blocked by a
//     firewall or whose key differs: gossip encryption (Config.SecretKey)
//     must be the same everywhere. Key rotation (memberlist's Keyring) is
//     not exposed.
//   - The digest's free-capacity outlook is only as fresh as the last
//     Update that changed it; sites should round it (it is coarse by
//     design) so that Update is not a broadcast per job.
package discovery
