package chunkindex

import (
	"cmp"
	"hash/maphash"
	"math/bits"
	"slices"
	"sync"
)

// columns are the sample tables of an index with every table in memory
// (New, Decode): each sample's record, column by column, and all keys in
// one string, so that an index of millions of samples is a handful of
// allocations the garbage collector never has to scan (about 20 bytes
// per sample plus the keys); and the lookup of a sample by its key.
type columns struct {
	offsets []int64
	lengths []uint32
	crcs    []uint32
	keyEnds []uint32 // sample i's key is keys[keyEnds[i-1]:keyEnds[i]]
	keys    string

	// byHash holds the sample IDs ordered by maphash of their keys: it finds
	// duplicates without sorting strings and serves Lookup by binary search.
	// Hashes are recomputed on probes rather than stored, which keeps 8 bytes
	// per sample off the heap; the random seed keeps crafted collisions out.
	seed   maphash.Seed
	byHash []uint32
}

// key returns sample id's key. It does not allocate.
func (t *columns) key(id int) string {
	start := uint32(0)
	if id > 0 {
		start = t.keyEnds[id-1]
	}
	return t.keys[start:t.keyEnds[id]]
}

// sampleBytes is the sum of the sample lengths.
func (t *columns) sampleBytes() int64 {
	var n int64
	for _, l := range t.lengths {
		n += int64(l)
	}
	return n
}

// bytes is what the columns hold: the records, keys and lookup table.
func (t *columns) bytes() int64 {
	return int64(len(t.offsets))*8 + int64(len(t.lengths)+len(t.crcs)+len(t.keyEnds)+len(t.byHash))*4 + int64(len(t.keys))
}

// prefix returns the columns of the first n samples, sharing these. Its
// lookup is this one, which knows samples past the prefix, until
// buildLookup builds its own.
func (t *columns) prefix(n int) columns {
	keyEnd := uint32(0)
	if n > 0 {
		keyEnd = t.keyEnds[n-1]
	}
	return columns{
		offsets: t.offsets[:n:n], lengths: t.lengths[:n:n], crcs: t.crcs[:n:n], keyEnds: t.keyEnds[:n:n],
		keys: t.keys[:keyEnd], seed: t.seed, byHash: t.byHash,
	}
}

// buildLookup orders sample IDs by key hash and finds duplicate keys:
// dup reports two samples a and b with the same key, and the lookup is
// then not to be used.
func (t *columns) buildLookup() (a, b int, dup bool) {
	type entry struct {
		h  uint64
		id uint32
	}
	t.seed = maphash.MakeSeed()
	entries := make([]entry, len(t.keyEnds))
	for i := range entries {
		entries[i] = entry{maphash.String(t.seed, t.key(i)), uint32(i)}
	}
	slices.SortFunc(entries, func(a, b entry) int {
		if c := cmp.Compare(a.h, b.h); c != 0 {
			return c
		}
		return cmp.Compare(a.id, b.id)
	})
	t.byHash = make([]uint32, len(entries))
	for i, e := range entries {
		t.byHash[i] = e.id
		// Keys with equal hashes are adjacent; compare each with the run
		// before it (runs longer than one are astronomically rare).
		for j := i - 1; j >= 0 && entries[j].h == e.h; j-- {
			a, b := int(entries[j].id), int(e.id)
			if t.key(a) == t.key(b) {
				return a, b, true
			}
		}
	}
	return 0, 0, false
}

// lookupWalk is LookupMany by a walk of the hash order cut in parts
// walked at once.
func (t *columns) lookupWalk(keys []string, parts int) (ids []int, found []bool) {
	ids, found = make([]int, len(keys)), make([]bool, len(keys))
	type query struct {
		h uint64
		i int
	}
	// The keys in their hashes' order: the hashes being uniform, a pass
	// that puts each key in its bucket by the hash's top bits leaves
	// buckets of a few keys each to sort, which costs a fraction of a
	// sort of them all.
	shift := 64 - min(bits.Len(uint(len(keys)/8)), 24)
	start := make([]int, 1<<(64-shift)+1)
	hs := make([]uint64, len(keys))
	for i, k := range keys {
		hs[i] = maphash.String(t.seed, k)
		start[hs[i]>>shift+1]++
	}
	for b := 1; b < len(start); b++ {
		start[b] += start[b-1]
	}
	qs := make([]query, len(keys))
	next := slices.Clone(start[:len(start)-1])
	for i, h := range hs {
		qs[next[h>>shift]] = query{h, i}
		next[h>>shift]++
	}
	for b := range len(start) - 1 {
		slices.SortFunc(qs[start[b]:start[b+1]], func(a, b query) int { return cmp.Compare(a.h, b.h) })
	}
	// Each part starts from its first key's place in the hash order, and
	// writes its keys' entries of ids and found alone.
	var wg sync.WaitGroup
	for p := range parts {
		wg.Go(func() {
			part := qs[p*len(qs)/parts : (p+1)*len(qs)/parts]
			if len(part) == 0 {
				return
			}
			j, _ := slices.BinarySearchFunc(t.byHash, part[0].h, func(id uint32, h uint64) int {
				return cmp.Compare(maphash.String(t.seed, t.key(int(id))), h)
			})
			known := -1
			var hj uint64 // the hash of t.byHash[j], once computed
			for _, qu := range part {
				h, q := qu.h, qu.i
				for ; j < len(t.byHash); j++ {
					if known != j {
						hj, known = maphash.String(t.seed, t.key(int(t.byHash[j]))), j
					}
					if hj >= h {
						break
					}
				}
				// The run of samples with hash h, from j: keys collide rarely.
				for k := j; k < len(t.byHash); k++ {
					id := int(t.byHash[k])
					if k != j && maphash.String(t.seed, t.key(id)) != h || k == j && hj != h {
						break
					}
					if t.key(id) == keys[q] {
						ids[q], found[q] = id, true
						break
					}
				}
			}
		})
	}
	wg.Wait()
	return ids, found
}

// lookup is Lookup: a binary search of the hash order.
func (t *columns) lookup(key string) (id int, ok bool) {
	h := maphash.String(t.seed, key)
	i, _ := slices.BinarySearchFunc(t.byHash, h, func(id uint32, h uint64) int {
		return cmp.Compare(maphash.String(t.seed, t.key(int(id))), h)
	})
	for ; i < len(t.byHash); i++ {
		id := int(t.byHash[i])
		k := t.key(id)
		if k == key {
			return id, true
		}
		if maphash.String(t.seed, k) != h {
			break
		}
	}
	return 0, false
}
