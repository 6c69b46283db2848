package config

// refuseIneffective reports, through bad, every setting that would have no
// effect in this configuration: a setting works or is refused at start-up
// with a message saying why, never silently ignored.
func (c Config) refuseIneffective(bad func(path, format string, args ...any)) {
	o, def := c.Overbooking, Default().Overbooking
	if o.Enabled && c.Policy != "conservative" {
		bad("overbooking.enabled", "works only with policy conservative: under %s a waiting job holds no reservation until it starts, so there is no gap shorter than its estimate to overbook it into", c.Policy)
	}
	if !o.Enabled {
		if o.Mode != def.Mode {
			bad("overbooking.mode", "needs overbooking.enabled (the site does not overbook)")
		}
		if o.RiskTest != def.RiskTest {
			bad("overbooking.risk_test", "needs overbooking.enabled (the site does not overbook)")
		}
		if o.PoFMax != def.PoFMax {
			bad("overbooking.pof_max", "needs overbooking.enabled (the site does not overbook)")
		}
		if o.SecurityFactor != 0 {
			bad("overbooking.security_factor", "needs overbooking.enabled (the site does not overbook)")
		}
		if o.MinSamples != 0 && o.MinSamples != def.MinSamples {
			bad("overbooking.min_samples", "needs overbooking.enabled (the site does not overbook; its runtime statistics learn anyway)")
		}
	} else if o.SecurityFactor != 0 && o.RiskTest != "risk" {
		bad("overbooking.security_factor", "is used only by risk_test risk (the %s test ignores it)", o.RiskTest)
	} else if o.PoFMax != def.PoFMax && o.RiskTest == "risk" {
		bad("overbooking.pof_max", "is used only by risk_test threshold (the risk test weighs fee and penalty instead)")
	}
	if st := c.Store; !st.Log {
		for _, s := range []struct {
			path string
			set  bool
		}{
			{"store.checkpoint_records", st.CheckpointRecords != 0}, {"store.checkpoint_bytes", st.CheckpointBytes != 0},
			{"store.checkpoint_interval", st.CheckpointInterval != 0},
		} {
			if s.set {
				bad(s.path, "needs store.log (without the log every change goes to the store file itself; there is nothing to checkpoint)")
			}
		}
	}
	if c.Executor == ExecutorSimulated {
		if c.Jobs.AllowRoot {
			bad("executor.allow_root", "has no effect with the simulated executor: it runs no process, under any account")
		}
		if c.Jobs.ServiceAccount != "" {
			bad("executor.service_account", "has no effect with the simulated executor: it runs no process, under any account")
		}
	}
	if c.Gossip.Addr == "" {
		d := c.Delegation
		for _, s := range []struct {
			path string
			set  bool
		}{
			{"delegation.max_candidates", d.MaxCandidates != 0}, {"delegation.quote_timeout", d.QuoteTimeout != 0},
			{"delegation.hold_seconds", d.HoldSeconds != 0}, {"delegation.max_hops", d.MaxHops != 0},
			{"delegation.community_share", d.CommunityShare != 0}, {"delegation.transfer", d.Transfer != ""},
			{"delegation.prefer", len(d.Prefer) > 0}, {"gossip.advertise", c.Gossip.Advertise != ""},
			{"delegation.disclose_queue", d.DiscloseQueue}, {"delegation.pull_interval", d.PullInterval != 0},
			{"delegation.pricing", d.Pricing != (Pricing{})},
		} {
			if s.set {
				bad(s.path, "needs gossip.addr (without it the site runs alone and never delegates)")
			}
		}
	}
}
