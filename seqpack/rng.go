package seqpack

import "github.com/brandgw/brand/internal/seeded"

// domainPack seeds the permutation of a best-fit window's sequences: the
// ASCII bytes "brandpak" read big-endian, like shuffle's domains
// (docs/shuffle.md §1, §12). Changing it changes every packed epoch.
const domainPack uint64 = 0x6272616e6470616b

// permute applies the window's permutation to a: the Fisher–Yates shuffle
// of the stream (seed, epoch, "brandpak", w).
func permute(a []int, seed, epoch uint64, w int) {
	s := seeded.New(seed, epoch, domainPack, uint64(w))
	s.Shuffle(a, 0)
}
