package layout

import (
	"strconv"
)

// A balanced job (api.Job.Balance) takes each global batch whole, weighs
// its samples — a token job's sequences by their attention or tokens, a
// vision job's also by their vision tokens, a job of samples by their
// stored bytes — and gives each rank its share
// of them by package balance's rule, in place of the plain cut and of a
// cluster's locality-aware assignment (Source.Assigns): the ranks' costs,
// not where the chunks live, decide. The global batch's samples are the
// plain cut's; a rank takes as many as the plain cut gives it, in their
// order in the batch. Every rank of a step computes the same assignment,
// which is memoised once for the batch's other ranks. Which jobs may be
// balanced, and by which cost, is the table's (internal/job/features).

// Balanced is what a balanced batch's layout says of its global batch:
// the cost its ranks were weighed by, and every rank's cost, balanced and
// as the plain cut would have left them.
type Balanced struct {
	Kind string
	// Global names the global batch: its rank 0's ETag, the same in
	// every rank's answer.
	Global       string
	Epoch, Batch uint64
	Costs        []uint64 // per rank, this global batch
	Plain        []uint64 // per rank, had the batch been cut plainly
}

// FormatCosts writes the ranks' costs comma-separated (the
// Brand-Rank-Costs header).
func (b *Balanced) FormatCosts() string {
	out := make([]byte, 0, 12*len(b.Costs))
	for r, c := range b.Costs {
		if r > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendUint(out, c, 10)
	}
	return string(out)
}
