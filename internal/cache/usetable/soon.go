package usetable

import (
	"github.com/brandgw/brand/internal/job/catalog"
)

// Soon returns, of chunks (chunk IDs of ds's version), those that some
// followed stream of ds needs from where it is now to the end of the
// windows ahead windows past its current one, crossing into the next
// epoch at the boundary: what a node gaining those chunks in a
// membership change must hold before the change, so that no batch waits
// on a cold owner (internal/cluster/handover). Unlike the prefetch's Upcoming
// it does not ask which node reads a chunk: the chunks named are another
// node's to load. Importance streams are followed to their epoch's end,
// since the next epoch's snapshot is not sealed yet.
//
// It takes the use table's lock and computes at most two epochs' orders
// per stream (held by the streams in steady state): O(streams × windows
// × window chunks).
func (s *Table) Soon(ds *catalog.Dataset, chunks []int, ahead int) []int {
	want := make(map[int]bool, len(chunks))
	for _, c := range chunks {
		want[c] = true
	}
	needed := map[int]bool{}
	s.mu.Lock()
	for _, st := range s.streams {
		if st.DS.Name != ds.Name || st.DS.ID() != ds.ID() {
			continue
		}
		origin, e, ok := s.originOf(st)
		if !ok {
			continue
		}
		w, epoch := e.WindowOf(origin.pos), origin.epoch
		last := e.WindowOf(min(max(st.edge.pos, 0), e.NumSamples()-1))
		if st.edge.epoch != origin.epoch {
			last = e.NumWindows() - 1
		}
		for n := (last - w) + ahead + 1; n > 0; n-- {
			if w >= e.NumWindows() {
				next, err := st.order(s.orders, epoch+1)
				if st.ImportanceJob() || err != nil {
					break
				}
				e, epoch, w = next, epoch+1, 0
			}
			for _, c := range e.WindowChunks(w) {
				if want[c] {
					needed[c] = true
				}
			}
			w++
		}
	}
	s.mu.Unlock()
	out := make([]int, 0, len(needed))
	for _, c := range chunks {
		if needed[c] {
			out = append(out, c)
			delete(needed, c) // a chunk named twice is returned once
		}
	}
	return out
}
