package planner

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/brandgw/brand/api"
)

// WriteText writes the plan as a human-readable report for the CLI: the
// inputs, a per-epoch table of both policies (with a disk tier, another of
// their store and disk reads; in importance mode, the importance epochs
// under three policies), the cache sizes that matter
// with a verdict for the chosen one, and the shuffle quality beside a full
// shuffle's. Sizes are in binary units (KiB, MiB, GiB), ratios in percent.
func (p *Plan) WriteText(w io.Writer) error {
	var b bytes.Buffer
	j := p.Job
	writeInputs(&b, p.Chunks, p.Samples, p.DatasetBytes, p.DatasetStoreBytes, j, p.Epochs, p.Mix)
	fmt.Fprintf(&b, "Cache     %s (%s of the dataset)\n", formatBytes(p.CacheBytes), percentOf(p.CacheBytes, p.DatasetBytes))
	if p.Disk != nil {
		fmt.Fprintf(&b, "Disk      %s (%s of the dataset) below the cache\n", formatBytes(p.Disk.DiskCacheBytes), percentOf(p.Disk.DiskCacheBytes, p.DatasetBytes))
	}
	consume := "as fast as the backend"
	if p.ConsumeBytesPerSec > 0 {
		consume = formatRate(p.ConsumeBytesPerSec)
	}
	fmt.Fprintf(&b, "Rates     backend %s, trainer %s, prefetch %s\n",
		formatRate(p.BackendBytesPerSec), consume, plural(p.PrefetchWindows, "window"))

	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "epoch\taccesses\tLRU hit ratio\tLRU backend\toptimal hit ratio\toptimal backend\t\n")
	for i, e := range p.Optimal.Epochs {
		var l EpochResult
		if i < len(p.LRU.Epochs) {
			l = p.LRU.Epochs[i]
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\t%s\t%s\t%s\t\n", e.Epoch, e.Accesses,
			percent(l.HitRatio), formatBytes(l.BackendBytes), percent(e.HitRatio), formatBytes(e.BackendBytes))
	}
	fmt.Fprintf(tw, "total\t%d\t%s\t%s\t%s\t%s\t\n", p.Optimal.Accesses,
		percent(p.LRU.HitRatio), formatBytes(p.LRU.BackendBytes), percent(p.Optimal.HitRatio), formatBytes(p.Optimal.BackendBytes))
	tw.Flush()
	if p.Mix != nil {
		p.writeComponents(&b)
		p.writePhases(&b)
	}
	if p.Disk != nil {
		p.Disk.writeText(&b, p.DatasetBytes, p.storeBytes())
	}
	if p.Importance != nil {
		p.Importance.writeText(&b, p.DatasetBytes, p.storeBytes())
	}
	if p.Transform != nil {
		p.Transform.writeText(&b)
	}
	p.Bill.writeText(&b)

	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "working set (windows a batch spans + %s)\t%s\n", plural(p.PrefetchWindows, "prefetch window"), formatBytes(p.WorkingSetBytes))
	noStall := formatBytes(p.MinNoStallCacheBytes)
	if p.MinNoStallCacheBytes < 0 {
		noStall = "none: even the whole dataset cached stalls"
	}
	fmt.Fprintf(tw, "smallest no-stall cache\t%s\n", noStall)
	fmt.Fprintf(tw, "steady epochs at %s\t%s\n", formatBytes(p.CacheBytes), p.steadyVerdict())
	cold := "keeps up: the backend is at least as fast as the trainer"
	if p.ColdEpochStalls {
		cold = "stalls: it reads the whole dataset once, and the backend is slower than the trainer"
	}
	if p.DatasetStoreBytes != 0 {
		cold = "keeps up: the backend reads the dataset's store bytes at least as fast as the trainer takes its bytes"
		if p.ColdEpochStalls {
			cold = "stalls: it reads the dataset's store bytes once, slower than the trainer takes its bytes"
		}
	}
	fmt.Fprintf(tw, "first (cold) epoch\t%s\n", cold)
	tw.Flush()

	b.WriteString("\n")
	// Labels left, figures right: the figures are padded to the headers'
	// width by hand, since tabwriter aligns a whole table one way.
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	q, f := p.Quality, p.FullShuffle
	windowHead := fmt.Sprintf("window %d", j.Window)
	wq, wf := max(len(windowHead), 6), len("full shuffle")
	fmt.Fprintf(tw, "per rank batch of %d\t%*s\t%*s\n", j.BatchSize, wq, windowHead, wf, "full shuffle")
	fmt.Fprintf(tw, "distinct chunks (mean)\t%*.1f\t%*.1f\n", wq, q.MeanDistinctChunksPerBatch, wf, f.MeanDistinctChunksPerBatch)
	fmt.Fprintf(tw, "largest share of one chunk (mean)\t%*s\t%*s\n", wq, percent(q.MaxChunkShare), wf, percent(f.MaxChunkShare))
	fmt.Fprintf(tw, "largest share of one chunk (worst)\t%*s\t%*s\n", wq, percent(q.WorstChunkShare), wf, percent(f.WorstChunkShare))
	tw.Flush()

	_, err := w.Write(b.Bytes())
	return err
}

// steadyVerdict says whether the plan's cache keeps the trainer fed in the
// steady state, and by what margin.
func (p *Plan) steadyVerdict() string {
	if p.CacheBytes < p.WorkingSetBytes {
		return "stall: the cache is smaller than the working set"
	}
	// The steady epoch that decides: the one that reads the most of what
	// the backend delivers in its own time (where no edit changes the
	// epochs, every epoch's time is the same, and it reads the most).
	var most int64
	budget := p.steadyBudget(1)
	for i, e := range steady(p.Optimal) {
		b := p.steadyBudget(e.Epoch - p.Job.FirstEpoch)
		if i == 0 || float64(e.BackendBytes)*budget > float64(most)*b {
			most, budget = e.BackendBytes, b
		}
	}
	readable := formatBytes(int64(budget))
	if p.SteadyEpochsStall {
		return fmt.Sprintf("stall: up to %s to read per epoch, %s readable in an epoch's time", formatBytes(most), readable)
	}
	return fmt.Sprintf("keep up: at most %s to read per epoch, %s readable in an epoch's time", formatBytes(most), readable)
}

// formatBytes renders n in binary units with two decimals above 1 KiB.
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n)
	for _, u := range []string{"KiB", "MiB", "GiB", "TiB", "PiB"} {
		v /= unit
		if v < unit && v > -unit {
			return fmt.Sprintf("%.2f %s", v, u)
		}
	}
	return fmt.Sprintf("%.2f EiB", v/unit)
}

func formatRate(bytesPerSec float64) string {
	return formatBytes(int64(bytesPerSec)) + "/s"
}

func percent(r float64) string { return fmt.Sprintf("%.1f%%", 100*r) }

func percentOf(n, of int64) string {
	if of == 0 {
		return "-"
	}
	return percent(float64(n) / float64(of))
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// writeInputs writes the dataset (or, if mix is not nil, the mixture) and
// job lines every report of one job opens with, the global batches of
// each of its epochs (one figure where they are alike; a job's edits
// make them differ); storeBytes is the dataset's bytes in the store when
// it has store sizes, else 0.
func writeInputs(b *bytes.Buffer, chunks, samples int, datasetBytes, storeBytes int64, j Job, epochs []api.PlanEpoch, mix *MixPlan) {
	if mix != nil {
		mix.writeInputs(b, chunks, samples, datasetBytes, storeBytes)
	} else {
		writeDataset(b, chunks, samples, datasetBytes, storeBytes)
	}
	fmt.Fprintf(b, "Job       seed %d, window %d chunks, batch %d × %d ranks, drop_last %t\n",
		j.Seed, j.Window, j.BatchSize, j.World, j.DropLast)
	batches := make([]string, len(epochs))
	for i, e := range epochs {
		batches[i] = fmt.Sprint(e.Batches)
	}
	if slices.Equal(batches, slices.Repeat(batches[:min(1, len(batches))], len(batches))) {
		batches = batches[:min(1, len(batches))]
	}
	fmt.Fprintf(b, "          epochs %d-%d, %s global batches per epoch\n",
		j.FirstEpoch, j.FirstEpoch+j.Epochs-1, strings.Join(batches, ", "))
}

// writeDataset writes the dataset line every report opens with, that of
// several jobs (SharedPlan) included: with storeBytes (a dataset with
// store sizes, one served in place), its bytes in the cache and in the
// store.
func writeDataset(b *bytes.Buffer, chunks, samples int, datasetBytes, storeBytes int64) {
	fmt.Fprintf(b, "Dataset   %d chunks, %d samples, %s%s\n", chunks, samples, formatBytes(datasetBytes), storeNote(datasetBytes, storeBytes))
}

// storeNote is what a report adds to a dataset's bytes for a dataset with
// store sizes: that they are the resident bytes the cache holds, and the
// bytes its loads read from the store, which the backend figures count.
func storeNote(datasetBytes, storeBytes int64) string {
	if storeBytes == 0 {
		return ""
	}
	return fmt.Sprintf(" resident, %s in the store (what loads read: the backend and store figures)", formatBytes(storeBytes))
}
