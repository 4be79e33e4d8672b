package jobmodel

// A Cut is how an epoch of n positions is cut into global batches and
// ranks' slices (docs/shuffle.md §6): B samples a rank, World ranks,
// the cut starting at position Offset, a short final global batch
// dropped with DropLast.
type Cut struct {
	B, World, Offset int
	DropLast         bool
}

// G is the global batch: B·World positions.
func (c Cut) G() int { return c.B * c.World }

// Batches is the global batches of an epoch of n positions.
func (c Cut) Batches(n int) int {
	m := max(n-c.Offset, 0)
	if c.DropLast {
		return m / c.G()
	}
	return (m + c.G() - 1) / c.G()
}

// Global is global batch m's positions [start, end) of an epoch of n.
func (c Cut) Global(n, m int) (start, end int) {
	start = c.Offset + m*c.G()
	return start, min(start+c.G(), n)
}

// Rank is rank r's slice [start, end) of global batch m.
func (c Cut) Rank(n, m, r int) (start, end int) {
	gs, ge := c.Global(n, m)
	start = min(gs+r*c.B, ge)
	return start, min(start+c.B, ge)
}

// Shares is each rank's count in global batch m: its plain slice's.
func (c Cut) Shares(n, m int) []int {
	out := make([]int, c.World)
	for r := range out {
		s, e := c.Rank(n, m, r)
		out[r] = e - s
	}
	return out
}

// Steps counts a job's global steps under cut c through its epochs
// (docs/http-api.md, Steps): step 0 is epoch 0's first global batch, and
// epoch e has the batches of its order under the edits of epoch e and
// before. Len gives an epoch's samples.
type Steps struct {
	Cut Cut
	Len func(epoch uint64) (int, error)
}

// Step is the global step of batch m of epoch.
func (s Steps) Step(epoch uint64, m int) (uint64, error) {
	var step uint64
	for e := range epoch {
		n, err := s.Len(e)
		if err != nil {
			return 0, err
		}
		step += uint64(s.Cut.Batches(n))
	}
	return step + uint64(m), nil
}

// At is the epoch and batch of step, and its global batch's first
// position. An epoch of no batches is never passed (ok false).
func (s Steps) At(step uint64) (epoch uint64, m, pos int, ok bool, err error) {
	for e := uint64(0); ; e++ {
		n, err := s.Len(e)
		if err != nil {
			return 0, 0, 0, false, err
		}
		b := uint64(s.Cut.Batches(n))
		if b == 0 {
			return 0, 0, 0, false, nil
		}
		if step < b {
			pos, _ = s.Cut.Global(n, int(step))
			return e, int(step), pos, true, nil
		}
		step -= b
	}
}

// After is the first step whose global batch starts at or after position
// end of epoch: the first an edit may start from once a job is served up
// to end.
func (s Steps) After(epoch uint64, end int) (uint64, error) {
	n, err := s.Len(epoch)
	if err != nil {
		return 0, err
	}
	for m := range s.Cut.Batches(n) {
		if start, _ := s.Cut.Global(n, m); start >= end {
			return s.Step(epoch, m)
		}
	}
	return s.Step(epoch+1, 0)
}
