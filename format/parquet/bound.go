package parquet

import (
	"math"

	"github.com/brandgw/brand/format"
)

// A row group's resident bound, from the footer alone (package doc,
// "Bounds"). Every figure is an upper bound of what Decode writes for any
// data consistent with the footer; arithmetic saturates, so a hostile
// footer's counts give a huge bound (refused against Limits.ChunkBytes),
// never a wrapped small one.

func add(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func mul(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func pad512(n int64) int64 { return add(n, format.Block-1) / format.Block * format.Block }

// npyHeaderMax is the longest .npy header Brand writes: a v1.0 header of
// a 1-D array is 10 bytes, the dict (at most 88 bytes with a 20-digit
// length) and a newline, padded to 64 bytes: 128.
const npyHeaderMax = 128

// Widths of values rendered as text, at most.
const (
	intTextMax   = 20 // -9223372036854775808, 18446744073709551615
	floatTextMax = 24 // -1.7976931348623157e+308
)

// members bounds what rows rows cost as members whose data add up to at
// most sum bytes and are each at most max bytes long, under names of
// nameLen bytes: each costs its header and its data padded to 512 bytes,
// which is at most 511 bytes more than its data — or, when every value is
// short, the same padded block whatever it holds (a value of at most 512
// bytes costs 1,024).
func members(rows int64, nameLen int, sum, max int64) int64 {
	hdr := format.MemberLen(nameLen, 0)
	return min(add(mul(rows, hdr+format.Block-1), sum), mul(rows, add(hdr, pad512(max))))
}

// jsonFrame is what a node adds to a JSON value around its children's, at
// most, per instance: its name escaped and quoted, a colon, a comma, and
// braces, brackets or null.
func jsonFrame(n *node) int64 { return int64(6*len(n.el.name) + 12) }

// jsonValueMax is a leaf value's JSON text at most, besides a byte
// array's escaped bytes (6 per byte, counted separately): quotes, and the
// quotes a map key is put in.
func jsonValueMax(n *node) int64 {
	switch n.el.phys {
	case tyBoolean:
		return 5 + 2
	case tyInt32, tyInt64:
		return intTextMax + 2
	case tyInt96:
		return intTextMax + 2
	case tyFloat, tyDouble:
		return floatTextMax + 2
	case tyFixed:
		return add(mul(6, int64(n.el.typeLen)), 6)
	}
	return 6
}

// fieldBound is what field f of chunk c costs in the resident form.
func (d *decoder) fieldBound(c *chunk, f *field) int64 {
	nameLen := d.keyLen(c) + 1 + max(f.maxExtLen(), len(nullExt))
	col := func(leaf int) *colMeta { return &c.cols[leaf] }
	switch f.kind {
	case kindCls:
		return members(c.rows, nameLen, mul(c.rows, intTextMax), intTextMax)
	case kindTxt, kindImage:
		m := col(f.bytesLeaf)
		return members(c.rows, nameLen, m.bytesSum, m.bytesMax)
	case kindTokens:
		// Exact: the index has every row's count.
		var sum, most int64
		for _, n := range d.ds.tokens.counts[c.at] {
			v := npyHeaderMax + 4*int64(n)
			sum, most = add(sum, v), max(most, v)
		}
		return members(c.rows, nameLen, sum, most)
	case kindNpy:
		m := col(f.leaves[0])
		data := mul(m.numValues, int64(f.size))
		return members(c.rows, nameLen, add(mul(c.rows, npyHeaderMax), data), add(npyHeaderMax, data))
	}
	// JSON: per leaf entry its value and the frames of the nodes above
	// it (each node's instance is charged to an entry of its first
	// leaf, at most one per entry), and byte arrays' escaped bytes.
	var sum int64
	for _, leaf := range f.leaves {
		n := d.schema.leaves[leaf]
		per := jsonValueMax(n)
		for a := n; a != f.node.parent; a = a.parent {
			per = add(per, jsonFrame(a))
		}
		m := col(leaf)
		sum = add(sum, mul(m.numValues, per))
		if n.el.phys == tyBytes {
			sum = add(sum, mul(6, m.bytesSum))
		}
	}
	return members(c.rows, nameLen, sum, sum)
}

// bound is chunk c's resident bound when the fields sel are read.
func (d *decoder) bound(c *chunk, sel format.Selection) int64 {
	n := format.Overhead(int(c.rows))
	any := false
	for i, f := range d.fields {
		if sel.Has(i) {
			n = add(n, d.fieldBound(c, f))
			any = true
		}
	}
	if !any {
		n = add(n, mul(c.rows, format.MemberLen(d.keyLen(c)+1+len(nullExt), 0)))
	}
	return n
}

// guessed reports whether field f's bound in chunk c is a guess: a byte
// array column a dictionary or front coding may repeat values of, with no
// size statistics (colMeta.guess).
func (d *decoder) guessed(c *chunk, f *field) bool {
	for _, leaf := range f.leaves {
		if c.cols[leaf].guess {
			return true
		}
	}
	return false
}
