// Package gopshuffle is the GOP-then-sample order of a clip job's window
// (docs/shuffle.md §17): the samples of one window of the chunk-then-sample
// order (package shuffle), permuted so that the samples which need one
// keyframe group (GOP) of a video fall close together, as chunk-then-sample
// keeps a chunk's samples close together within an epoch.
//
// # Why
//
// A clip's frames are decoded from the keyframe before them, through every
// frame after it in decode order: a loader that decodes per sample decodes
// a GOP once for each sample that needs it. The data node decodes a GOP
// once for all the samples of a run of the order that need it (a decode
// horizon), holding its frames until the last of them is served. In the
// default order a window's samples are uniformly mixed, so a GOP's samples
// are spread over the whole window and its frames are held that long; in
// this order they are spread over a GOP window of Size groups, whose
// frames fit in memory where a window's do not.
//
// # The order
//
// A sample's group is a number the caller gives it (a clip job's: the
// first GOP its frames need). Of a window's samples, in the order the
// window's own permutation starts from (its units in unit order, each
// unit's IDs ascending), the distinct groups are listed in the order of
// their first sample and permuted (Fisher–Yates with the stream (seed,
// epoch, DOMAIN_GOPS, w)); the permuted list is cut into GOP windows of
// Size groups (the last may hold fewer); the samples of GOP window k —
// group by group in the permuted order, each group's samples in their
// order — are permuted with the stream (seed, epoch, DOMAIN_GOP_WINDOW,
// w·2^32 + k). The window's order is GOP window 0's samples, then 1's, and
// so on. So:
//
//   - Size = 1: runs of one group's samples, in random order within each
//     run (as a window of one chunk is a run of its samples);
//   - Size ≥ the window's groups: a uniform permutation of the window, with
//     other draws than the default order's.
//
// # Stability
//
// A pure function of (the window's samples and groups, seed, epoch, w,
// Size): no world size, rank, batch size or time, so an epoch is the same
// at every world size and resumes exactly from any position. Its streams
// are package seeded's (docs/shuffle.md §1–§4) with domains of their own;
// testdata/golden.json pins it and testdata/reference.py, a stdlib-only
// Python implementation of §17, reproduces it (TestPythonReference).
//
// # Costs
//
// O(samples of the window) time and memory, two permutations' draws.
//
// # Concurrency
//
// Permute is a pure function, safe for concurrent use.
package gopshuffle

import (
	"fmt"

	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/seeded"
)

// The streams' domains: the ASCII bytes "brandgop" and "brandgpw".
const (
	domainGOPs      uint64 = 0x6272616e64676f70
	domainGOPWindow uint64 = 0x6272616e64677077
)

// MaxSize bounds Size: more groups than a window can hold is a uniform
// shuffle of it anyway.
const MaxSize = 1 << 20

// ErrInvalid marks arguments Permute refuses: the caller's invariants
// (a group list that does not cover the samples), never a user's input,
// which the job's rules check first; so it answers 500.
var ErrInvalid = errkind.New(errkind.Internal, "gopshuffle: invalid")

// Window is one window of an epoch in GOP-then-sample order.
type Window struct {
	// IDs are the window's samples in order.
	IDs []int
	// Starts[k] is where GOP window k's samples start in IDs;
	// Starts[len(Starts)-1] is len(IDs).
	Starts []int
}

// GOPWindow returns the GOP window holding position i of IDs (0 ≤ i <
// len(IDs)).
func (w Window) GOPWindow(i int) int {
	lo, hi := 0, len(w.Starts)-1
	for lo+1 < hi {
		m := (lo + hi) / 2
		if w.Starts[m] <= i {
			lo = m
		} else {
			hi = m
		}
	}
	return lo
}

// Permute returns window w of an epoch in GOP-then-sample order: ids are
// the window's samples in the order the window's own permutation starts
// from, groups[i] the group of ids[i], size the groups a GOP window
// shuffles together (1 to MaxSize). ids is not modified.
func Permute(ids []int, groups []uint64, seed, epoch uint64, w, size int) (Window, error) {
	switch {
	case len(ids) != len(groups):
		return Window{}, fmt.Errorf("%w: %d samples and %d groups", ErrInvalid, len(ids), len(groups))
	case size < 1 || size > MaxSize:
		return Window{}, fmt.Errorf("%w: a GOP window of %d groups (1 to %d)", ErrInvalid, size, MaxSize)
	case w < 0 || uint64(w) >= 1<<32:
		return Window{}, fmt.Errorf("%w: window %d (0 to 2^32-1)", ErrInvalid, w)
	case uint64(len(ids)) >= 1<<32:
		return Window{}, fmt.Errorf("%w: a window of %d samples (fewer than 2^32)", ErrInvalid, len(ids))
	}
	// The groups in the order of their first sample, and each group's
	// samples in theirs.
	at := map[uint64]int{}
	var members [][]int
	for i, g := range groups {
		k, ok := at[g]
		if !ok {
			k = len(members)
			at[g] = k
			members = append(members, nil)
		}
		members[k] = append(members[k], ids[i])
	}
	order := make([]int, len(members))
	for k := range order {
		order[k] = k
	}
	s := seeded.New(seed, epoch, domainGOPs, uint64(w))
	s.Shuffle(order, 0)
	out := Window{IDs: make([]int, 0, len(ids)), Starts: []int{0}}
	for k := 0; k*size < len(order); k++ {
		from := len(out.IDs)
		for _, g := range order[k*size : min((k+1)*size, len(order))] {
			out.IDs = append(out.IDs, members[g]...)
		}
		s := seeded.New(seed, epoch, domainGOPWindow, uint64(w)<<32|uint64(k))
		s.Shuffle(out.IDs[from:], 0)
		out.Starts = append(out.Starts, len(out.IDs))
	}
	return out, nil
}
