package planner

import (
	"bytes"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/brandgw/brand/api"
)

// WriteText writes the cluster prediction for the CLI: the inputs, a
// per-epoch table of store, delivered, cross-node and balancing bytes,
// the cold and warm store reads as fractions of the dataset, and the
// shuffle quality with and without locality. Sizes are in binary units,
// fractions in percent: store bytes of the dataset, cross-node and
// balancing bytes of the bytes delivered.
func (p *ClusterPlan) WriteText(w io.Writer) error {
	var b bytes.Buffer
	j := p.Job
	sizes := make([]api.PlanEpoch, len(p.Epochs))
	for i, e := range p.Epochs {
		sizes[i] = api.PlanEpoch{Epoch: e.Epoch, Samples: e.Samples, Batches: e.Batches}
	}
	writeInputs(&b, p.Chunks, p.Samples, p.DatasetBytes, p.DatasetStoreBytes, j, sizes, p.Mix)
	fmt.Fprintf(&b, "Cluster   %s, rank r on node ⌊r·%d/%d⌋; a node owns %s to %s\n",
		plural(p.Nodes, "node"), p.Nodes, j.World, formatBytes(p.MinOwnedBytes), formatBytes(p.MaxOwnedBytes))
	fmt.Fprintf(&b, "Cache     %s per node, %s in all (%s of the dataset)\n",
		formatBytes(p.NodeCacheBytes), formatBytes(p.ClusterCacheBytes), percentOf(p.ClusterCacheBytes, p.DatasetBytes))
	disk := p.NodeDiskCacheBytes > 0
	if disk {
		all := p.NodeDiskCacheBytes * int64(p.Nodes) // MakeClusterPlan refuses an overflow
		fmt.Fprintf(&b, "Disk      %s per node below its cache, %s in all (%s of the dataset)\n",
			formatBytes(p.NodeDiskCacheBytes), formatBytes(all), percentOf(all, p.DatasetBytes))
	}

	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	diskHead := ""
	if disk {
		diskHead = "disk\tof dataset\t"
	}
	fmt.Fprintf(tw, "epoch\tstore\tof dataset\t%sbusiest node\tdelivered\tcross-node, locality\tcross-node, plain cut\tbalancing\t\n", diskHead)
	share := func(n, of int64) string { return fmt.Sprintf("%s (%s)", formatBytes(n), percentOf(n, of)) }
	for _, e := range p.Epochs {
		diskCells := ""
		if disk {
			diskCells = fmt.Sprintf("%s\t%s\t", formatBytes(e.DiskBytes), percentOf(e.DiskBytes, p.DatasetBytes))
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s%s\t%s\t%s\t%s\t%s\t\n", e.Epoch,
			formatBytes(e.StoreBytes), percentOf(e.StoreBytes, p.storeBytes()), diskCells,
			formatBytes(e.MaxNodeStoreBytes), formatBytes(e.DeliveredBytes),
			share(e.CrossNodeBytes, e.DeliveredBytes), share(e.CrossNodeBytesPlain, e.DeliveredBytes),
			share(e.BalancingBytes, e.DeliveredBytes))
	}
	tw.Flush()

	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	cold, warm := p.ColdStoreFraction(), p.WarmStoreFraction()
	fmt.Fprintf(tw, "store reads, cold epoch\t%s of the dataset\n", percent(cold))
	fmt.Fprintf(tw, "store reads, warm epochs (mean)\t%s of the dataset\n", percent(warm))
	if disk {
		fmt.Fprintf(tw, "disk reads, cold epoch\t%s of the dataset\n", percent(p.coldFraction(diskOf, p.DatasetBytes)))
		fmt.Fprintf(tw, "disk reads, warm epochs (mean)\t%s of the dataset\n", percent(p.warmFraction(diskOf, p.DatasetBytes)))
	}
	fmt.Fprintf(tw, "cross-node, locality (mean)\t%s of the bytes delivered\n", percent(p.CrossNodeFraction(true)))
	fmt.Fprintf(tw, "cross-node, plain cut (mean)\t%s of the bytes delivered\n", percent(p.CrossNodeFraction(false)))
	if p.Assignment != "" {
		fmt.Fprintf(tw, "the job's assignment\t%s\n", p.Assignment)
	}
	tw.Flush()
	p.Bill.writeText(&b)

	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	l, c := p.Locality, p.PlainCut
	wl, wc := len("locality"), len("plain cut")
	fmt.Fprintf(tw, "per rank batch of %d\t%*s\t%*s\n", j.BatchSize, wl, "locality", wc, "plain cut")
	fmt.Fprintf(tw, "distinct chunks (mean)\t%*.1f\t%*.1f\n", wl, l.MeanDistinctChunksPerBatch, wc, c.MeanDistinctChunksPerBatch)
	fmt.Fprintf(tw, "largest share of one chunk (mean)\t%*s\t%*s\n", wl, percent(l.MaxChunkShare), wc, percent(c.MaxChunkShare))
	fmt.Fprintf(tw, "largest share of one chunk (worst)\t%*s\t%*s\n", wl, percent(l.WorstChunkShare), wc, percent(c.WorstChunkShare))
	tw.Flush()

	if p.Importance != nil {
		p.Importance.writeText(&b, p.DatasetBytes, p.storeBytes())
	}
	if p.Transform != nil {
		p.Transform.writeText(&b)
	}
	_, err := w.Write(b.Bytes())
	return err
}

// ColdStoreFraction is the first epoch's store bytes over the dataset's
// (its bytes in the store).
func (p *ClusterPlan) ColdStoreFraction() float64 { return p.coldFraction(storeOf, p.storeBytes()) }

// WarmStoreFraction is the mean over the epochs after the first of their
// store bytes over the dataset's (its bytes in the store).
func (p *ClusterPlan) WarmStoreFraction() float64 { return p.warmFraction(storeOf, p.storeBytes()) }

func storeOf(e ClusterEpoch) int64 { return e.StoreBytes }
func diskOf(e ClusterEpoch) int64  { return e.DiskBytes }

// storeBytes is the dataset's bytes in the store: DatasetStoreBytes, or
// DatasetBytes for a dataset without store sizes.
func (p *ClusterPlan) storeBytes() int64 {
	if p.DatasetStoreBytes == 0 {
		return p.DatasetBytes
	}
	return p.DatasetStoreBytes
}

// coldFraction is the first epoch's bytes (by bytes) over whole, the
// dataset's.
func (p *ClusterPlan) coldFraction(bytes func(ClusterEpoch) int64, whole int64) float64 {
	if len(p.Epochs) == 0 || whole == 0 {
		return 0
	}
	return float64(bytes(p.Epochs[0])) / float64(whole)
}

// warmFraction is the mean over the epochs after the first of their bytes
// (by bytes) over whole, the dataset's.
func (p *ClusterPlan) warmFraction(bytes func(ClusterEpoch) int64, whole int64) float64 {
	if len(p.Epochs) < 2 || whole == 0 {
		return 0
	}
	var sum int64
	for _, e := range p.Epochs[1:] {
		sum += bytes(e)
	}
	return float64(sum) / float64(len(p.Epochs)-1) / float64(whole)
}

// CrossNodeFraction is the bytes that cross nodes over the bytes
// delivered, over all the simulated epochs, with locality-aware
// assignment or without.
func (p *ClusterPlan) CrossNodeFraction(locality bool) float64 {
	var cross, delivered int64
	for _, e := range p.Epochs {
		delivered += e.DeliveredBytes
		if locality {
			cross += e.CrossNodeBytes
		} else {
			cross += e.CrossNodeBytesPlain
		}
	}
	if delivered == 0 {
		return 0
	}
	return float64(cross) / float64(delivered)
}
