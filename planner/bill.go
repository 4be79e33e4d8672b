package planner

import (
	"bytes"
	"fmt"
	"math"

	"github.com/brandgw/brand/api"
)

// Bill is what a plan's store reads cost, per planned epoch and in total:
// the chunk loads from the store, the GETs they send (absent for a
// dataset whose loads the plan cannot count in requests: one served in
// place reads its fields' ranges), the bytes read and, on a cluster, the
// bytes crossing nodes, priced by Prices. A gateway's are its next-use
// policy's, Plan.Optimal; a cluster's are its nodes' summed.
type Bill struct {
	Prices api.Prices  `json:"prices"`
	Epochs []BillEpoch `json:"epochs"`
	Total  BillEpoch   `json:"total"`
}

// BillEpoch is an epoch's part of a Bill (Epoch -1: the total).
type BillEpoch struct {
	Epoch          int     `json:"epoch"`
	StoreReads     int     `json:"store_reads"`
	GETs           int64   `json:"gets,omitempty"`
	Bytes          int64   `json:"bytes"`
	CrossNodeBytes int64   `json:"cross_node_bytes,omitempty"`
	Cost           float64 `json:"cost"`
}

// gib is the GiB S3 bills by.
const gib = 1 << 30

// cost is e's cost under p.
func (e BillEpoch) cost(p api.Prices) float64 {
	c := float64(e.GETs)/1000*p.GETsPer1000 + float64(e.Bytes)/gib*p.PerGiB + float64(e.CrossNodeBytes)/gib*p.CrossNodePerGiB
	return math.Round(c*1e6) / 1e6
}

// billOf is the bill of epochs under p.
func billOf(epochs []BillEpoch, p api.Prices) *Bill {
	b := &Bill{Prices: p, Epochs: epochs, Total: BillEpoch{Epoch: -1}}
	for i := range b.Epochs {
		e := &b.Epochs[i]
		e.Cost = e.cost(p)
		b.Total.StoreReads += e.StoreReads
		b.Total.GETs += e.GETs
		b.Total.Bytes += e.Bytes
		b.Total.CrossNodeBytes += e.CrossNodeBytes
	}
	b.Total.Cost = b.Total.cost(p)
	return b
}

// gatewayBill is a gateway's plan's bill: its next-use policy's reads.
func gatewayBill(r Result, p api.Prices) *Bill {
	epochs := make([]BillEpoch, len(r.Epochs))
	for i, e := range r.Epochs {
		epochs[i] = BillEpoch{Epoch: e.Epoch, StoreReads: e.StoreReads, GETs: e.StoreGETs, Bytes: e.BackendBytes}
	}
	return billOf(epochs, p)
}

// clusterBill is a cluster plan's bill: its nodes' reads summed, and the
// bytes crossing nodes (with locality, as the cluster assigns).
func clusterBill(es []ClusterEpoch, p api.Prices) *Bill {
	epochs := make([]BillEpoch, len(es))
	for i, e := range es {
		epochs[i] = BillEpoch{Epoch: e.Epoch, StoreReads: e.StoreReads, GETs: e.StoreGETs, Bytes: e.StoreBytes, CrossNodeBytes: e.CrossNodeBytes}
	}
	return billOf(epochs, p)
}

// writeText writes the bill's totals: the store's loads, GETs and bytes
// over the planned epochs, and their cost when the prices are not zero.
func (bl *Bill) writeText(b *bytes.Buffer) {
	if bl == nil {
		return
	}
	t := bl.Total
	gets := ""
	if t.GETs > 0 {
		gets = fmt.Sprintf(", %d GETs", t.GETs)
	}
	cross := ""
	if t.CrossNodeBytes > 0 {
		cross = fmt.Sprintf(", %s across nodes", formatBytes(t.CrossNodeBytes))
	}
	fmt.Fprintf(b, "\nBill      %s from the store%s, %s read%s over %s",
		plural(t.StoreReads, "chunk load"), gets, formatBytes(t.Bytes), cross, plural(len(bl.Epochs), "epoch"))
	if p := bl.Prices; p != (api.Prices{}) {
		fmt.Fprintf(b, ": %.4f %s", t.Cost, p.Currency)
	}
	b.WriteString("\n")
}
