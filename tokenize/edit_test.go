package tokenize

import (
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// Models the trainer does not write but a file can hold are made by
// editing trained ones: parsed, changed, written back with the fields
// that decide encoding (the rest of TrainerSpec is dropped; the reference
// does not read it to encode).

// writeModelProto serializes mp. A piece type of 0 is written as 99, a
// value the schema does not name (the reference's runtime keeps the
// default, NORMAL).
func writeModelProto(mp *modelProto) []byte {
	var b, m []byte
	for _, p := range mp.pieces {
		m = m[:0]
		m = protowire.AppendTag(m, fieldPiece, protowire.BytesType)
		m = protowire.AppendString(m, p.s)
		m = protowire.AppendTag(m, fieldPieceScore, protowire.Fixed32Type)
		m = protowire.AppendFixed32(m, math.Float32bits(p.score))
		typ := uint64(p.typ)
		if typ == 0 {
			typ = 99
		}
		m = protowire.AppendTag(m, fieldPieceType, protowire.VarintType)
		m = protowire.AppendVarint(m, typ)
		b = protowire.AppendTag(b, fieldPieces, protowire.BytesType)
		b = protowire.AppendBytes(b, m)
	}
	t := mp.trainer
	m = m[:0]
	m = protowire.AppendTag(m, fieldModelType, protowire.VarintType)
	m = protowire.AppendVarint(m, uint64(t.modelType))
	for _, f := range []struct {
		num protowire.Number
		v   bool
	}{{fieldWhitespaceSuffix, t.suffix}, {fieldByteFallback, t.byteFallback}} {
		m = protowire.AppendTag(m, f.num, protowire.VarintType)
		m = protowire.AppendVarint(m, protowire.EncodeBool(f.v))
	}
	for _, f := range []struct {
		num protowire.Number
		v   string
	}{{fieldUnkPiece, t.unkPiece}, {fieldBOSPiece, t.bosPiece}, {fieldEOSPiece, t.eosPiece}, {fieldPadPiece, t.padPiece}} {
		if f.v != "" {
			m = protowire.AppendTag(m, f.num, protowire.BytesType)
			m = protowire.AppendString(m, f.v)
		}
	}
	b = protowire.AppendTag(b, fieldTrainerSpec, protowire.BytesType)
	b = protowire.AppendBytes(b, m)
	n := mp.norm
	m = m[:0]
	m = protowire.AppendTag(m, fieldNormName, protowire.BytesType)
	m = protowire.AppendString(m, n.name)
	if n.charsMap != "" {
		m = protowire.AppendTag(m, fieldCharsMap, protowire.BytesType)
		m = protowire.AppendString(m, n.charsMap)
	}
	for _, f := range []struct {
		num protowire.Number
		v   bool
	}{{fieldAddDummyPrefix, n.addDummyPrefix}, {fieldRemoveExtraWS, n.removeExtraWS}, {fieldEscapeWS, n.esc}} {
		m = protowire.AppendTag(m, f.num, protowire.VarintType)
		m = protowire.AppendVarint(m, protowire.EncodeBool(f.v))
	}
	b = protowire.AppendTag(b, fieldNormalizerSpec, protowire.BytesType)
	b = protowire.AppendBytes(b, m)
	return b
}

// editModel parses data, applies edit and writes the result.
func editModel(data []byte, edit func(mp *modelProto)) []byte {
	mp, err := parseModelProto(data, string(data), MaxPieces)
	if err != nil {
		panic(err)
	}
	edit(mp)
	return writeModelProto(mp)
}
