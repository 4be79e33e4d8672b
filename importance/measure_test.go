package importance

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// measure is what one sampling mode does to a dataset over some epochs.
type measure struct {
	readFrac   float64 // chunks read per epoch / chunks
	coverage   float64 // distinct samples drawn per epoch / samples
	maxDraws   int     // most draws of one sample in one epoch
	topDraws   float64 // draws per epoch of the top-scored decile, per sample
	lowDraws   float64 // draws per epoch of the bottom-scored decile, per sample
	heavyHit   float64 // reads of the hot (10 %) heaviest chunks / all reads
	neverChunk int     // chunks not read in any epoch
	neverDrawn int     // samples not drawn in any epoch
}

// measureOrders runs epochs 1..epochs of newOrder over a dataset of counts
// with scores (which rank the deciles and the heaviest chunks).
func measureOrders(t *testing.T, counts []int, scores []float32, epochs int, hot int, newOrder func(ep uint64) Order) measure {
	n := len(scores)
	first := make([]int, len(counts)+1)
	for c, k := range counts {
		first[c+1] = first[c] + k
	}
	chunkOf := func(id int) int { c, _ := slices.BinarySearch(first, id+1); return c - 1 }
	ref := mustEpoch(t, counts, mustSnapshot(t, scores), 0, 0, 1, 0) // weights only
	heavy := make(map[int]bool)
	for _, c := range heaviestOrder(ref)[:hot] {
		heavy[c] = true
	}
	byScore := make([]int, n)
	for i := range byScore {
		byScore[i] = i
	}
	slices.SortFunc(byScore, func(a, b int) int { return int(ref.SampleWeight(a)*1e6) - int(ref.SampleWeight(b)*1e6) })
	dec := n / 10

	var m measure
	everChunk := make([]bool, len(counts))
	everDrawn := make([]bool, n)
	reads, heavyReads := 0, 0
	for ep := 1; ep <= epochs; ep++ {
		o := newOrder(uint64(ep))
		draws := make([]int, n)
		for _, id := range o.AppendRange(nil, 0, o.NumSamples()) {
			draws[id]++
		}
		distinct := 0
		for i, d := range draws {
			if d > 0 {
				distinct++
				everDrawn[i] = true
			}
			m.maxDraws = max(m.maxDraws, d)
		}
		for _, c := range o.ChunkOrder() {
			if chunkHasDraws(draws[first[c]:first[c+1]]) {
				everChunk[c] = true
				reads++
				if heavy[chunkOf(first[c])] {
					heavyReads++
				}
			}
		}
		m.coverage += float64(distinct) / float64(n)
		for _, id := range byScore[:dec] {
			m.lowDraws += float64(draws[id])
		}
		for _, id := range byScore[n-dec:] {
			m.topDraws += float64(draws[id])
		}
	}
	m.readFrac = float64(reads) / float64(epochs*len(counts))
	m.coverage /= float64(epochs)
	m.lowDraws /= float64(epochs * dec)
	m.topDraws /= float64(epochs * dec)
	m.heavyHit = float64(heavyReads) / float64(reads)
	for _, e := range everChunk {
		if !e {
			m.neverChunk++
		}
	}
	for _, e := range everDrawn {
		if !e {
			m.neverDrawn++
		}
	}
	return m
}

func chunkHasDraws(d []int) bool {
	for _, v := range d {
		if v > 0 {
			return true
		}
	}
	return false
}

// TestMeasureReads measures, on 256 chunks of 64 samples at window 8, how
// much of the dataset each mode reads per epoch and how it spreads draws
// over samples; go test -v prints the table docs/importance.md quotes. The
// snapshot is held fixed over the epochs so the figures isolate the
// sampler from the training.
func TestMeasureReads(t *testing.T) {
	const chunks, per, window, epochs, hot = 256, 64, 8, 10, 26
	counts := uniformCounts(chunks, per)
	n := chunks * per
	equal := make([]float32, n)
	for i := range equal {
		equal[i] = 1
	}
	skewed := skewedScores(n, 77)
	clustered := clusteredScores(counts, 77)

	importance := func(scores []float32, hot int) func(uint64) Order {
		snap := mustSnapshot(t, scores)
		return func(ep uint64) Order { return mustEpoch(t, counts, snap, 9, ep, window, hot) }
	}
	uniform := func(ep uint64) Order {
		e, err := shuffle.NewEpoch(counts, 9, ep, window)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	rows := []struct {
		name   string
		scores []float32
		order  func(uint64) Order
	}{
		{"uniform shuffle (skewed scores)", skewed, uniform},
		{"importance, equal scores", equal, importance(equal, 0)},
		{"importance, skewed, hot 0", skewed, importance(skewed, 0)},
		{"importance, skewed, hot 26", skewed, importance(skewed, hot)},
		{"uniform shuffle (clustered scores)", clustered, uniform},
		{"importance, clustered, hot 0", clustered, importance(clustered, 0)},
		{"importance, clustered, hot 26", clustered, importance(clustered, hot)},
	}
	var table strings.Builder
	fmt.Fprintf(&table, "\n| mode | chunks read / epoch | distinct samples / epoch | draws / epoch, top 10 %% | draws / epoch, bottom 10 %% | max draws | reads in the 26 heaviest chunks | chunks / samples never read in %d epochs |\n", epochs)
	table.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	got := make(map[string]measure)
	for _, r := range rows {
		m := measureOrders(t, counts, r.scores, epochs, hot, r.order)
		got[r.name] = m
		fmt.Fprintf(&table, "| %s | %.1f %% | %.1f %% | %.2f | %.2f | %d | %.1f %% | %d / %d |\n",
			r.name, 100*m.readFrac, 100*m.coverage, m.topDraws, m.lowDraws, m.maxDraws, 100*m.heavyHit, m.neverChunk, m.neverDrawn)
	}
	t.Log(table.String())

	if m := got["uniform shuffle (skewed scores)"]; m.readFrac != 1 || m.coverage != 1 || m.maxDraws != 1 {
		t.Errorf("uniform shuffle: %+v, want every chunk and sample once", m)
	}
	if m := got["importance, equal scores"]; m.readFrac != 1 {
		t.Errorf("equal scores read %.3f of the chunks, want all", m.readFrac)
	}
	for _, name := range []string{"importance, skewed, hot 0", "importance, clustered, hot 0", "importance, skewed, hot 26", "importance, clustered, hot 26"} {
		m := got[name]
		if m.readFrac > 0.6 {
			t.Errorf("%s reads %.3f of the chunks per epoch, want at most 0.6", name, m.readFrac)
		}
		if m.topDraws < 3*m.lowDraws {
			t.Errorf("%s: top decile drawn %.2f an epoch, bottom %.2f: want at least 3×", name, m.topDraws, m.lowDraws)
		}
	}
	for _, scores := range []string{"skewed", "clustered"} {
		if h, u := got["importance, "+scores+", hot 26"].heavyHit, got["uniform shuffle ("+scores+" scores)"].heavyHit; h < 2*u {
			t.Errorf("%s, hot 26: %.3f of reads in the heaviest chunks, uniform %.3f: want at least 2×", scores, h, u)
		}
	}
}
