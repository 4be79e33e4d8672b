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
// the ranks' mean, balanced and as the plain cut would have left it. A
// node counts the batches it serves, so a global batch whose ranks are
// served here counts once per rank: every rank's answer names the same
// global batch, and the figures are its ratios averaged over ranks.
type balances struct {
	mu     sync.Mutex
	byKind map[string]*balanceSums
}

type balanceSums struct {
	batches            int64
	sum, worst         float64
	plainSum, plainTop float64
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
		out = append(out, api.BalanceStats{Balance: kind, Batches: k.batches, RatioMean: k.sum / n, RatioWorst: k.worst,
			PlainRatioMean: k.plainSum / n, PlainWorst: k.plainTop})
	}
	return out
}
