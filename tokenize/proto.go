package tokenize

import (
	"fmt"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// The parts of SentencePiece's ModelProto (sentencepiece_model.proto,
// proto2) that decide encoding, read with protowire rather than generated
// code, so that a hostile file costs what its bytes cost: pieces are
// counted before they are allocated, strings are slices of one copy of
// the file, and nothing is allocated from a length the file declares.
//
// Parsing follows the reference's protobuf runtime where a file could tell
// them apart: a field of the wrong wire type and an enum value the schema
// does not name are unknown fields (skipped; the field keeps its earlier
// value or its default), a repeated occurrence of a scalar field replaces
// it, and one of a message field merges into it.

// Field numbers of the messages read.
const (
	fieldPieces         = 1 // ModelProto.pieces
	fieldTrainerSpec    = 2 // ModelProto.trainer_spec
	fieldNormalizerSpec = 3 // ModelProto.normalizer_spec

	fieldPiece      = 1 // SentencePiece.piece
	fieldPieceScore = 2 // SentencePiece.score
	fieldPieceType  = 3 // SentencePiece.type

	fieldModelType        = 3  // TrainerSpec.model_type
	fieldWhitespaceSuffix = 24 // TrainerSpec.treat_whitespace_as_suffix
	fieldByteFallback     = 35 // TrainerSpec.byte_fallback
	fieldUnkPiece         = 45 // TrainerSpec.unk_piece
	fieldBOSPiece         = 46 // TrainerSpec.bos_piece
	fieldEOSPiece         = 47 // TrainerSpec.eos_piece
	fieldPadPiece         = 48 // TrainerSpec.pad_piece

	fieldNormName        = 1 // NormalizerSpec.name
	fieldCharsMap        = 2 // NormalizerSpec.precompiled_charsmap
	fieldAddDummyPrefix  = 3 // NormalizerSpec.add_dummy_prefix
	fieldRemoveExtraWS   = 4 // NormalizerSpec.remove_extra_whitespaces
	fieldEscapeWS        = 5 // NormalizerSpec.escape_whitespaces
	modelTypeUnigram     = 1 // TrainerSpec.ModelType
	modelTypeBPE         = 2
	modelTypeWord        = 3
	modelTypeChar        = 4
	pieceNormal          = 1 // SentencePiece.Type
	pieceUnknown         = 2
	pieceControl         = 3
	pieceUserDefined     = 4
	pieceUnused          = 5
	pieceByte            = 6
	maxKnownPieceType    = pieceByte
	maxKnownModelType    = modelTypeChar
	defaultModelType     = modelTypeUnigram
	defaultPieceType     = pieceNormal
	protoRecursionBudget = protowire.DefaultRecursionLimit
)

// piece is one entry of the vocabulary; its ID is its index.
type piece struct {
	s     string // a slice of the model's one string copy
	score float32
	typ   int8
}

// trainerSpec holds the TrainerSpec fields that decide encoding.
type trainerSpec struct {
	modelType                              int
	suffix, byteFallback                   bool
	unkPiece, bosPiece, eosPiece, padPiece string // "" for the default
}

// normalizerSpec holds the NormalizerSpec fields that decide encoding.
type normalizerSpec struct {
	name                               string
	charsMap                           string
	addDummyPrefix, removeExtraWS, esc bool
}

// modelProto is a parsed ModelProto.
type modelProto struct {
	pieces  []piece
	trainer trainerSpec
	norm    normalizerSpec
}

// parseModelProto parses data with at most maxPieces pieces; s holds the
// same bytes, and the strings parsed are slices of it.
func parseModelProto(data []byte, s string, maxPieces int) (*modelProto, error) {
	mp := &modelProto{
		trainer: trainerSpec{modelType: defaultModelType},
		norm:    normalizerSpec{addDummyPrefix: true, removeExtraWS: true, esc: true},
	}
	// First pass: count the pieces and read the specs, so that the
	// pieces are allocated once and only as many as there are.
	n := 0
	err := eachField(data, func(num protowire.Number, typ protowire.Type, v []byte, off int) error {
		if typ != protowire.BytesType {
			return nil
		}
		switch num {
		case fieldPieces:
			n++
			if n > maxPieces {
				return fmt.Errorf("%w: more than %d pieces", ErrTooLarge, maxPieces)
			}
		case fieldTrainerSpec:
			return parseTrainerSpec(v, &mp.trainer)
		case fieldNormalizerSpec:
			return parseNormalizerSpec(s, v, off, &mp.norm)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	mp.pieces = make([]piece, 0, n)
	err = eachField(data, func(num protowire.Number, typ protowire.Type, v []byte, off int) error {
		if num != fieldPieces || typ != protowire.BytesType {
			return nil
		}
		p, err := parsePiece(s, v, off)
		if err != nil {
			return fmt.Errorf("piece %d: %w", len(mp.pieces), err)
		}
		mp.pieces = append(mp.pieces, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return mp, nil
}

// eachField calls f with every field of the message b: its number, wire
// type and, for a length-delimited field, its value and the value's
// offset in b (for a varint or fixed field, v holds its bytes too).
// Groups are skipped, nested at most protowire's recursion limit deep.
func eachField(b []byte, f func(num protowire.Number, typ protowire.Type, v []byte, off int) error) error {
	pos := 0
	for pos < len(b) {
		num, typ, n := protowire.ConsumeTag(b[pos:])
		if n < 0 {
			return wireError(protowire.ParseError(n), pos)
		}
		pos += n
		var v []byte
		off := pos
		switch typ {
		case protowire.BytesType:
			val, m := protowire.ConsumeBytes(b[pos:])
			if m < 0 {
				return wireError(protowire.ParseError(m), pos)
			}
			off = pos + m - len(val)
			v, n = val, m
		default:
			n = protowire.ConsumeFieldValue(num, typ, b[pos:])
			if n < 0 {
				return wireError(protowire.ParseError(n), pos)
			}
			v = b[pos : pos+n]
		}
		if typ == protowire.EndGroupType {
			return wireError(fmt.Errorf("unexpected end of group"), pos)
		}
		pos += n
		if err := f(num, typ, v, off); err != nil {
			return err
		}
	}
	return nil
}

func wireError(err error, pos int) error {
	return fmt.Errorf("%w: protobuf at byte %d: %v", ErrNotModel, pos, err)
}

// varint reads a varint field's value; ok is false for another wire type.
func varint(typ protowire.Type, v []byte) (uint64, bool) {
	if typ != protowire.VarintType {
		return 0, false
	}
	x, n := protowire.ConsumeVarint(v)
	return x, n > 0
}

// enum reads an enum field's value as the protobuf runtime does (an int32).
func enum(typ protowire.Type, v []byte) (int32, bool) {
	x, ok := varint(typ, v)
	return int32(x), ok
}

// boolean sets *dst from a bool field of the right wire type.
func boolean(typ protowire.Type, v []byte, dst *bool) {
	if x, ok := varint(typ, v); ok {
		*dst = x != 0
	}
}

// str sets *dst from a string field of the right wire type. The special
// pieces' names are short and read once, so they are copied.
func str(typ protowire.Type, v []byte, dst *string) {
	if typ == protowire.BytesType {
		*dst = string(v)
	}
}

func parsePiece(s string, b []byte, base int) (piece, error) {
	p := piece{typ: defaultPieceType}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, off int) error {
		switch num {
		case fieldPiece:
			if typ == protowire.BytesType {
				p.s = s[base+off : base+off+len(v)]
			}
		case fieldPieceScore:
			if typ == protowire.Fixed32Type {
				x, _ := protowire.ConsumeFixed32(v)
				p.score = math.Float32frombits(x)
			}
		case fieldPieceType:
			if e, ok := enum(typ, v); ok && e >= 1 && e <= maxKnownPieceType {
				p.typ = int8(e)
			}
		}
		return nil
	})
	return p, err
}

func parseTrainerSpec(b []byte, t *trainerSpec) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ int) error {
		switch num {
		case fieldModelType:
			if e, ok := enum(typ, v); ok && e >= 1 && e <= maxKnownModelType {
				t.modelType = int(e)
			}
		case fieldWhitespaceSuffix:
			boolean(typ, v, &t.suffix)
		case fieldByteFallback:
			boolean(typ, v, &t.byteFallback)
		case fieldUnkPiece:
			str(typ, v, &t.unkPiece)
		case fieldBOSPiece:
			str(typ, v, &t.bosPiece)
		case fieldEOSPiece:
			str(typ, v, &t.eosPiece)
		case fieldPadPiece:
			str(typ, v, &t.padPiece)
		}
		return nil
	})
}

func parseNormalizerSpec(s string, b []byte, base int, n *normalizerSpec) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, off int) error {
		switch num {
		case fieldNormName:
			if typ == protowire.BytesType {
				n.name = s[base+off : base+off+len(v)]
			}
		case fieldCharsMap:
			if typ == protowire.BytesType {
				n.charsMap = s[base+off : base+off+len(v)]
			}
		case fieldAddDummyPrefix:
			boolean(typ, v, &n.addDummyPrefix)
		case fieldRemoveExtraWS:
			boolean(typ, v, &n.removeExtraWS)
		case fieldEscapeWS:
			boolean(typ, v, &n.esc)
		}
		return nil
	})
}
