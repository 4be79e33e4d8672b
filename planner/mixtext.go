package planner

import (
	"bytes"
	"fmt"
	"text/tabwriter"
)

// writeInputs writes the lines that stand for the dataset line in a
// report of a mixture: the mixture's totals and a table of its
// components.
func (mp *MixPlan) writeInputs(b *bytes.Buffer, chunks, samples int, datasetBytes, storeBytes int64) {
	fmt.Fprintf(b, "Mixture   %s, %d chunks, %s%s; epochs of %d samples in mixing blocks of %d\n",
		plural(len(mp.Components), "dataset"), chunks, formatBytes(datasetBytes), storeNote(datasetBytes, storeBytes), samples, mp.Block)
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "          dataset\tweight\tchunks\tsamples\tbytes\tper epoch\tshare\tpasses\t\n")
	for _, c := range mp.Components {
		passes := fmt.Sprint(c.FirstPass)
		if c.LastPass != c.FirstPass {
			passes = fmt.Sprintf("%d-%d", c.FirstPass, c.LastPass)
		}
		share := "-"
		if samples > 0 {
			share = percent(float64(c.EpochSamples) / float64(samples))
		}
		bytes := formatBytes(c.DatasetBytes)
		if c.DatasetStoreBytes != 0 {
			bytes += " (" + formatBytes(c.DatasetStoreBytes) + " stored)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%d\t%s\t%s\t\n", c.Name, c.Weight, c.Chunks, c.Samples,
			bytes, c.EpochSamples, share, passes)
	}
	tw.Flush()
}

// writeComponents writes a plan of a mixture's per-component table: each
// component's accesses, hit ratios and backend bytes per epoch under both
// policies, from the results' Components.
func (p *Plan) writeComponents(b *bytes.Buffer) {
	if len(p.LRU.Components) != len(p.Mix.Components) || len(p.Optimal.Components) != len(p.Mix.Components) {
		return // a plan decoded from elsewhere without them
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "dataset\tepoch\taccesses\tLRU hit ratio\tLRU backend\toptimal hit ratio\toptimal backend\t\n")
	for i, c := range p.Mix.Components {
		l, o := p.LRU.Components[i], p.Optimal.Components[i]
		for k, e := range o.Epochs {
			var le EpochResult
			if k < len(l.Epochs) {
				le = l.Epochs[k]
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t%s\t%s\t\n", c.Name, e.Epoch, e.Accesses,
				percent(le.HitRatio), formatBytes(le.BackendBytes), percent(e.HitRatio), formatBytes(e.BackendBytes))
		}
		fmt.Fprintf(tw, "%s\ttotal\t%d\t%s\t%s\t%s\t%s\t\n", c.Name, o.Accesses,
			percent(l.HitRatio), formatBytes(l.BackendBytes), percent(o.HitRatio), formatBytes(o.BackendBytes))
	}
	tw.Flush()
}

// writePhases writes a plan of a schedule's per-phase table: each phase's
// steps, its working set and whether the cache holds it, and what both
// policies read from the store in it (Result.Phases).
func (p *Plan) writePhases(b *bytes.Buffer) {
	ph := p.Mix.Phases
	if len(ph) == 0 || len(p.LRU.Phases) != len(ph) || len(p.Optimal.Phases) != len(ph) {
		return // not a schedule, or a plan decoded from elsewhere without them
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "phase\tfrom step\tweights\tsteps\tworking set\tLRU backend\toptimal backend\tat %s\t\n", formatBytes(p.CacheBytes))
	for n, x := range ph {
		verdict := "fits"
		if x.Stalls {
			verdict = "stalls"
		}
		from := fmt.Sprint(x.FromStep)
		if x.RampTo != 0 {
			from += fmt.Sprintf("~%d", x.RampTo)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t\n", n, from, weightsText(x.Weights), x.Steps,
			formatBytes(x.WorkingSetBytes), formatBytes(p.LRU.Phases[n].BackendBytes), formatBytes(p.Optimal.Phases[n].BackendBytes), verdict)
	}
	tw.Flush()
}

// weightsText writes a phase's weights as 3:1:0.
func weightsText(w []uint64) string {
	var b bytes.Buffer
	for i, x := range w {
		if i > 0 {
			b.WriteByte(':')
		}
		fmt.Fprint(&b, x)
	}
	return b.String()
}
