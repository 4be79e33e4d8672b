package bench

import (
	"bytes"
	"fmt"
	"io"
	"text/tabwriter"
)

// WriteJSON writes the report as indented JSON: concurrency.json.
func (rep *ConcurrencyReport) WriteJSON(w io.Writer) error { return writeJSON(w, rep) }

// WriteText writes the table of points and the targets: concurrency.txt,
// and the markdown of docs/benchmarks.md (the table is valid markdown).
func (rep *ConcurrencyReport) WriteText(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d samples in %d chunks (%s), batch %d, window %d; cache %s (warm), --memory-limit %s; %.1f s a point; load average %.2f → %.2f; %s\n\n",
		rep.Samples, rep.Chunks, sizeString(rep.Bytes), rep.BatchSize, rep.Window, sizeString(rep.CacheBytes), sizeString(rep.MemoryLimit),
		rep.DurationS, rep.LoadAverage[0], rep.LoadAverage[1], rep.Command)
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "| streams\t| shape\t| batches/s\t| p50\t| p99\t| max\t| 503 (retried)\t| errors\t| RSS\t| goroutines\t| gateway CPU a batch\t|")
	fmt.Fprintln(tw, "| --:\t| --\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t|")
	for _, p := range rep.Points {
		fmt.Fprintf(tw, "| %d\t| %s\t| %.0f\t| %.2f ms\t| %.2f ms\t| %.1f ms\t| %d\t| %d\t| %s\t| %d\t| %.0f µs\t|\n",
			p.Streams, p.Shape, p.BatchesPerSec, p.P50Ms, p.P99Ms, p.MaxMs, p.Refused, p.Errors, sizeString(p.RSS), p.Goroutines, p.CPUPerBatchUs)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\nThe gateway at ready (cache warmed in %.2f s): RSS %s, %d goroutines; its peak RSS over the run %s; store bytes read during the points %d.\n",
		rep.WarmSeconds, sizeString(rep.ReadyRSS), rep.ReadyGoroutines, sizeString(rep.PeakRSS), rep.StoreBytes)
	for _, p := range rep.Points {
		if p.FirstError != "" {
			fmt.Fprintf(&b, "%s at %d streams, the first error: %s\n", p.Shape, p.Streams, p.FirstError)
		}
	}
	if cl := rep.Cluster; cl != nil {
		fmt.Fprintf(&b, "\nA cluster of %d, %d ranks of one job, one node killed after %.1f s (%d requests failed over to the next node, %d refused, %d errors; peak RSS of a survivor %s):\n\n",
			cl.Nodes, cl.Streams, cl.KilledAfterS, cl.FailedOver, cl.Refused, cl.Errors, sizeString(cl.PeakRSS))
		tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
		fmt.Fprintln(tw, "| \t| batches\t| batches/s\t| p50\t| p99\t| max\t|")
		fmt.Fprintln(tw, "| --\t| --:\t| --:\t| --:\t| --:\t| --:\t|")
		for _, in := range []struct {
			name string
			ClusterInterval
		}{{"before the kill", cl.Before}, {"after", cl.After}} {
			fmt.Fprintf(tw, "| %s\t| %d\t| %.0f\t| %.2f ms\t| %.2f ms\t| %.1f ms\t|\n", in.name, in.Batches, in.BatchesPerSec, in.P50Ms, in.P99Ms, in.MaxMs)
		}
		tw.Flush()
		if cl.FirstError != "" {
			fmt.Fprintf(&b, "The cluster's first error: %s\n", cl.FirstError)
		}
	}
	b.WriteString("\nTargets:\n")
	for _, t := range rep.Targets {
		fmt.Fprintf(&b, "  %-4s %s: %.3f (want %s) %s\n", t.Status, t.Name, t.Ratio, t.Want, t.Note)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// targets evaluates issue 69's targets, for each shape: throughput at the
// most streams against the best, p99 against p50 at the best, no error
// but a refusal retried, and for one job no refusal at all (its ranks
// each have one request in flight); and the gateway's peak resident set
// inside its --memory-limit.
func (rep *ConcurrencyReport) targets() []Target {
	var out []Target
	for _, shape := range []string{ShapeOneJob, ShapeManyJob} {
		var best, widest *ConcurrencyPoint
		var errs, refused int64
		for i := range rep.Points {
			p := &rep.Points[i]
			if p.Shape != shape {
				continue
			}
			if best == nil || p.BatchesPerSec > best.BatchesPerSec {
				best = p
			}
			if widest == nil || p.Streams > widest.Streams {
				widest = p
			}
			errs += p.Errors
			refused += p.Refused
		}
		if best == nil {
			continue
		}
		t := atLeast(fmt.Sprintf("%s: batches/s at %d streams ÷ the best (%d streams)", shape, widest.Streams, best.Streams),
			ratio(widest.BatchesPerSec, best.BatchesPerSec), 0.8)
		out = append(out, t)
		t = atMost(fmt.Sprintf("%s: p99 ÷ p50 at the best concurrency (%d streams)", shape, best.Streams), ratio(best.P99Ms, best.P50Ms), 10)
		out = append(out, t)
		out = append(out, atMost(shape+": errors beyond a refusal retried", float64(errs), 0))
		if shape == ShapeOneJob {
			out = append(out, atMost(shape+": refusals (503), its ranks one request in flight each", float64(refused), 0))
		}
	}
	if cl := rep.Cluster; cl != nil {
		out = append(out, atMost("cluster, a node killed: errors beyond a request retried or failed over", float64(cl.Errors), 0))
		t := atMost("cluster: a survivor's peak RSS ÷ --memory-limit", ratio(float64(cl.PeakRSS), float64(rep.MemoryLimit)), 1)
		if cl.PeakRSS == 0 {
			t.Status, t.Note = NA, "no peak RSS on this platform"
		}
		out = append(out, t)
	}
	t := atMost("the gateway's peak RSS ÷ --memory-limit", ratio(float64(rep.PeakRSS), float64(rep.MemoryLimit)), 1)
	if rep.PeakRSS == 0 {
		t.Status, t.Note = NA, "no peak RSS on this platform"
	}
	return append(out, t)
}
