package planner

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
)

// WriteText writes the shared plan for the CLI: the dataset and the cache,
// a table of the jobs, whether the cache holds the jobs' largest windows
// together, the reads per job-epoch and hit ratio of the three policies,
// and, for several jobs, each one's reads per epoch under each. Reads are
// in datasets (see SharedPlan), sizes in binary units, ratios in percent.
func (p *SharedPlan) WriteText(w io.Writer) error {
	var b bytes.Buffer
	writeDataset(&b, p.Chunks, p.Samples, p.DatasetBytes, p.DatasetStoreBytes)
	fmt.Fprintf(&b, "Cache     %s (%s of the dataset), shared by %s\n",
		formatBytes(p.CacheBytes), percentOf(p.CacheBytes, p.DatasetBytes), plural(len(p.Jobs), "job"))

	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "#\tname\tseed\twindow\tbatch × world\tdrop_last\tepochs\tspeed\tstart\t\n")
	for i, j := range p.Jobs {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d × %d\t%t\t%d-%d\t%s\t%s\t\n", i, jobName(j), j.Seed, j.Window,
			j.BatchSize, j.World, j.DropLast, j.FirstEpoch, j.FirstEpoch+j.Epochs-1,
			formatFloat(j.speed()), formatFloat(j.Start))
	}
	tw.Flush()

	b.WriteString("\n")
	if p.WindowBytes <= p.CacheBytes {
		fmt.Fprintf(&b, "Windows   the jobs' largest windows sum to %s: the cache holds them all at once\n", formatBytes(p.WindowBytes))
	} else {
		fmt.Fprintf(&b, "Windows   the jobs' largest windows sum to %s, more than the cache:\n", formatBytes(p.WindowBytes))
		b.WriteString("          a cache below it makes jobs take turns or assemble batches in parts\n")
	}

	// Labels left, figures right, padded to the headers' width by hand as
	// in Plan.WriteText.
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	const readsHead, hitHead = "reads per job-epoch", "hit ratio"
	wr, wh := len(readsHead), len(hitHead)
	partitioned := fmt.Sprintf("partitioned: each job alone with 1/%d of the cache", len(p.Jobs))
	if len(p.Jobs) == 1 {
		partitioned = "partitioned: the job alone with the whole cache"
	}
	fmt.Fprintf(tw, "policy\t%*s\t%*s\n", wr, readsHead, wh, hitHead)
	for _, row := range []struct {
		name  string
		reads float64
		r     Result
	}{
		{"LRU", p.LRUReads, p.LRU},
		{"optimal over the merged schedule", p.OptimalReads, p.Optimal},
		{partitioned, p.PartitionedReads, p.Partitioned},
	} {
		fmt.Fprintf(tw, "%s\t%*.3f\t%*s\n", row.name, wr, row.reads, wh, percent(row.r.HitRatio))
	}
	tw.Flush()

	// One job's reads per epoch are the totals above.
	if len(p.Jobs) > 1 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		heads := []string{"LRU", "optimal", "partitioned"}
		fmt.Fprintf(tw, "reads per epoch\t%*s\t%*s\t%*s\n", 5, heads[0], len(heads[1]), heads[1], len(heads[2]), heads[2])
		for i, j := range p.Jobs {
			fmt.Fprintf(tw, "%d %s\t%*.3f\t%*.3f\t%*.3f\n", i, jobName(j),
				5, p.JobReads(p.LRU, i), len(heads[1]), p.JobReads(p.Optimal, i), len(heads[2]), p.JobReads(p.Partitioned, i))
		}
		tw.Flush()
	}
	b.WriteString("\nreads: bytes read from the store, in datasets; optimal: Belady over every job's future;\n")
	b.WriteString("a chunk read for one job and hit by another counts as the first one's read\n")

	_, err := w.Write(b.Bytes())
	return err
}

// jobName is j's name in a report, "-" if it has none.
func jobName(j SharedJob) string {
	if j.Name == "" {
		return "-"
	}
	return j.Name
}

// formatFloat renders a speed or a start as briefly as it reads exactly.
func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
