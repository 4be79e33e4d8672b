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
//	              created (Unix seconds) i64
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

// FlagDeferred, in the header's flags, marks the index of a dataset served
// in place (NewDeferred): its sample records hold each sample's ordinal in
// its chunk and no range; the ranges are in the decoded chunks' tables
// (package format). It is the only feature flag.
const FlagDeferred = 1

func (ix *Index) flags() uint32 {
	if ix.deferred {
		return FlagDeferred
	}
	return 0
}

// checkFlags refuses an index that needs a feature this build lacks.
func checkFlags(flags uint32) error {
	if flags&^FlagDeferred != 0 {
		return fmt.Errorf("%w: index needs features %#x, this build supports %#x", ErrVersion, flags, FlagDeferred)
	}
	return nil
}

// errPartialEncode: a partial index (Open) holds only some tables, and the
// stored object it was read from is its encoding.
var errPartialEncode = errors.New("chunkindex: a partial index cannot be encoded; its stored object is its encoding")

// chunkTableLen returns the encoded size of the chunk table.
func (ix *Index) chunkTableLen() int64 {
	n := int64(0)
	for _, ch := range ix.chunks {
		n += chunkRecordMin + int64(len(ch.Key)) + int64(len(ch.ETag))
	}
	return n
}

// encodedLen returns the size of the encoding, trailer included.
func (ix *Index) encodedLen() int64 {
	return headerSize + ix.chunkTableLen() + sampleRecordLen*int64(ix.NumSamples()) + int64(len(ix.keys)) + ix.inPlaceLen() + trailerSize
}

// inPlaceLen is the encoded size of the in-place section: none for a tar
// dataset's index.
func (ix *Index) inPlaceLen() int64 {
	if !ix.deferred {
		return 0
	}
	return 2 + int64(len(ix.source.Format)) + 32 + 8
}

// appendInPlace appends the in-place section to b.
func (ix *Index) appendInPlace(b []byte) []byte {
	if !ix.deferred {
		return b
	}
	b = le.AppendUint16(b, uint16(len(ix.source.Format)))
	b = append(b, ix.source.Format...)
	b = append(b, ix.source.Meta[:]...)
	return le.AppendUint64(b, uint64(ix.source.Created))
}

// parseInPlace reads the in-place section, which must be all of p.
func parseInPlace(p []byte) (InPlace, error) {
	if len(p) < 2 {
		return InPlace{}, fmt.Errorf("%w: the in-place section needs 2 bytes, %d remain", ErrTruncated, len(p))
	}
	n := int(le.Uint16(p))
	if n == 0 || n > maxFormatName {
		return InPlace{}, fmt.Errorf("%w: a format name of %d bytes (1 to %d)", ErrCorrupt, n, maxFormatName)
	}
	if len(p) != 2+n+32+8 {
		return InPlace{}, fmt.Errorf("%w: the in-place section has %d bytes, a %d-byte name needs %d", ErrCorrupt, len(p), n, 2+n+32+8)
	}
	src := InPlace{Format: string(p[2 : 2+n]), Created: int64(le.Uint64(p[2+n+32:]))}
	copy(src.Meta[:], p[2+n:])
	return src, nil
}

// encode passes the encoding, trailer excluded, to emit in pieces that are
// only valid during the call. Streaming lets ID hash an index of any size
// without materialising it.
func (ix *Index) encode(emit func([]byte)) {
	var hdr [headerSize]byte
	copy(hdr[:], Magic)
	le.PutUint32(hdr[8:], FormatVersion)
	le.PutUint32(hdr[12:], ix.flags())
	le.PutUint32(hdr[16:], uint32(len(ix.chunks)))
	le.PutUint32(hdr[20:], uint32(ix.NumSamples()))
	le.PutUint32(hdr[24:], uint32(ix.chunkTableLen()))
	le.PutUint32(hdr[28:], uint32(len(ix.keys)))
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
	for i := range ix.offsets {
		buf = le.AppendUint64(buf, uint64(ix.offsets[i]))
		buf = le.AppendUint32(buf, ix.lengths[i])
		buf = le.AppendUint32(buf, ix.crcs[i])
		buf = le.AppendUint32(buf, ix.keyEnds[i])
		if len(buf) > cap(buf)-sampleRecordLen {
			emit(buf)
			buf = buf[:0]
		}
	}
	for s := ix.keys; len(s) > 0; {
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
	out := make([]byte, 0, ix.encodedLen())
	ix.encode(func(p []byte) { out = append(out, p...) })
	return le.AppendUint32(out, crc32.Checksum(out, castagnoli)), nil
}

// ID returns the index's content identity: the first 16 hex digits of the
// SHA-256 of its encoding. Two processes serving the same dataset agree on
// it, so it can pin HTTP ETags and cached plans to an exact index.
func (ix *Index) ID() string {
	ix.idOnce.Do(func() {
		h := sha256.New()
		crc := uint32(0)
		ix.encode(func(p []byte) {
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

	ix.offsets = make([]int64, numSamples)
	ix.lengths = make([]uint32, numSamples)
	ix.crcs = make([]uint32, numSamples)
	ix.keyEnds = make([]uint32, numSamples)
	rec := b[headerSize+tableLen:]
	for i := range ix.offsets {
		r := rec[sampleRecordLen*i : sampleRecordLen*(i+1)]
		off := le.Uint64(r)
		if off > math.MaxInt64 {
			return nil, fmt.Errorf("%w: sample %d: offset %d out of range", ErrCorrupt, i, off)
		}
		ix.offsets[i] = int64(off)
		ix.lengths[i] = le.Uint32(r[8:])
		ix.crcs[i] = le.Uint32(r[12:])
		ix.keyEnds[i] = le.Uint32(r[16:])
	}
	keyStart := headerSize + tableLen + sampleRecordLen*numSamples
	ix.keys = string(b[keyStart : keyStart+keyLen])
	if ix.deferred {
		src, err := parseInPlace(b[keyStart+keyLen : keyStart+keyLen+inPlace])
		if err != nil {
			return nil, err
		}
		ix.source = src
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
