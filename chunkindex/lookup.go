package chunkindex

import (
	"cmp"
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"
	"sort"
	"strings"
)

// keyFinder finds, for a partial index, the chunks a key can be in
// without the keys in memory; the key is then looked for in their tables.
type keyFinder interface {
	// candidates appends to dst the chunks key can be in.
	candidates(dst []int, key string) []int
	// ordered reports whether each chunk's keys ascend, so that a
	// chunk's table is searched by bisection.
	ordered() bool
	bytes() int64
}

// lookup finds key's sample: one table load per candidate chunk, which is
// one chunk but for hash collisions (see hashedKeys).
func (p *partial) lookup(ctx context.Context, ix *Index, key string) (int, bool, error) {
	keys, err := p.finder(ctx)
	if err != nil {
		return 0, false, err
	}
	var buf [4]int
	for _, c := range keys.candidates(buf[:0], key) {
		if c >= ix.NumChunks() {
			continue // a chunk of the index ix is an ancestor's view of (Lineage.AncestorIndex)
		}
		release, err := ix.Tables().Prepare(ctx, []int{c})
		if err != nil {
			return 0, false, err
		}
		t := p.slots[c].Load()
		first, n := ix.ChunkRange(c)
		i := n
		if keys.ordered() {
			i = sort.Search(n, func(i int) bool { return t.key(i) >= key })
		} else {
			for j := range n {
				if t.key(j) == key {
					i = j
					break
				}
			}
		}
		found := i < n && t.key(i) == key
		release()
		if found {
			return first + i, true, nil
		}
	}
	return 0, false, nil
}

// finder returns what finds a key's chunk, building the hash directory
// on the first call if Open did not keep one. Lookups wait for the build.
// It is of the index p was opened as, whose keys an ancestor's view
// (Lineage.AncestorIndex) shares.
func (p *partial) finder(ctx context.Context) (keyFinder, error) {
	p.keysMu.Lock()
	defer p.keysMu.Unlock()
	if p.keys != nil {
		return p.keys, nil
	}
	h, err := p.directory(ctx, p.index)
	if err != nil {
		return nil, fmt.Errorf("building the key directory of index %s: %w", p.index.ID(), err)
	}
	p.keys = h
	return h, nil
}

// orderedKeys finds a key's chunk among chunks whose key ranges do not
// overlap: the last chunk, in first-key order, whose first key is not
// after the key. It holds each non-empty chunk's first key: a few bytes
// a chunk.
type orderedKeys struct {
	order []uint32 // non-empty chunks by first key
	ends  []uint32 // order[j]'s first key is blob[ends[j-1]:ends[j]]
	blob  string
}

func (o *orderedKeys) first(j int) string {
	start := uint32(0)
	if j > 0 {
		start = o.ends[j-1]
	}
	return o.blob[start:o.ends[j]]
}

func (o *orderedKeys) candidates(dst []int, key string) []int {
	j := sort.Search(len(o.order), func(j int) bool { return o.first(j) > key }) - 1
	if j >= 0 {
		dst = append(dst, int(o.order[j]))
	}
	return dst
}

func (o *orderedKeys) ordered() bool { return true }

func (o *orderedKeys) bytes() int64 { return int64(len(o.order)+len(o.ends))*4 + int64(len(o.blob)) }

// disjoint reports whether the non-empty chunks' key ranges, sorted by
// first key, do not overlap; each chunk's keys ascend already.
func (k *keyOrder) disjoint() bool {
	order := k.nonEmpty()
	for j := 1; j < len(order); j++ {
		if k.last[order[j-1]] >= k.first[order[j]] {
			return false
		}
	}
	return true
}

func (k *keyOrder) nonEmpty() []uint32 {
	var order []uint32
	for c, f := range k.first {
		if f != "" {
			order = append(order, uint32(c))
		}
	}
	slices.SortFunc(order, func(a, b uint32) int { return strings.Compare(k.first[a], k.first[b]) })
	return order
}

// lookup returns the orderedKeys of ordered keys.
func (k *keyOrder) lookup() *orderedKeys {
	o := &orderedKeys{order: k.nonEmpty()}
	o.ends = make([]uint32, len(o.order))
	var sb strings.Builder
	for j, c := range o.order {
		sb.WriteString(k.first[c])
		o.ends[j] = uint32(sb.Len())
	}
	o.blob = sb.String()
	return o
}

// hashedKeys finds a key's chunk by hash when the keys are in no order
// (a shuffled pack): samples are grouped in buckets by the top bits of
// their key's hash, about 16 to 32 a bucket, and each entry holds the
// next bits of the hash (a fingerprint) and the sample's chunk, in 32
// bits (64 beyond 2^24 chunks). A lookup scans its bucket for entries
// whose fingerprint matches: with 2^18 chunks, 14 fingerprint bits make
// a second, useless table load about once in 500 lookups. The cost is
// 4 bytes a sample plus 4 a bucket: about 4.2 bytes a sample.
type hashedKeys struct {
	seed       maphash.Seed
	bucketBits uint
	chunkBits  uint
	dir        []uint32 // bucket b's entries are [dir[b], dir[b+1])
	e32        []uint32 // fingerprint<<chunkBits | chunk
	e64        []uint64 // fingerprint<<32 | chunk, beyond 2^24 chunks
}

func (h *hashedKeys) bucket(x uint64) uint64 {
	if h.bucketBits == 0 {
		return 0
	}
	return x >> (64 - h.bucketBits)
}

// fp is x's fingerprint: the bits after the bucket's.
func (h *hashedKeys) fp(x uint64) uint64 {
	if h.e64 != nil {
		return (x << h.bucketBits) >> 32
	}
	return (x << h.bucketBits) >> (64 - (32 - h.chunkBits))
}

func (h *hashedKeys) candidates(dst []int, key string) []int {
	x := maphash.String(h.seed, key)
	b, fp := h.bucket(x), h.fp(x)
	for j := h.dir[b]; j < h.dir[b+1]; j++ {
		var efp uint64
		var c int
		if h.e64 != nil {
			efp, c = h.e64[j]>>32, int(uint32(h.e64[j]))
		} else {
			efp, c = uint64(h.e32[j]>>h.chunkBits), int(h.e32[j]&(1<<h.chunkBits-1))
		}
		if efp == fp && !slices.Contains(dst, c) {
			dst = append(dst, c)
		}
	}
	return dst
}

func (h *hashedKeys) ordered() bool { return false }

func (h *hashedKeys) bytes() int64 {
	return int64(len(h.dir)+len(h.e32))*4 + int64(len(h.e64))*8
}

// buildHashed builds the hash directory from each sample's key hash, and
// returns the pairs of samples whose keys hash alike (64 bits): the only
// ones that can be duplicates.
func buildHashed(seed maphash.Seed, hashes []uint64, ix *Index) (*hashedKeys, [][2]int) {
	n := len(hashes)
	h := &hashedKeys{seed: seed, bucketBits: uint(bits.Len(uint(n / 32))), chunkBits: uint(max(1, bits.Len(uint(max(len(ix.chunks)-1, 0)))))}
	nb := 1 << h.bucketBits
	h.dir = make([]uint32, nb+1)
	for _, x := range hashes {
		h.dir[h.bucket(x)+1]++
	}
	for b := range nb {
		h.dir[b+1] += h.dir[b]
	}
	if h.chunkBits > 24 {
		h.e64 = make([]uint64, n)
	} else {
		h.e32 = make([]uint32, n)
	}
	pos := slices.Clone(h.dir[:nb])
	ids := make([]uint32, n) // by bucket, for the duplicate check
	for c := range ix.chunks {
		first, cn := ix.ChunkRange(c)
		for i := first; i < first+cn; i++ {
			x := hashes[i]
			b := h.bucket(x)
			j := pos[b]
			pos[b]++
			ids[j] = uint32(i)
			if h.e64 != nil {
				h.e64[j] = h.fp(x)<<32 | uint64(c)
			} else {
				h.e32[j] = uint32(h.fp(x))<<h.chunkBits | uint32(c)
			}
		}
	}
	var dups [][2]int
	for b := range nb {
		m := ids[h.dir[b]:h.dir[b+1]]
		if len(m) < 2 {
			continue
		}
		slices.SortFunc(m, func(a, b uint32) int { return cmp.Compare(hashes[a], hashes[b]) })
		for k := 1; k < len(m); k++ {
			if hashes[m[k]] == hashes[m[k-1]] {
				dups = append(dups, [2]int{int(m[k-1]), int(m[k])})
			}
		}
	}
	return h, dups
}

// checkDuplicates compares the keys of samples whose keys hash alike,
// loading their tables: Decode's step 12 for a partial index.
func (p *partial) checkDuplicates(ctx context.Context, ix *Index, pairs [][2]int) error {
	for _, pr := range pairs {
		a, b := pr[0], pr[1]
		release, err := ix.Tables().Prepare(ctx, []int{ix.ChunkOf(a), ix.ChunkOf(b)})
		if err != nil {
			return err
		}
		ka, kb := ix.SampleKey(a), ix.SampleKey(b)
		release()
		if ka == kb {
			ca, cb := ix.ChunkOf(a), ix.ChunkOf(b)
			return fmt.Errorf("%w: %w %q in sample %d (chunk %d %q) and sample %d (chunk %d %q)",
				ErrCorrupt, ErrDuplicateKey, ka, a, ca, ix.chunks[ca].Key, b, cb, ix.chunks[cb].Key)
		}
	}
	return nil
}
