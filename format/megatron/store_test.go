package megatron

import "encoding/binary"

// buildIdx writes an .idx as the builder does, from sequence lengths and
// the document index; ptrs, when given, replaces the pointers.
func buildIdx(code byte, sizes []int32, docIdx []int64, ptrs []int64) []byte {
	le := binary.LittleEndian
	b := []byte(idxMagic)
	b = le.AppendUint64(b, 1)
	b = append(b, code)
	b = le.AppendUint64(b, uint64(len(sizes)))
	b = le.AppendUint64(b, uint64(len(docIdx)))
	for _, n := range sizes {
		b = le.AppendUint32(b, uint32(n))
	}
	if ptrs == nil {
		var p int64
		for _, n := range sizes {
			ptrs = append(ptrs, p)
			p += int64(n) * dtypes[code].size
		}
	}
	for _, p := range ptrs {
		b = le.AppendUint64(b, uint64(p))
	}
	for _, d := range docIdx {
		b = le.AppendUint64(b, uint64(d))
	}
	return b
}
