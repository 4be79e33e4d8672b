package planner

import (
	"bytes"
	"fmt"
	"text/tabwriter"
)

// writeText writes the importance-mode section of a plan's report: which
// snapshot, and per epoch the chunks read and the three policies' hit
// ratios and backend bytes, laid out as the uniform table above it.
func (ip *ImportancePlan) writeText(b *bytes.Buffer, datasetBytes, storeBytes int64) {
	fmt.Fprintf(b, "\nImportance  snapshot %s of job %s (losses of epoch %d), hot %s\n",
		ip.Version, ip.Job, ip.SnapshotEpoch, plural(ip.Hot, "chunk"))
	b.WriteString("            every epoch drawn from it: a job seals a new one each epoch, which no plan can know\n\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "epoch\tchunks read\taccesses\tLRU hit ratio\tLRU backend\taware hit ratio\taware backend\toptimal hit ratio\toptimal backend\t\n")
	chunks := 0
	for i, a := range ip.Aware.Epochs {
		var l, o EpochResult
		if i < len(ip.LRU.Epochs) {
			l = ip.LRU.Epochs[i]
		}
		if i < len(ip.Optimal.Epochs) {
			o = ip.Optimal.Epochs[i]
		}
		read := 0
		if i < len(ip.ChunksRead) {
			read = ip.ChunksRead[i]
		}
		chunks += read
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", a.Epoch, read, a.Accesses,
			percent(l.HitRatio), formatBytes(l.BackendBytes), percent(a.HitRatio), formatBytes(a.BackendBytes),
			percent(o.HitRatio), formatBytes(o.BackendBytes))
	}
	fmt.Fprintf(tw, "total\t%d\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t\n", chunks, ip.Aware.Accesses,
		percent(ip.LRU.HitRatio), formatBytes(ip.LRU.BackendBytes), percent(ip.Aware.HitRatio), formatBytes(ip.Aware.BackendBytes),
		percent(ip.Optimal.HitRatio), formatBytes(ip.Optimal.BackendBytes))
	tw.Flush()
	b.WriteString("aware: the gateway's importance-aware eviction; optimal: Belady, knowing the epochs to come\n")
	if ip.Disk != nil {
		ip.Disk.writeText(b, datasetBytes, storeBytes)
	}
}
