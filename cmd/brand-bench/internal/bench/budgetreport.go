package bench

import (
	"fmt"
	"io"
	"strings"
)

// BudgetReport is a budget benchmark's result: budget.json.
type BudgetReport struct {
	Header
	Samples   int     `json:"samples"`
	Bytes     int64   `json:"bytes"`
	Chunks    int     `json:"chunks"`
	Nodes     int     `json:"nodes"`
	BatchSize int     `json:"batch_size"`
	World     int     `json:"world"`
	Window    int     `json:"window"`
	Epochs    int     `json:"epochs"`
	NodeCache int64   `json:"node_cache_bytes"`
	Fraction  float64 `json:"fraction"`
	// Budget is the store's limit and the paced run's budget, GETs a
	// second: Fraction of the unthrottled run's rate.
	Budget  int         `json:"budget"`
	Runs    []BudgetRun `json:"runs"`
	Targets []Target    `json:"targets"`
	Seconds float64     `json:"seconds"`
}

// BudgetRun is one run of the job.
type BudgetRun struct {
	Name   string `json:"name"`
	Round  int    `json:"round"`
	Limit  int    `json:"limit"`  // the front's, GETs a second (0: none)
	Budget int    `json:"budget"` // the nodes' --store-gets-per-sec (0: none)
	Epochs int    `json:"epochs"`
	// From the front: GETs and HEADs sent (Heads of them HEADs), those
	// it throttled, GETs answered a second over the run, and the most
	// answered in one whole second.
	GETs      int64   `json:"gets"`
	Heads     int64   `json:"heads"`
	Throttled int64   `json:"throttled"`
	Rate      float64 `json:"rate"`
	Busiest   int     `json:"busiest_second"`
	// From the ranks: errors that reached them, batches read, and how
	// long a rank waited for each batch (from the last one's arrival).
	Errors  int     `json:"errors"`
	Batches int     `json:"batches"`
	P50     float64 `json:"wait_p50_ms"`
	P99     float64 `json:"wait_p99_ms"`
	// From the nodes: store requests that waited for the budget, and the
	// 503s they met, summed.
	PacedWaits     float64 `json:"paced_waits"`
	NodesThrottled float64 `json:"nodes_throttled"`
	Seconds        float64 `json:"seconds"`
}

// targets are the paced runs' (the worst of the rounds).
func (r *BudgetReport) targets() []Target {
	var out []Target
	worst := func(f func(BudgetRun) float64, higher bool) (float64, bool) {
		v, ok := 0.0, false
		for _, run := range r.Runs {
			if run.Name != budgetPaced {
				continue
			}
			x := f(run)
			if !ok || higher && x > v || !higher && x < v {
				v, ok = x, true
			}
		}
		return v, ok
	}
	b := float64(r.Budget)
	if v, ok := worst(func(run BudgetRun) float64 { return float64(run.Errors) }, true); ok {
		out = append(out, atMost("paced: errors reaching ranks", v, 0))
	}
	if v, ok := worst(func(run BudgetRun) float64 { return float64(run.Throttled) / float64(max(1, run.GETs)) }, true); ok {
		out = append(out, atMost("paced: GETs the store throttled ÷ GETs sent", v, budgetThrottledTarget))
	}
	if v, ok := worst(func(run BudgetRun) float64 { return run.Rate / b }, false); ok {
		out = append(out, atLeast("paced: GETs answered a second ÷ the budget", v, budgetRateTarget))
	}
	if v, ok := worst(func(run BudgetRun) float64 { return float64(run.Busiest) / b }, true); ok {
		out = append(out, atMost("paced: the busiest whole second ÷ the budget", v, budgetSecondTarget))
	}
	return out
}

// WriteText writes the runs as a markdown table, then the targets.
func (r *BudgetReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "The store's budget: %d samples (%s, %d chunks), %d nodes (each node's cache %s), %d ranks of batch %d, window %d, %d epochs a run; the store's limit and the budget %d GETs a second (%.2f of the unthrottled rate)\n\n",
		r.Samples, sizeString(r.Bytes), r.Chunks, r.Nodes, sizeString(r.NodeCache), r.World, r.BatchSize, r.Window, r.Epochs, r.Budget, r.Fraction)
	sb.WriteString("| run | round | GETs sent | throttled by the store | answered a second | ÷ budget | busiest second ÷ budget | errors at ranks | batch wait p50 / p99 ms | paced waits | 503s the nodes saw | s |\n")
	sb.WriteString("| -- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |\n")
	for _, run := range r.Runs {
		ratio, busiest := "", ""
		if r.Budget > 0 && run.Name != budgetFree {
			ratio = fmt.Sprintf("%.2f", run.Rate/float64(r.Budget))
			busiest = fmt.Sprintf("%.2f", float64(run.Busiest)/float64(r.Budget))
		}
		// A node without a budget has no pacer, and counts neither.
		waits, seen := "—", "—"
		if run.Budget > 0 {
			waits, seen = fmt.Sprintf("%.0f", run.PacedWaits), fmt.Sprintf("%.0f", run.NodesThrottled)
		}
		fmt.Fprintf(&sb, "| %s | %d | %d | %d (%.2f %%) | %.0f | %s | %s | %d | %.1f / %.1f | %s | %s | %.1f |\n", run.Name, run.Round, run.GETs, run.Throttled,
			100*float64(run.Throttled)/float64(max(1, run.GETs)), run.Rate, ratio, busiest, run.Errors, run.P50, run.P99, waits, seen, run.Seconds)
	}
	sb.WriteString("\nGETs are the front's (HEADs included: the nodes' probes of the store), answered a second over the run from the ranks' first request to the last batch; the busiest second is over the run's whole seconds. A batch's wait is from the rank's previous batch's arrival.\n\nTargets:\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&sb, "  %-4s %s: %.3f (want %s)\n", t.Status, t.Name, t.Ratio, t.Want)
	}
	fmt.Fprintf(&sb, "\n%s; %.0f s\n", r.Command, r.Seconds)
	_, err := io.WriteString(w, sb.String())
	return err
}

// WriteJSON writes the report as JSON.
func (r *BudgetReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }
