package chunkindex

import (
	"encoding/hex"
	"fmt"
	"slices"
)

// A Lineage is an index's line of versions (Index.Lineage): the index of
// a dataset served in place to which files were added (`brand index
// --append`, package dataset) extends the index it was made from. Its
// chunks are the parent's, in the same order, followed by the new files'
// chunks, so every sample of the parent keeps its ID, and it records what
// it extends: the parent's ID and chunk count, and the parent's own
// ancestors, nearest first, at most MaxAncestors. A gateway that holds
// the index can then serve a job pinned to an ancestor the ancestor's
// order, as the prefix of its chunks (AncestorIndex), rather than refuse
// it.
//
// A Lineage is a view of its index, cheap to make and to copy; the
// lineage itself is stored in the index (its encoding's in-place
// section), which is immutable.
type Lineage struct{ ix *Index }

// Lineage returns ix's line of versions: what it extends, its root, and
// the ancestors it can serve as prefixes of its chunks.
func (ix *Index) Lineage() Lineage { return Lineage{ix} }

// MaxAncestors bounds the ancestors an index records: the oldest but
// the root (Root) are dropped from a longer chain, and a job pinned to
// one of those starts its epoch again, as after a re-pack.
const MaxAncestors = 16

// An Ancestor is an index version another extends: its ID and its
// number of chunks, the first Chunks of the extending index's.
type Ancestor struct {
	ID     string
	Chunks int
}

// lineageRecordLen is an ancestor's encoded size: its ID as 8 bytes,
// its chunk count u32.
const lineageRecordLen = 12

// Ancestors returns the versions the index extends, its parent first;
// nil for an index that extends none. The slice is shared: read it,
// never write it.
func (l Lineage) Ancestors() []Ancestor { return l.ix.lineage }

// Extend returns next recorded as the next version of l's index, its
// parent: the parent's chunks must be next's first ones — the same keys,
// sizes, ETags, samples and sample keys, and the same checksums where the
// parent has them — and next a deferred index of the same format. The
// result records the parent's ID and chunk count, then the parent's own
// ancestors, at most MaxAncestors. Errors wrap ErrInvalid.
func (l Lineage) Extend(next *Index) (*Index, error) {
	ix, parent := next, l.ix
	switch {
	case ix.part != nil || parent.part != nil:
		return nil, fmt.Errorf("%w: a partial index neither extends nor is extended", ErrInvalid)
	case !ix.deferred || !parent.deferred:
		return nil, fmt.Errorf("%w: only the index of a dataset served in place extends another", ErrInvalid)
	case ix.source.Format != parent.source.Format:
		return nil, fmt.Errorf("%w: an index of %s data cannot extend one of %s data", ErrInvalid, ix.source.Format, parent.source.Format)
	case parent.NumChunks() > ix.NumChunks():
		return nil, fmt.Errorf("%w: %d chunks cannot extend %d", ErrInvalid, ix.NumChunks(), parent.NumChunks())
	case (ix.spans == nil) != (parent.spans == nil):
		return nil, fmt.Errorf("%w: an index with checksums and one without: both or neither carry them", ErrInvalid)
	}
	for c := range parent.NumChunks() {
		if ix.chunks[c] != parent.chunks[c] {
			return nil, fmt.Errorf("%w: chunk %d is %+v, the parent's %+v", ErrInvalid, c, ix.chunks[c], parent.chunks[c])
		}
		if parent.spans != nil && !slices.Equal(ix.spans[c], parent.spans[c]) {
			return nil, fmt.Errorf("%w: chunk %d %q: its checksums differ from the parent's", ErrInvalid, c, ix.chunks[c].Key)
		}
	}
	for id := range parent.NumSamples() {
		if ix.SampleKey(id) != parent.SampleKey(id) {
			return nil, fmt.Errorf("%w: sample %d is %q, the parent's %q", ErrInvalid, id, ix.SampleKey(id), parent.SampleKey(id))
		}
	}
	lineage := append([]Ancestor{{ID: parent.ID(), Chunks: parent.NumChunks()}}, parent.lineage...)
	if len(lineage) > MaxAncestors {
		// Drop the oldest but the root, which Root names for ever.
		lineage = append(lineage[:MaxAncestors-1], lineage[len(lineage)-1])
	}
	return ix.Lineage().prefix(lineage, "", ix.NumChunks()), nil
}

// Root returns the ID of the first version of the lineage — the index
// the dataset was made with before any append — or the index's own ID if
// it extends none. A cluster hashes chunks to their owners by it
// (cluster.IndexKey), so that an append moves only the new chunks and
// the few old ones bounded loads shift, not every chunk of the dataset
// as a new key would. Extend keeps the root when it drops ancestors.
func (l Lineage) Root() string {
	if len(l.ix.lineage) == 0 {
		return l.ix.ID()
	}
	return l.ix.lineage[len(l.ix.lineage)-1].ID
}

// AncestorIndex returns the version id of the dataset that the index
// extends, as far as serving it goes: an index of the index's first
// chunks and their samples, named id, which decodes and reads them as
// the index does (its in-place description is the index's, whose first
// chunks are the ancestor's). It is not the ancestor's encoding, and
// refuses to be encoded. ok is false when the index does not record id.
//
// Of a partial index (Open) the ancestor is a view that shares the
// index's tables: a table it needs is read from the index's object,
// which holds the ancestor's chunks' tables as they were (Extend checks
// it). That is the only way a cluster node can go on reading an ancestor
// once an append has replaced the stored object: an index opened from
// the ancestor's own object would read its tables from an object that
// is no longer there.
func (l Lineage) AncestorIndex(id string) (anc *Index, ok bool) {
	line := l.ix.lineage
	i := slices.IndexFunc(line, func(a Ancestor) bool { return a.ID == id })
	if i < 0 {
		return nil, false
	}
	anc = l.prefix(line[i+1:], id, line[i].Chunks)
	if anc.part == nil {
		if a, b, dup := anc.cols.buildLookup(); dup {
			// The samples are a prefix of the index's, whose keys are
			// unique.
			panic(fmt.Sprintf("chunkindex: samples %d and %d of an ancestor's index have the same key %q", a, b, anc.SampleKey(a)))
		}
	}
	return anc, true
}

// prefix returns an index of the first chunks chunks of l's index,
// sharing its columns, or of a partial index its tables (part), which
// answer for chunk c of the prefix as for chunk c of the index; recording
// lineage (none if empty); named id (then not encodable) unless id is "".
// The key lookup of a whole index's prefix is the index's, which knows
// samples past the prefix: AncestorIndex builds the prefix's own. A
// partial prefix is of a deferred index (only those extend others), whose
// sample lengths are in its decoded chunks: its SampleBytes is the
// index's, 0.
func (l Lineage) prefix(lineage []Ancestor, id string, chunks int) *Index {
	ix := l.ix
	if len(lineage) == 0 {
		lineage = nil
	}
	out := &Index{
		chunks: ix.chunks[:chunks:chunks], chunkStart: ix.chunkStart[: chunks+1 : chunks+1],
		part: ix.part, deferred: ix.deferred, source: ix.source, lineage: lineage,
	}
	if ix.part == nil {
		out.cols = ix.cols.prefix(ix.chunkStart[chunks])
	}
	for c := range chunks {
		out.total += ix.chunks[c].Size
	}
	if ix.spans != nil {
		out.spans = ix.spans[:chunks:chunks]
	}
	if id != "" {
		out.id, out.prefix = id, true
		out.idOnce.Do(func() {})
	}
	return out
}

// appendLineage appends the lineage to b: its length u32, then each
// ancestor's ID (8 bytes) and chunk count u32.
func (ix encoding) appendLineage(b []byte) []byte {
	if ix.lineage == nil {
		return b
	}
	b = le.AppendUint32(b, uint32(len(ix.lineage)))
	for _, a := range ix.lineage {
		id, _ := hex.DecodeString(a.ID) // checked when made or decoded
		b = append(b, id...)
		b = le.AppendUint32(b, uint32(a.Chunks))
	}
	return b
}

// lineageLen is the encoded size of the lineage.
func (ix encoding) lineageLen() int64 {
	if ix.lineage == nil {
		return 0
	}
	return 4 + lineageRecordLen*int64(len(ix.lineage))
}

// parseLineage reads a lineage from the front of p and returns the bytes
// it took: 1 to MaxAncestors ancestors, each of at most chunks chunks and
// of no more than the one before it.
func parseLineage(p []byte, chunks int) ([]Ancestor, int, error) {
	if len(p) < 4 {
		return nil, 0, fmt.Errorf("%w: the lineage needs 4 bytes, %d remain", ErrCorrupt, len(p))
	}
	n := int(le.Uint32(p))
	if n == 0 || n > MaxAncestors {
		return nil, 0, fmt.Errorf("%w: a lineage of %d ancestors (1 to %d)", ErrCorrupt, n, MaxAncestors)
	}
	if len(p) < 4+n*lineageRecordLen {
		return nil, 0, fmt.Errorf("%w: a lineage of %d ancestors needs %d bytes, %d remain", ErrCorrupt, n, 4+n*lineageRecordLen, len(p))
	}
	out := make([]Ancestor, n)
	most := chunks
	for i := range out {
		r := p[4+i*lineageRecordLen:]
		out[i] = Ancestor{ID: hex.EncodeToString(r[:8]), Chunks: int(le.Uint32(r[8:]))}
		if out[i].Chunks > most {
			return nil, 0, fmt.Errorf("%w: ancestor %d (%s) has %d chunks, more than the %d after it", ErrCorrupt, i, out[i].ID, out[i].Chunks, most)
		}
		most = out[i].Chunks
	}
	return out, 4 + n*lineageRecordLen, nil
}
