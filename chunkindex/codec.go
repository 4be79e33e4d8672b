package chunkindex

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
)

// The binary index layout, version 1 (docs/format.md is the full reference).
// All integers are little-endian.
//
//	header        32 bytes: magic "BRANDIDX", version u32, flags u32,
//	              chunks u32, samples u32, chunk table bytes u32, key bytes u32
//	chunk table   per chunk: size u64, samples u32, key len u16, key,
//	              ETag len u16, ETag
//	sample table  per sample, 20 bytes: offset u64, length u32, CRC32C u32,
//	              key end u32
//	key blob      all sample keys, concatenated in sample order
//	in place      only with FlagDeferred: format name len u16, name,
//	              SHA-256 of the format's description (32 bytes),
//	              created (Unix seconds) i64; with FlagChecksums too,
//	              per chunk: spans u32, then per span offset u64,
//	              length u64, CRC32C u32
//	trailer       CRC32C (Castagnoli) of every byte before it, u32
const (
	// Magic opens every encoded index.
	Magic = "BRANDIDX"
	// FormatVersion is the index format version this package writes and the
	// only one it reads.
	FormatVersion = 1

	headerSize      = 32
	chunkRecordMin  = 16 // size u64 + samples u32 + two u16 lengths
	sampleRecordLen = 20
	trailerSize     = 4
)

var le = binary.LittleEndian

// Feature flags, in the header's flags word. A reader refuses any flag it
// does not know (ErrVersion), so an index that needs a feature is never
// read by a build that would ignore it.
const (
	// FlagDeferred marks the index of a dataset served in place
	// (NewDeferred): its sample records hold each sample's ordinal in its
	// chunk and no range; the ranges are in the decoded chunks' tables
	// (package format).
	FlagDeferred = 1
	// FlagChecksums, only with FlagDeferred, marks a deferred index that
	// carries the CRC32C of every range its chunks are read in (Spans):
	// its in-place section ends with them. A build that reads no such
	// checksums refuses the index rather than serve its bytes unchecked.
	FlagChecksums = 2
	// FlagLineage, only with FlagDeferred, marks an index that extends
	// others (Lineage.Extend): its in-place section records them after the
	// creation time. A build that reads no lineage refuses the index
	// rather than serve a job pinned to an ancestor another order.
	FlagLineage = 4
)

// knownFlags are the flags this build reads.
const knownFlags = FlagDeferred | FlagChecksums | FlagLineage

// encoding is an index as the bytes Decode reads: their sizes and their
// writing, apart from the Index's queries. An Index encodes itself
// through it (MarshalBinary, ID) and checks at validation that it can
// (its chunk table's size).
type encoding struct{ *Index }

func (ix encoding) flags() uint32 {
	var f uint32
	if ix.deferred {
		f |= FlagDeferred
	}
	if ix.spans != nil {
		f |= FlagChecksums
	}
	if ix.lineage != nil {
		f |= FlagLineage
	}
	return f
}

// checkFlags refuses an index that needs a feature this build lacks, or
// that names checksums without being deferred.
func checkFlags(flags uint32) error {
	switch {
	case flags&^knownFlags != 0:
		return fmt.Errorf("%w: index needs features %#x, this build supports %#x", ErrVersion, flags, knownFlags)
	case flags&FlagChecksums != 0 && flags&FlagDeferred == 0:
		return fmt.Errorf("%w: flags %#x: checksums of chunks' ranges are for an index served in place (flag %#x)", ErrCorrupt, flags, FlagDeferred)
	case flags&FlagLineage != 0 && flags&FlagDeferred == 0:
		return fmt.Errorf("%w: flags %#x: a lineage is for an index served in place (flag %#x)", ErrCorrupt, flags, FlagDeferred)
	}
	return nil
}

// errPartialEncode: a partial index (Open) holds only some tables, and the
// stored object it was read from is its encoding.
var errPartialEncode = errors.New("chunkindex: a partial index cannot be encoded; its stored object is its encoding")

// errPrefixEncode: an ancestor's index made from a descendant's
// (Lineage.AncestorIndex) is named by the ancestor's ID, which its bytes would not
// hash to.
var errPrefixEncode = errors.New("chunkindex: an ancestor's index made from its descendant's cannot be encoded; the ancestor's stored object is its encoding")

// chunkTableLen returns the encoded size of the chunk table.
func (ix encoding) chunkTableLen() int64 {
	n := int64(0)
	for _, ch := range ix.chunks {
		n += chunkRecordMin + int64(len(ch.Key)) + int64(len(ch.ETag))
	}
	return n
}

// encodedLen returns the size of the encoding, trailer included.
func (ix encoding) encodedLen() int64 {
	return headerSize + ix.chunkTableLen() + sampleRecordLen*int64(ix.NumSamples()) + int64(len(ix.cols.keys)) + ix.inPlaceLen() + trailerSize
}

// inPlaceLen is the encoded size of the in-place section: none for a tar
// dataset's index.
func (ix encoding) inPlaceLen() int64 {
	if !ix.deferred {
		return 0
	}
	n := 2 + int64(len(ix.source.Format)) + 32 + 8 + ix.lineageLen()
	for _, ss := range ix.spans {
		n += 4 + spanRecordLen*int64(len(ss))
	}
	return n
}

// spanRecordLen is a span's encoded size: offset u64, length u64, CRC32C
// u32.
const spanRecordLen = 20

// appendInPlace appends the in-place section to b.
func (ix encoding) appendInPlace(b []byte) []byte {
	if !ix.deferred {
		return b
	}
	b = le.AppendUint16(b, uint16(len(ix.source.Format)))
	b = append(b, ix.source.Format...)
	b = append(b, ix.source.Meta[:]...)
	b = le.AppendUint64(b, uint64(ix.source.Created))
	b = ix.appendLineage(b)
	for _, ss := range ix.spans {
		b = le.AppendUint32(b, uint32(len(ss)))
		for _, s := range ss {
			b = le.AppendUint64(b, uint64(s.Off))
			b = le.AppendUint64(b, uint64(s.Len))
			b = le.AppendUint32(b, s.CRC)
		}
	}
	return b
}

// parseInPlace reads the in-place section, which must be all of p: with
// a lineage, it follows the fixed fields; with checksums, chunks chunks'
// spans end the section.
func parseInPlace(p []byte, checksums, lineage bool, chunks int) (InPlace, [][]Span, []Ancestor, error) {
	if len(p) < 2 {
		return InPlace{}, nil, nil, fmt.Errorf("%w: the in-place section needs 2 bytes, %d remain", ErrTruncated, len(p))
	}
	n := int(le.Uint16(p))
	if n == 0 || n > maxFormatName {
		return InPlace{}, nil, nil, fmt.Errorf("%w: a format name of %d bytes (1 to %d)", ErrCorrupt, n, maxFormatName)
	}
	fixed := 2 + n + 32 + 8
	if len(p) < fixed || !checksums && !lineage && len(p) != fixed {
		return InPlace{}, nil, nil, fmt.Errorf("%w: the in-place section has %d bytes, a %d-byte name needs %d", ErrCorrupt, len(p), n, fixed)
	}
	src := InPlace{Format: string(p[2 : 2+n]), Created: int64(le.Uint64(p[2+n+32:]))}
	copy(src.Meta[:], p[2+n:])
	p = p[fixed:]
	var anc []Ancestor
	if lineage {
		a, k, err := parseLineage(p, chunks)
		if err != nil {
			return InPlace{}, nil, nil, err
		}
		anc, p = a, p[k:]
	}
	if !checksums {
		if len(p) != 0 {
			return InPlace{}, nil, nil, fmt.Errorf("%w: %d bytes after the in-place section", ErrCorrupt, len(p))
		}
		return src, nil, anc, nil
	}
	spans, err := parseSpans(p, chunks)
	return src, spans, anc, err
}

// parseSpans reads chunks chunks' spans, which must be all of p, and
// checks them (checkSpans).
func parseSpans(p []byte, chunks int) ([][]Span, error) {
	spans := make([][]Span, chunks)
	for c := range spans {
		if len(p) < 4 {
			return nil, fmt.Errorf("%w: the checksums of chunk %d need 4 bytes, %d remain", ErrCorrupt, c, len(p))
		}
		n := int64(le.Uint32(p))
		p = p[4:]
		if n*spanRecordLen > int64(len(p)) {
			return nil, fmt.Errorf("%w: %d checksums of chunk %d need %d bytes, %d remain", ErrCorrupt, n, c, n*spanRecordLen, len(p))
		}
		spans[c] = make([]Span, n)
		for i := range spans[c] {
			off, l := le.Uint64(p), le.Uint64(p[8:])
			if off > math.MaxInt64 || l > math.MaxInt64 {
				return nil, fmt.Errorf("%w: chunk %d: span %d+%d out of range", ErrCorrupt, c, off, l)
			}
			spans[c][i] = Span{Off: int64(off), Len: int64(l), CRC: le.Uint32(p[16:])}
			p = p[spanRecordLen:]
		}
	}
	if len(p) != 0 {
		return nil, fmt.Errorf("%w: %d bytes after the last chunk's checksums", ErrCorrupt, len(p))
	}
	if err := checkSpans(ErrCorrupt, spans); err != nil {
		return nil, err
	}
	return spans, nil
}

// encode passes the encoding, trailer excluded, to emit in pieces that are
// only valid during the call. Streaming lets ID hash an index of any size
// without materialising it.
func (ix encoding) encode(emit func([]byte)) {
	var hdr [headerSize]byte
	copy(hdr[:], Magic)
	le.PutUint32(hdr[8:], FormatVersion)
	le.PutUint32(hdr[12:], ix.flags())
	le.PutUint32(hdr[16:], uint32(len(ix.chunks)))
	le.PutUint32(hdr[20:], uint32(ix.NumSamples()))
	le.PutUint32(hdr[24:], uint32(ix.chunkTableLen()))
	le.PutUint32(hdr[28:], uint32(len(ix.cols.keys)))
	emit(hdr[:])

	buf := make([]byte, 0, 64<<10)
	for c, ch := range ix.chunks {
		buf = le.AppendUint64(buf, uint64(ch.Size))
		buf = le.AppendUint32(buf, uint32(ix.chunkStart[c+1]-ix.chunkStart[c]))
		buf = le.AppendUint16(buf, uint16(len(ch.Key)))
		buf = append(buf, ch.Key...)
		buf = le.AppendUint16(buf, uint16(len(ch.ETag)))
		buf = append(buf, ch.ETag...)
		if len(buf) >= cap(buf)/2 {
			emit(buf)
			buf = buf[:0]
		}
	}
	for i := range ix.cols.offsets {
		buf = le.AppendUint64(buf, uint64(ix.cols.offsets[i]))
		buf = le.AppendUint32(buf, ix.cols.lengths[i])
		buf = le.AppendUint32(buf, ix.cols.crcs[i])
		buf = le.AppendUint32(buf, ix.cols.keyEnds[i])
		if len(buf) > cap(buf)-sampleRecordLen {
			emit(buf)
			buf = buf[:0]
		}
	}
	for s := ix.cols.keys; len(s) > 0; {
		n := min(len(s), cap(buf)-len(buf))
		buf = append(buf, s[:n]...)
		s = s[n:]
		if len(buf) == cap(buf) {
			emit(buf)
			buf = buf[:0]
		}
	}
	buf = ix.appendInPlace(buf)
	if len(buf) > 0 {
		emit(buf)
	}
}

// MarshalBinary encodes the index in the format Decode reads. The encoding
// is canonical: equal indexes encode to equal bytes, and decoding then
// encoding returns the input. It never fails for an index built by New or
// Decode; the error is there to satisfy encoding.BinaryMarshaler.
func (ix *Index) MarshalBinary() ([]byte, error) {
	if ix.part != nil {
		return nil, errPartialEncode
	}
	if ix.prefix {
		return nil, errPrefixEncode
	}
	out := make([]byte, 0, encoding{ix}.encodedLen())
	encoding{ix}.encode(func(p []byte) { out = append(out, p...) })
	return le.AppendUint32(out, crc32.Checksum(out, castagnoli)), nil
}

// ID returns the index's content identity: the first 16 hex digits of the
// SHA-256 of its encoding. Two processes serving the same dataset agree on
// it, so it can pin HTTP ETags and cached plans to an exact index.
func (ix *Index) ID() string {
	ix.idOnce.Do(func() {
		h := sha256.New()
		crc := uint32(0)
		encoding{ix}.encode(func(p []byte) {
			h.Write(p)
			crc = crc32.Update(crc, castagnoli, p)
		})
		h.Write(le.AppendUint32(nil, crc))
		ix.id = hex.EncodeToString(h.Sum(nil))[:16]
	})
	return ix.id
}

// Decode parses an encoded index and checks it as thoroughly as New checks
// its arguments, so a decoded index can be trusted not to point outside its
// chunks. Errors wrap ErrTruncated (shorter than the header says), ErrVersion
// (newer format version or unknown feature flags) or ErrCorrupt (anything
// else: bad magic, checksum mismatch, a field out of range), with detail.
//
// Decode allocates in proportion to len(b) only, whatever the header claims,
// and does not retain b.
func Decode(b []byte) (*Index, error) {
	if n := min(len(b), len(Magic)); string(b[:n]) != Magic[:n] {
		return nil, fmt.Errorf("%w: bad magic %q, want %q: not a Brand index", ErrCorrupt, b[:n], Magic)
	}
	if len(b) < headerSize {
		return nil, fmt.Errorf("%w: header needs %d bytes, %d remain", ErrTruncated, headerSize, len(b))
	}
	switch v := le.Uint32(b[8:]); {
	case v == 0:
		return nil, fmt.Errorf("%w: format version 0", ErrCorrupt)
	case v != FormatVersion:
		return nil, fmt.Errorf("%w: index format version %d, this build reads version %d", ErrVersion, v, FormatVersion)
	}
	flags := le.Uint32(b[12:])
	if err := checkFlags(flags); err != nil {
		return nil, err
	}
	var (
		numChunks  = int64(le.Uint32(b[16:]))
		numSamples = int64(le.Uint32(b[20:]))
		tableLen   = int64(le.Uint32(b[24:]))
		keyLen     = int64(le.Uint32(b[28:]))
	)

	// Check every section fits before looking at (or allocating for) any.
	rest := int64(len(b) - headerSize)
	for _, sec := range []struct {
		name string
		n    int64
	}{
		{"chunk table", tableLen},
		{"sample table", sampleRecordLen * numSamples},
		{"key blob", keyLen},
		{"trailer", trailerSize},
	} {
		if sec.n > rest {
			return nil, fmt.Errorf("%w: %s needs %d bytes, %d remain", ErrTruncated, sec.name, sec.n, rest)
		}
		rest -= sec.n
	}
	// What is left is the in-place section of a deferred index.
	inPlace := rest
	if flags&FlagDeferred == 0 && rest > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the trailer", ErrCorrupt, rest)
	}
	body := b[:len(b)-trailerSize]
	if got, want := crc32.Checksum(body, castagnoli), le.Uint32(b[len(body):]); got != want {
		return nil, fmt.Errorf("%w: checksum mismatch: trailer says %#08x, content sums to %#08x", ErrCorrupt, want, got)
	}
	if numChunks > tableLen/chunkRecordMin {
		return nil, fmt.Errorf("%w: %d chunks cannot fit a %d-byte chunk table", ErrCorrupt, numChunks, tableLen)
	}

	ix := &Index{
		chunks:     make([]Chunk, numChunks),
		chunkStart: make([]int, numChunks+1),
		deferred:   flags&FlagDeferred != 0,
	}
	table := b[headerSize : headerSize+tableLen]
	for c := range ix.chunks {
		ch, n, err := decodeChunk(table)
		if err != nil {
			return nil, fmt.Errorf("%w: chunk %d: %w", ErrCorrupt, c, err)
		}
		table = table[n:]
		ix.chunkStart[c+1] = ix.chunkStart[c] + ch.Samples
		if int64(ix.chunkStart[c+1]) > numSamples {
			return nil, fmt.Errorf("%w: chunks count more than the header's %d samples", ErrCorrupt, numSamples)
		}
		ix.chunks[c] = ch
	}
	if len(table) != 0 {
		return nil, fmt.Errorf("%w: %d bytes left over in the chunk table", ErrCorrupt, len(table))
	}
	if got := int64(ix.chunkStart[numChunks]); got != numSamples {
		return nil, fmt.Errorf("%w: chunks count %d samples, header says %d", ErrCorrupt, got, numSamples)
	}

	ix.cols.offsets = make([]int64, numSamples)
	ix.cols.lengths = make([]uint32, numSamples)
	ix.cols.crcs = make([]uint32, numSamples)
	ix.cols.keyEnds = make([]uint32, numSamples)
	rec := b[headerSize+tableLen:]
	for i := range ix.cols.offsets {
		r := rec[sampleRecordLen*i : sampleRecordLen*(i+1)]
		off := le.Uint64(r)
		if off > math.MaxInt64 {
			return nil, fmt.Errorf("%w: sample %d: offset %d out of range", ErrCorrupt, i, off)
		}
		ix.cols.offsets[i] = int64(off)
		ix.cols.lengths[i] = le.Uint32(r[8:])
		ix.cols.crcs[i] = le.Uint32(r[12:])
		ix.cols.keyEnds[i] = le.Uint32(r[16:])
	}
	keyStart := headerSize + tableLen + sampleRecordLen*numSamples
	ix.cols.keys = string(b[keyStart : keyStart+keyLen])
	if ix.deferred {
		src, spans, anc, err := parseInPlace(b[keyStart+keyLen:keyStart+keyLen+inPlace], flags&FlagChecksums != 0, flags&FlagLineage != 0, len(ix.chunks))
		if err != nil {
			return nil, err
		}
		ix.source, ix.spans, ix.lineage = src, spans, anc
	}

	if err := ix.validate(ErrCorrupt); err != nil {
		return nil, err
	}
	return ix, nil
}

// decodeChunk parses one chunk record from the front of p and returns how
// many bytes it used.
func decodeChunk(p []byte) (Chunk, int, error) {
	if len(p) < chunkRecordMin {
		return Chunk{}, 0, fmt.Errorf("record needs %d bytes, %d remain in the chunk table", chunkRecordMin, len(p))
	}
	size := le.Uint64(p)
	if size > math.MaxInt64 {
		return Chunk{}, 0, fmt.Errorf("size %d out of range", size)
	}
	ch := Chunk{Size: int64(size), Samples: int(le.Uint32(p[8:]))}
	n := 12
	for _, field := range []*string{&ch.Key, &ch.ETag} {
		if len(p)-n < 2 {
			return Chunk{}, 0, fmt.Errorf("record truncated by the end of the chunk table")
		}
		l := int(le.Uint16(p[n:]))
		n += 2
		if l > len(p)-n {
			return Chunk{}, 0, fmt.Errorf("string of %d bytes overruns the chunk table by %d", l, l-(len(p)-n))
		}
		*field = string(p[n : n+l])
		n += l
	}
	return ch, n, nil
}
