package client

import (
	"encoding/binary"
	"fmt"
	"unsafe"
)

// A token job's batch (Options.Seq, the gateway's seq=) holds sequences:
// each sample has an "input_ids.npy" and a "position_ids.npy" member,
// int32 [seq] each (docs/http-api.md, "Token jobs").
const (
	InputIDs    = "input_ids.npy"
	PositionIDs = "position_ids.npy"
)

// Int32s views a .npy member of int32 [n] (a token job's input_ids or
// position_ids) as []int32 without copying: the slice shares the
// batch's buffer (valid until Batch.Release). The gateway's members are
// 64-byte aligned little-endian int32; a member that is not aligned, or
// on a big-endian machine, is copied.
//
//	for _, s := range batch.Samples {
//		ids, err := client.Int32s(s.Files[client.InputIDs])
//		pos, err := client.Int32s(s.Files[client.PositionIDs])
//		// cu_seqlens: the i where pos[i] == 0, and len(pos)
//	}
func Int32s(member []byte) ([]int32, error) {
	t, err := ParseNPY(member)
	if err != nil {
		return nil, err
	}
	if t.DType != "<i4" || len(t.Shape) != 1 {
		return nil, fmt.Errorf("client: a .npy of dtype %q and shape %v, not int32 [n]", t.DType, t.Shape)
	}
	n := t.Shape[0]
	if n == 0 {
		return []int32{}, nil
	}
	if littleEndian && uintptr(unsafe.Pointer(&t.Data[0]))%4 == 0 {
		return unsafe.Slice((*int32)(unsafe.Pointer(&t.Data[0])), n), nil
	}
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(binary.LittleEndian.Uint32(t.Data[4*i:]))
	}
	return out, nil
}

// littleEndian reports whether this machine stores an int32 as the .npy
// does ("<i4").
var littleEndian = func() bool {
	x := uint16(1)
	return *(*byte)(unsafe.Pointer(&x)) == 1
}()

// Sequence is one sequence of a token job's batch: its key and its two
// members viewed as []int32 (Int32s), sharing the batch's buffer.
type Sequence struct {
	Key                   string
	InputIDs, PositionIDs []int32
}

// Sequences views a token job's batch as its sequences, in order: each
// sample's input_ids.npy and position_ids.npy as []int32 without a copy
// (valid until b.Release). A sample without them, or of another length
// than the first, is an error wrapping ErrBadResponse.
func (b *Batch) Sequences() ([]Sequence, error) {
	out := make([]Sequence, len(b.Samples))
	for i, s := range b.Samples {
		ids, err := Int32s(s.Files[InputIDs])
		if err != nil {
			return nil, fmt.Errorf("%w: sample %s: %s: %w", ErrBadResponse, s.Key, InputIDs, err)
		}
		pos, err := Int32s(s.Files[PositionIDs])
		if err != nil {
			return nil, fmt.Errorf("%w: sample %s: %s: %w", ErrBadResponse, s.Key, PositionIDs, err)
		}
		if len(ids) != len(pos) || i > 0 && len(ids) != len(out[0].InputIDs) {
			return nil, fmt.Errorf("%w: sample %s: sequences of %d and %d tokens", ErrBadResponse, s.Key, len(ids), len(pos))
		}
		out[i] = Sequence{Key: s.Key, InputIDs: ids, PositionIDs: pos}
	}
	return out, nil
}
