package node

import (
	"fmt"

	"github.com/fedsched/fedsched/node/config"
	"github.com/fedsched/fedsched/overbook"
)

// statsConfig is the runtime statistics' configuration of a site: classes
// by runtime band, fallback and ageing from the overbooking settings.
func statsConfig(o config.Overbooking) overbook.StatsConfig {
	_, f, k := o.Learning()
	return overbook.StatsConfig{Classifier: overbook.ByRuntime, AgeFactor: f, AgeEvery: k}
}

// seedHistory trains empty runtime statistics on the site's past jobs, an
// SWF file (overbooking.history), in the order they ended. Statistics that
// have learnt anything (a restart) are kept as they are. A job with an
// estimate and a runtime is a sample; one the trace marks cancelled (status
// 5) short of its estimate is censored, as on a live site.
func (n *Node) seedHistory() error {
	path := n.cfg.Overbooking.History
	if path == "" || n.stats.Updates() > 0 {
		return nil
	}
	past, skipped, err := pastJobs(path)
	if err != nil {
		return err
	}
	for _, p := range past {
		if err := n.stats.Record(p.Job, overbook.Observation{Ran: p.Ran, Censored: p.Censored}); err != nil {
			return fmt.Errorf("overbooking.history %s line %d: %w", path, p.Line, err)
		}
	}
	n.pending.stats = true
	n.log.Info("runtime statistics seeded from history", "file", path, "jobs", len(past), "skipped", skipped)
	return nil
}

// samplesText says "1 sample" or "k samples" (aged weights are rounded).
func samplesText(k float64) string {
	if s := fmt.Sprintf("%.4g", k); s != "1" {
		return s + " samples"
	}
	return "1 sample"
}
