package livestats

import (
	"slices"
	"sync"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/balance"
	"github.com/brandgw/brand/internal/batch/layout"
)

// balances are what balanced jobs' batches weighed (api.Job.Balance), per
// cost, for /stats: each served batch's global batch's busiest rank over
// the ranks' mean, balanced and as the plain cut would have left it, and
// the ranks' costs of the last global batches served. A node counts the
// batches it serves, so a global batch whose ranks are served here counts
// once per rank: every rank's answer names the same global batch, and the
// figures are its ratios averaged over ranks.
type balances struct {
	mu     sync.Mutex
	byKind map[string]*balanceSums
}

// recentSteps bounds the global batches /stats lists per cost: enough to
// see the last steps of a few jobs, small enough to poll.
const recentSteps = 16

type balanceSums struct {
	batches            int64
	sum, worst         float64
	plainSum, plainTop float64
	// recent are the last global batches served, oldest first, each once
	// however many of its ranks were served.
	recent []*layout.Balanced
}

// Balanced records a served batch of a balanced job (b.Balanced set).
func (s *Stats) Balanced(b *layout.Balanced) {
	if b == nil {
		return
	}
	s.balance.mu.Lock()
	defer s.balance.mu.Unlock()
	if s.balance.byKind == nil {
		s.balance.byKind = map[string]*balanceSums{}
	}
	k := s.balance.byKind[b.Kind]
	if k == nil {
		k = &balanceSums{}
		s.balance.byKind[b.Kind] = k
	}
	r, p := balance.Ratio(b.Costs), balance.Ratio(b.Plain)
	k.batches++
	k.sum += r
	k.plainSum += p
	k.worst, k.plainTop = max(k.worst, r), max(k.plainTop, p)
	if slices.ContainsFunc(k.recent, func(x *layout.Balanced) bool { return x.Global == b.Global }) {
		return
	}
	if len(k.recent) == recentSteps {
		k.recent = slices.Delete(k.recent, 0, 1)
	}
	k.recent = append(k.recent, b)
}

// Balances returns the balanced jobs' figures per cost, by name.
func (s *Stats) Balances() []api.BalanceStats {
	s.balance.mu.Lock()
	defer s.balance.mu.Unlock()
	var out []api.BalanceStats
	for _, kind := range slices.Sorted(func(yield func(string) bool) {
		for k := range s.balance.byKind {
			if !yield(k) {
				return
			}
		}
	}) {
		k := s.balance.byKind[kind]
		n := float64(k.batches)
		st := api.BalanceStats{Balance: kind, Batches: k.batches, RatioMean: k.sum / n, RatioWorst: k.worst,
			PlainRatioMean: k.plainSum / n, PlainWorst: k.plainTop, Recent: make([]api.BalanceStep, len(k.recent))}
		for i, b := range k.recent {
			// The layout's costs are shared by every rank's batch and
			// never written after; /stats copies them all the same, so
			// its JSON is its own.
			st.Recent[i] = api.BalanceStep{Global: b.Global, Epoch: b.Epoch, Batch: b.Batch,
				Costs: slices.Clone(b.Costs), PlainCosts: slices.Clone(b.Plain)}
		}
		out = append(out, st)
	}
	return out
}
