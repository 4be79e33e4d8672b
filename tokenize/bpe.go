package tokenize

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	sentencepiece "github.com/eliben/go-sentencepiece"
	"google.golang.org/protobuf/encoding/protowire"
)

// bpe is the reference's BPE model (bpe_model.cc): the normalized text
// split into characters (and user-defined symbols, never merged), then
// the adjacent pair whose merged piece scores highest merged, leftmost
// first on ties, until no pair is a piece. The merging is
// github.com/eliben/go-sentencepiece's, which implements exactly that
// loop (its own tests compare it with the reference on Gemma's model);
// what it lacks around the loop, this package does: the normalizer, the
// bounded parsing of the model, and the merging of unknown runs.
//
// The library is given a model of its own making: the pieces as they are,
// with a normalizer that does nothing (the text it gets is normalized
// already), since it refuses the reference's defaults (a dummy prefix,
// removing extra whitespace) and ignores the character map.
type bpe struct {
	proc *sentencepiece.Processor
	// split: no piece has U+2581 except in a leading run, so no merge
	// crosses the start of a run of U+2581 that follows another
	// character, and the text is encoded a segment at a time, each
	// ending there (the same pieces, with memory and cache use bounded
	// by the segment instead of the document).
	split bool
}

// bpeSegment is the least length of the segments a text is encoded in.
const bpeSegment = 1 << 10

func newBPE(pieces []piece, byteFallback bool) (*bpe, error) {
	split := true
	for i, p := range pieces {
		switch p.typ {
		case pieceUnused:
			// The reference merges into an unused piece and then splits it
			// back (resegment); the library keeps it. No trainer writes one.
			return nil, fmt.Errorf("%w: a BPE model with an unused piece (%d, %q)", ErrUnsupported, i, p.s)
		case pieceNormal, pieceUserDefined:
			if strings.Contains(strings.TrimLeft(p.s, spaceSymbol), spaceSymbol) {
				split = false
			}
		}
	}
	proc, err := sentencepiece.NewProcessor(bytes.NewReader(libraryModel(pieces, byteFallback)))
	if err != nil {
		return nil, fmt.Errorf("%w: BPE: %v", ErrNotModel, err)
	}
	return &bpe{proc: proc, split: split}, nil
}

// libraryModel writes the ModelProto the library is given: the pieces,
// BPE with the model's byte fallback, and a normalizer whose options are
// all set explicitly (the library dereferences them).
func libraryModel(pieces []piece, byteFallback bool) []byte {
	var b, m []byte
	for _, p := range pieces {
		m = m[:0]
		m = protowire.AppendTag(m, fieldPiece, protowire.BytesType)
		m = protowire.AppendString(m, p.s)
		m = protowire.AppendTag(m, fieldPieceScore, protowire.Fixed32Type)
		m = protowire.AppendFixed32(m, math.Float32bits(p.score))
		m = protowire.AppendTag(m, fieldPieceType, protowire.VarintType)
		m = protowire.AppendVarint(m, uint64(p.typ))
		b = protowire.AppendTag(b, fieldPieces, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	m = m[:0]
	m = protowire.AppendTag(m, fieldModelType, protowire.VarintType)
	m = protowire.AppendVarint(m, modelTypeBPE)
	m = protowire.AppendTag(m, fieldByteFallback, protowire.VarintType)
	m = protowire.AppendVarint(m, protowire.EncodeBool(byteFallback))
	b = protowire.AppendTag(b, fieldTrainerSpec, protowire.BytesType)
	b = protowire.AppendBytes(b, m)
	m = m[:0]
	m = protowire.AppendTag(m, fieldNormName, protowire.BytesType)
	m = protowire.AppendString(m, "identity")
	for _, f := range []protowire.Number{fieldAddDummyPrefix, fieldRemoveExtraWS, fieldEscapeWS} {
		m = protowire.AppendTag(m, f, protowire.VarintType)
		m = protowire.AppendVarint(m, 0)
	}
	b = protowire.AppendTag(b, fieldNormalizerSpec, protowire.BytesType)
	b = protowire.AppendBytes(b, m)
	return b
}

// encode passes the pieces of the normalized text s to out, in order.
// The library has done byte fallback already: out sees byte pieces, and
// unknown pieces only where the model has no byte fallback.
func (e *bpe) encode(s string, out *sink) {
	for len(s) > 0 {
		end := len(s)
		if e.split {
			end = nextSegmentEnd(s, bpeSegment)
		}
		for _, t := range e.proc.Encode(s[:end]) {
			out.addID(int32(t.ID))
		}
		s = s[end:]
	}
}

// nextSegmentEnd returns the first position at or after from where a run
// of U+2581 starts after another character, or len(s).
func nextSegmentEnd(s string, from int) int {
	for p := from; p < len(s); {
		i := strings.Index(s[p:], spaceSymbol)
		if i < 0 {
			break
		}
		p += i
		if p >= len(spaceSymbol) && s[p-len(spaceSymbol):p] == spaceSymbol {
			p += len(spaceSymbol) // within a run: its start was passed
			continue
		}
		return p
	}
	return len(s)
}
