package bench

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// ResizeReport is a resize benchmark's result: resize.json.
type ResizeReport struct {
	Header
	Samples   int         `json:"samples"`
	MeanBytes int64       `json:"mean_bytes"`
	Bytes     int64       `json:"bytes"`
	Chunks    int         `json:"chunks"`
	BatchSize int         `json:"batch_size"`
	World     int         `json:"world"`
	Window    int         `json:"window"`
	Epochs    int         `json:"epochs"`
	Steps     int         `json:"steps"` // global batches an epoch
	NodeCache int64       `json:"node_cache_bytes"`
	StepMs    float64     `json:"step_ms"`
	Runs      []ResizeRun `json:"runs"`
	Targets   []Target    `json:"targets"`
	Seconds   float64     `json:"seconds"`
}

// ResizeRun is one scenario's run.
type ResizeRun struct {
	Scenario string         `json:"scenario"`
	Pair     int            `json:"pair"`
	Epochs   []ResizeEpoch  `json:"epochs"`
	Changes  []ResizeChange `json:"changes"`
}

// ResizeEpoch is one epoch of a run: the cluster's counters over it,
// summed over its nodes (a node that left or died counted up to then),
// and its batches' latency.
type ResizeEpoch struct {
	Epoch int    `json:"epoch"`
	Nodes string `json:"nodes"` // e.g. "3 → 5"
	// Store bytes and GETs (brand_backend_read_bytes_total and
	// brand_backend_requests_total{op="get"}), sample bytes fetched from
	// peers for batches (brand_peer_bytes_fetched_total) and batch bytes
	// delivered (brand_locality_bytes_total).
	StoreBytes     float64 `json:"store_bytes"`
	StoreGets      float64 `json:"store_gets"`
	PeerBytes      float64 `json:"peer_bytes"`
	DeliveredBytes float64 `json:"delivered_bytes"`
	// Membership is what the nodes' brand_membership_* counters moved by
	// over the epoch, each series summed over the nodes: the hand-over's
	// figures where the gateway has them.
	Membership map[string]float64 `json:"membership,omitempty"`
	P50        float64            `json:"p50_ms"`
	P99        float64            `json:"p99_ms"`
	Seconds    float64            `json:"seconds"`
}

// ResizeChange is one change of the cluster under the job.
type ResizeChange struct {
	Epoch int    `json:"epoch"`
	What  string `json:"what"`
	Step  int    `json:"step"` // the step before which it started
	// Seconds from its start until the live nodes agreed on the new
	// membership with every live member up (a kill: until they all saw
	// the victim down).
	Seconds float64 `json:"seconds"`
	Batches int     `json:"batches"` // batches in flight during it
	P99     float64 `json:"p99_ms"`
	// What the nodes' GET /cluster say of the change (last_change), where
	// the gateway reports it: the longest warm-up, flip and time to
	// agreement over the nodes, and the chunks they loaded for it and
	// where from, summed.
	Nodes        int     `json:"nodes,omitempty"` // nodes that reported it
	WarmSeconds  float64 `json:"warm_seconds,omitempty"`
	FlipSeconds  float64 `json:"flip_seconds,omitempty"`
	AgreeSeconds float64 `json:"agree_seconds,omitempty"`
	Chunks       int     `json:"chunks,omitempty"`
	PeerBytes    int64   `json:"peer_bytes,omitempty"`
	StoreBytes   int64   `json:"store_bytes,omitempty"`
}

// targets evaluates each change's p99 against the fixed cluster's p99
// over the same epoch, the medians over the pairs (a p99 of a few hundred
// batches on a shared machine has outliers), and the store bytes and GETs of the
// epochs before the kill against the fixed cluster's.
func (r *ResizeReport) targets() []Target {
	var out []Target
	fixed, resized := r.runsOf(resizeFixed), r.runsOf(resizeResized)
	n := min(len(fixed), len(resized))
	if n == 0 {
		return nil
	}
	for i, ch := range resized[0].Changes {
		// The fixed cluster's same epoch, or the one before where the
		// fixed cluster changes too (the kill).
		se := ch.Epoch
		for _, fc := range fixed[0].Changes {
			if fc.Epoch == se && se > 0 {
				se--
			}
		}
		var during, steady []float64
		for p := range n {
			if i < len(resized[p].Changes) {
				during = append(during, resized[p].Changes[i].P99)
				steady = append(steady, fixed[p].Epochs[se].P99)
			}
		}
		t := atMost(fmt.Sprintf("p99 during %s (epoch %d) ÷ the fixed cluster's p99 over epoch %d", ch.What, ch.Epoch, se),
			ratio(medianOf(during), medianOf(steady)), resizeLatencyTarget)
		t.Note = fmt.Sprintf("%s ms against %s ms", joinFloats(during, 1), joinFloats(steady, 1))
		out = append(out, t)
	}
	sumOf := func(runs []ResizeRun, f func(ResizeEpoch) float64) float64 {
		s := 0.0
		for _, run := range runs[:n] {
			for _, ep := range run.Epochs[:r.Epochs-1] {
				s += f(ep)
			}
		}
		return s
	}
	bytesOf := func(ep ResizeEpoch) float64 { return ep.StoreBytes }
	getsOf := func(ep ResizeEpoch) float64 { return ep.StoreGets }
	t := atMost(fmt.Sprintf("store bytes, epochs 0–%d, ÷ the fixed cluster's", r.Epochs-2), ratio(sumOf(resized, bytesOf), sumOf(fixed, bytesOf)), resizeStoreTarget)
	t.Note = fmt.Sprintf("%.3f against %.3f × the dataset a run", sumOf(resized, bytesOf)/float64(n)/float64(r.Bytes), sumOf(fixed, bytesOf)/float64(n)/float64(r.Bytes))
	out = append(out, t)
	t = atMost(fmt.Sprintf("store GETs, epochs 0–%d, ÷ the fixed cluster's", r.Epochs-2), ratio(sumOf(resized, getsOf), sumOf(fixed, getsOf)), resizeStoreTarget)
	t.Note = fmt.Sprintf("%.0f against %.0f a run", sumOf(resized, getsOf)/float64(n), sumOf(fixed, getsOf)/float64(n))
	out = append(out, t)
	return out
}

func (r *ResizeReport) runsOf(scenario string) []ResizeRun {
	var out []ResizeRun
	for _, run := range r.Runs {
		if run.Scenario == scenario {
			out = append(out, run)
		}
	}
	return out
}

// WriteJSON writes the report as JSON.
func (r *ResizeReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteText writes the report as markdown tables: per run and epoch the
// store's bytes and GETs, peer bytes and latency; per change its
// duration and p99; then the targets.
func (r *ResizeReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "Resize under a job: %d samples (%s, %d chunks), batch %d × %d ranks (%d steps an epoch, a step at most every %.0f ms), window %d, epochs 0–%d, each node's cache %s (%.0f %% of the dataset)\n\n",
		r.Samples, sizeString(r.Bytes), r.Chunks, r.BatchSize, r.World, r.Steps, r.StepMs, r.Window, r.Epochs-1, sizeString(r.NodeCache), 100*float64(r.NodeCache)/float64(r.Bytes))
	r.writeMeans(&sb)
	sb.WriteString("Every run:\n\n")
	sb.WriteString("| pair | cluster | epoch | nodes | store (× dataset) | store GETs | from peers (× dataset) | p50 ms | p99 ms | s |\n")
	sb.WriteString("| --: | -- | --: | -- | --: | --: | --: | --: | --: | --: |\n")
	ds := float64(r.Bytes)
	for _, run := range r.Runs {
		for _, ep := range run.Epochs {
			fmt.Fprintf(&sb, "| %d | %s | %d | %s | %.3f | %.0f | %.3f | %.1f | %.1f | %.1f |\n", run.Pair, run.Scenario, ep.Epoch, ep.Nodes,
				ep.StoreBytes/ds, ep.StoreGets, ep.PeerBytes/ds, ep.P50, ep.P99, ep.Seconds)
		}
	}
	sb.WriteString("\n| pair | cluster | epoch | change (at step) | took s | batches during it | p99 ms during it | nodes' warm / flip / agree s | chunks loaded for it | from peers / store (× dataset) |\n")
	sb.WriteString("| --: | -- | --: | -- | --: | --: | --: | --: | --: | --: |\n")
	for _, run := range r.Runs {
		for _, ch := range run.Changes {
			nodes, loaded, moved := "", "", ""
			if ch.Nodes > 0 {
				nodes = fmt.Sprintf("%.2f / %.2f / %.2f", ch.WarmSeconds, ch.FlipSeconds, ch.AgreeSeconds)
				loaded = strconv.Itoa(ch.Chunks)
				moved = fmt.Sprintf("%.3f / %.3f", float64(ch.PeerBytes)/ds, float64(ch.StoreBytes)/ds)
			}
			fmt.Fprintf(&sb, "| %d | %s | %d | %s (%d) | %.2f | %d | %.1f | %s | %s | %s |\n", run.Pair, run.Scenario, ch.Epoch, ch.What, ch.Step, ch.Seconds, ch.Batches, ch.P99,
				nodes, loaded, moved)
		}
	}
	sb.WriteString("\nStore reads are the nodes' brand_backend_read_bytes_total and brand_backend_requests_total{op=\"get\"}, peers their brand_peer_bytes_fetched_total, summed over the nodes (a node that died counted up to its kill, one that left up to its exit); resize.json has each epoch's brand_membership_* counters. A change lasts from the member file's rewrite (or the signal) until every live node agrees on the new membership with every live member up, the leaver exited; the nodes' figures are their GET /cluster last_change (the longest warm-up, flip and agreement; chunks and bytes summed).\n\nTargets:\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&sb, "  %-4s %s: %.3f (want %s; %s)\n", t.Status, t.Name, t.Ratio, t.Want, t.Note)
	}
	fmt.Fprintf(&sb, "\n%s; %.0f s\n", r.Command, r.Seconds)
	_, err := io.WriteString(w, sb.String())
	return err
}

// medianOf is the median of v, the mean of the middle two for an even
// count.
func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// writeMeans writes each scenario's epochs and changes as means over the
// pairs (p99s as medians).
func (r *ResizeReport) writeMeans(sb *strings.Builder) {
	ds := float64(r.Bytes)
	fmt.Fprintf(sb, "Means over %d pairs (p99: medians):\n\n", len(r.runsOf(resizeFixed)))
	sb.WriteString("| cluster | epoch | nodes | store (× dataset) | store GETs | from peers (× dataset) | p99 ms | change | took s | p99 ms during it | nodes' warm / flip / agree s | chunks loaded for it | from peers / store (× dataset) |\n")
	sb.WriteString("| -- | --: | -- | --: | --: | --: | --: | -- | --: | --: | --: | --: | --: |\n")
	for _, scenario := range []string{resizeFixed, resizeResized} {
		runs := r.runsOf(scenario)
		if len(runs) == 0 {
			continue
		}
		for e := range runs[0].Epochs {
			var store, gets, peers, p99 []float64
			for _, run := range runs {
				if e < len(run.Epochs) {
					ep := run.Epochs[e]
					store, gets, peers, p99 = append(store, ep.StoreBytes/ds), append(gets, ep.StoreGets), append(peers, ep.PeerBytes/ds), append(p99, ep.P99)
				}
			}
			fmt.Fprintf(sb, "| %s | %d | %s | %.3f | %.0f | %.3f | %.1f |", scenario, e, runs[0].Epochs[e].Nodes, mean(store), mean(gets), mean(peers), medianOf(p99))
			ci := slices.IndexFunc(runs[0].Changes, func(c ResizeChange) bool { return c.Epoch == e })
			if ci < 0 {
				sb.WriteString("  |  |  |  |  |  |\n")
				continue
			}
			var took, during, warm, flip, agree, chunks, peer, st []float64
			for _, run := range runs {
				if ci < len(run.Changes) {
					c := run.Changes[ci]
					took, during = append(took, c.Seconds), append(during, c.P99)
					warm, flip, agree = append(warm, c.WarmSeconds), append(flip, c.FlipSeconds), append(agree, c.AgreeSeconds)
					chunks, peer, st = append(chunks, float64(c.Chunks)), append(peer, float64(c.PeerBytes)/ds), append(st, float64(c.StoreBytes)/ds)
				}
			}
			nodes, loaded, moved := "", "", ""
			if runs[0].Changes[ci].Nodes > 0 {
				nodes = fmt.Sprintf("%.2f / %.2f / %.2f", mean(warm), mean(flip), mean(agree))
				loaded = fmt.Sprintf("%.1f", mean(chunks))
				moved = fmt.Sprintf("%.3f / %.3f", mean(peer), mean(st))
			}
			fmt.Fprintf(sb, " %s | %.2f | %.1f | %s | %s | %s |\n", runs[0].Changes[ci].What, mean(took), medianOf(during), nodes, loaded, moved)
		}
	}
	sb.WriteString("\n")
}
