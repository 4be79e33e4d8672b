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
	intTextMax     = 20 // -9223372036854775808, 18446744073709551615
	floatTextMax   = 24 // -1.7976931348623157e+308
	float32TextMax = 15 // -0.000123456789: 9 digits after "-0.000"
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

// jsonFrame is what an instance of node n adds to a JSON value around
// its children's, at most: a comma, and braces, brackets or null; and its
// name escaped, quoted, and a colon where its parent is rendered as an
// object (json.go: a list's repeated group and element, a map's key_value
// and its key and value, and the field itself are not named).
func jsonFrame(n *node, root *node) int64 {
	switch {
	case n != root && namedInJSON(n):
		return int64(6*len(n.el.name) + 12)
	case n.isLeaf():
		return 1 // a comma: its value or null is jsonValueMax
	case n.parent != nil && n.parent.isList() && n.el.rep == repRepeated:
		if elem, r, ok := listElement(n.parent); ok && r == n && elem != n {
			return 0 // a list's repeated group: its element has the comma
		}
	}
	return 6
}

// namedInJSON reports whether node n's name is rendered: whether its
// parent is rendered as an object by jsonWriter.object.
func namedInJSON(n *node) bool {
	p := n.parent
	if p == nil || p.isLeaf() {
		return false
	}
	if p.isList() {
		if _, _, ok := listElement(p); ok {
			return false
		}
	}
	if p.isMap() && len(p.children) == 1 && p.children[0].el.rep == repRepeated && len(p.children[0].children) == 2 {
		return false
	}
	if g := p.parent; g != nil && p.el.rep == repRepeated {
		if g.isList() {
			if elem, r, ok := listElement(g); ok && r == p && elem != p {
				return false
			}
		}
		if g.isMap() && len(g.children) == 1 && g.children[0] == p && len(p.children) == 2 {
			return false
		}
	}
	return true
}

// jsonValueMax is a leaf value's JSON text at most (or "null"), besides
// a byte array's escaped bytes (6 per byte, counted separately): quotes,
// and the quotes a map key is put in.
func jsonValueMax(n *node) int64 {
	var q int64 // quotes
	if p := n.parent; p != nil && p.el.rep == repRepeated && len(p.children) == 2 && p.children[0] == n {
		q = 2 // a map's key, put in quotes
	}
	switch n.el.phys {
	case tyBoolean:
		return max(5+q, 4)
	case tyInt32, tyInt64, tyInt96:
		return max(intTextMax+q, 4)
	case tyFloat:
		return max(float32TextMax+q, 4)
	case tyDouble:
		return max(floatTextMax+q, 4)
	case tyFixed:
		return add(mul(6, int64(n.el.typeLen)), 6)
	}
	return 6
}

// jsonInstances bounds the instances of node n in a column chunk: one a
// row where neither n nor a node above it repeats, else the levels of its
// first leaf (every instance, null or empty ones too, takes one of each
// leaf under it).
func jsonInstances(c *chunk, n *node) int64 {
	if n.rep == 0 {
		return c.rows
	}
	for !n.isLeaf() {
		n = n.children[0]
	}
	return c.cols[n.leaf].numValues
}

// fieldBound is what field f of chunk c costs in the resident form.
func (d *decoder) fieldBound(c *chunk, f *field) int64 {
	nameLen := d.ds.keyLen(c) + 1 + max(f.maxExtLen(), len(nullExt))
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
	// JSON: per leaf entry its value (or null), per instance of each
	// node its frame (jsonInstances), and byte arrays' escaped bytes.
	var sum int64
	for _, leaf := range f.leaves {
		n := d.schema.leaves[leaf]
		m := col(leaf)
		sum = add(sum, mul(m.numValues, jsonValueMax(n)))
		if n.el.phys == tyBytes {
			sum = add(sum, mul(6, m.bytesSum))
		}
	}
	var frames func(n *node)
	frames = func(n *node) {
		sum = add(sum, mul(jsonInstances(c, n), jsonFrame(n, f.node)))
		for _, ch := range n.children {
			frames(ch)
		}
	}
	frames(f.node)
	return members(c.rows, nameLen, sum, sum)
}

// bound is row group c's resident bound when the fields sel are read.
func (d *decoder) bound(c *chunk, sel format.Selection) int64 {
	return add(format.Overhead(int(c.rows)), d.membersBound(c, sel))
}

// spanBound is the resident bound of a chunk of the row groups gs: one
// table of all their rows, and each row group's members.
func (d *decoder) spanBound(gs []chunk, sel format.Selection) int64 {
	if len(gs) == 1 {
		return d.bound(&gs[0], sel)
	}
	var rows, n int64
	for i := range gs {
		rows = add(rows, gs[i].rows)
		n = add(n, d.membersBound(&gs[i], sel))
	}
	if rows > math.MaxInt32 {
		return math.MaxInt64
	}
	return add(format.Overhead(int(rows)), n)
}

// membersBound is what row group c's members take resident when the
// fields sel are read, without the table.
func (d *decoder) membersBound(c *chunk, sel format.Selection) int64 {
	var n int64
	any := false
	for i, f := range d.fields {
		if sel.Has(i) {
			n = add(n, d.fieldBound(c, f))
			any = true
		}
	}
	if !any {
		n = add(n, mul(c.rows, format.MemberLen(d.ds.keyLen(c)+1+len(nullExt), 0)))
	}
	return n
}

// guessed reports whether field f's bound in chunk c is a guess: a byte
// array column a dictionary or front coding may repeat values of, with no
// size statistics (colMeta.guess).
func (c *chunk) guessed(f *field) bool {
	for _, leaf := range f.leaves {
		if c.cols[leaf].guess {
			return true
		}
	}
	return false
}
