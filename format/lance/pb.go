package lance

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// A pbField is one field of a protobuf message as it was on the wire:
// its number, its wire type, and its value (varints and fixed-width
// numbers in n, length-delimited bytes in b, a view of the message).
type pbField struct {
	num protowire.Number
	typ protowire.Type
	n   uint64
	b   []byte
}

// walkPB calls fn with each field of the message m, in wire order. A
// malformed message (a truncated field, a group, a length past the end)
// is an error; fn's error stops the walk. Nothing is allocated for a
// field: length-delimited values are views of m.
func walkPB(m []byte, fn func(f pbField) error) error {
	for len(m) > 0 {
		num, typ, n := protowire.ConsumeTag(m)
		if n < 0 {
			return fmt.Errorf("protobuf: %w", protowire.ParseError(n))
		}
		m = m[n:]
		f := pbField{num: num, typ: typ}
		switch typ {
		case protowire.VarintType:
			f.n, n = protowire.ConsumeVarint(m)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(m)
			f.n = uint64(v)
		case protowire.Fixed64Type:
			f.n, n = protowire.ConsumeFixed64(m)
		case protowire.BytesType:
			f.b, n = protowire.ConsumeBytes(m)
		default:
			return fmt.Errorf("protobuf: field %d of wire type %d", num, typ)
		}
		if n < 0 {
			return fmt.Errorf("protobuf: field %d: %w", num, protowire.ParseError(n))
		}
		m = m[n:]
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// want checks that f has the wire type a field of its number must have.
func (f pbField) want(typ protowire.Type) error {
	if f.typ != typ {
		return fmt.Errorf("protobuf: field %d of wire type %d, want %d", f.num, f.typ, typ)
	}
	return nil
}

// uints appends a repeated uint64 field's values, packed or not, to vs:
// at most max values in all (a packed run is counted before it is read).
func (f pbField) uints(vs []uint64, max int) ([]uint64, error) {
	switch f.typ {
	case protowire.VarintType:
		if len(vs) >= max {
			return nil, fmt.Errorf("protobuf: field %d: more than %d values", f.num, max)
		}
		return append(vs, f.n), nil
	case protowire.BytesType:
		b := f.b
		for len(b) > 0 {
			if len(vs) >= max {
				return nil, fmt.Errorf("protobuf: field %d: more than %d values", f.num, max)
			}
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return nil, fmt.Errorf("protobuf: field %d: %w", f.num, protowire.ParseError(n))
			}
			vs = append(vs, v)
			b = b[n:]
		}
		return vs, nil
	}
	return nil, fmt.Errorf("protobuf: field %d of wire type %d, want a repeated varint", f.num, f.typ)
}

// ints is uints for a repeated int32 field (negative values are sign-
// extended to 64 bits on the wire).
func (f pbField) ints(vs []int32, max int) ([]int32, error) {
	us, err := f.uints(nil, max-len(vs))
	if err != nil {
		return nil, err
	}
	for _, u := range us {
		vs = append(vs, int32(u))
	}
	return vs, nil
}
