package parquet

import (
	"fmt"
	"slices"
	"strings"
)

// node is a schema element in the tree the flat schema list describes,
// with the definition and repetition levels a value at it has.
type node struct {
	el       element
	parent   *node
	children []*node
	leaf     int // the leaf's column index; -1 for a group
	def, rep int // max levels at this node, inclusive
	depth    int
}

func (n *node) isLeaf() bool { return n.el.phys != tyGroup }

// path is the node's column path (without the root).
func (n *node) path() []string {
	var p []string
	for ; n.parent != nil; n = n.parent {
		p = append(p, n.el.name)
	}
	slices.Reverse(p)
	return p
}

// leaves returns the columns under n, in order.
func (n *node) leaves(out []int) []int {
	if n.isLeaf() {
		return append(out, n.leaf)
	}
	for _, c := range n.children {
		out = c.leaves(out)
	}
	return out
}

func (n *node) isList() bool {
	return !n.isLeaf() && (n.el.logical == ltList || n.el.converted == ctList)
}

func (n *node) isMap() bool {
	return !n.isLeaf() && (n.el.logical == ltMap || n.el.converted == ctMap || n.el.converted == ctMapKeyValue)
}

// schema is a file's schema as a tree, its leaves in column order.
type schema struct {
	root   *node
	leaves []*node
}

// buildSchema makes the tree of elems (a schema list: each group followed
// by its children, depth first), refusing nesting deeper than depth and
// more than maxLeaves leaves or maxFields top-level columns.
func buildSchema(elems []element, depth, maxFields, maxLeaves int) (*schema, error) {
	s := &schema{}
	pos := 0
	var build func(parent *node, d int) (*node, error)
	build = func(parent *node, d int) (*node, error) {
		if pos >= len(elems) {
			return nil, fmt.Errorf("the schema ends inside a group")
		}
		if d > depth {
			return nil, fmt.Errorf("the schema nests deeper than %d levels", depth)
		}
		e := elems[pos]
		pos++
		n := &node{el: e, parent: parent, leaf: -1, depth: d}
		if parent != nil {
			n.def, n.rep = parent.def, parent.rep
			switch e.rep {
			case repOptional:
				n.def++
			case repRepeated:
				n.def++
				n.rep++
			}
		}
		if e.phys != tyGroup {
			if parent == nil {
				return nil, fmt.Errorf("the schema's root is not a group")
			}
			if e.children > 0 {
				return nil, fmt.Errorf("column %q has a physical type and children", strings.Join(n.path(), "."))
			}
			if e.phys == tyFixed && e.typeLen <= 0 {
				return nil, fmt.Errorf("column %q is a fixed_len_byte_array of length %d", strings.Join(n.path(), "."), e.typeLen)
			}
			n.leaf = len(s.leaves)
			if len(s.leaves) == maxLeaves {
				return nil, fmt.Errorf("the schema has more than %d columns", maxLeaves)
			}
			s.leaves = append(s.leaves, n)
			return n, nil
		}
		if int(e.children) > len(elems)-pos {
			return nil, fmt.Errorf("group %q claims %d children, the schema has %d elements left", e.name, e.children, len(elems)-pos)
		}
		if e.children == 0 && parent != nil {
			return nil, fmt.Errorf("group %q has no children", strings.Join(n.path(), "."))
		}
		n.children = make([]*node, 0, e.children)
		for range e.children {
			c, err := build(n, d+1)
			if err != nil {
				return nil, err
			}
			n.children = append(n.children, c)
		}
		return n, nil
	}
	root, err := build(nil, 0)
	if err != nil {
		return nil, err
	}
	if pos != len(elems) {
		return nil, fmt.Errorf("the schema has %d elements outside its root", len(elems)-pos)
	}
	if len(root.children) == 0 {
		return nil, fmt.Errorf("the schema has no columns")
	}
	if len(root.children) > maxFields {
		return nil, fmt.Errorf("the schema has %d top-level columns, more than the %d allowed", len(root.children), maxFields)
	}
	s.root = root
	return s, nil
}

// kind is what a field's values become (package doc, "Members").
type kind uint8

const (
	kindImage  kind = iota + 1 // binary, or struct{bytes, path}: an image
	kindCls                    // an integer: decimal text
	kindTxt                    // a string: its bytes
	kindNpy                    // a list of integers: a 1-D .npy array
	kindJSON                   // anything else: JSON
	kindTokens                 // a text column's tokens (Options.Text): a 1-D int32 .npy
)

// field is a top-level column and how it becomes members.
type field struct {
	name   string
	node   *node
	kind   kind
	leaves []int // its columns
	// ext is the member's extension; for an image field not forced to
	// one by Options.Members, the prefix of the extension each value's
	// path or magic bytes decide ("" or "column.").
	ext    string
	forced bool
	// image: the bytes and path columns (path -1 for a bare binary).
	bytesLeaf, pathLeaf int
	// npy: the element's NumPy type and size.
	descr string
	size  int
	// element is an npy field's element node (the list's int leaf).
	element *node
}

// defaultExt is the extension of a field's values when nothing collides.
func (k kind) defaultExt() string {
	switch k {
	case kindCls:
		return "cls"
	case kindTxt:
		return "txt"
	case kindNpy:
		return "npy"
	case kindJSON:
		return "json"
	}
	return ""
}

func isInt(n *node) bool {
	if !n.isLeaf() || (n.el.phys != tyInt32 && n.el.phys != tyInt64) {
		return false
	}
	switch {
	case n.el.logical == ltInteger:
		return true
	case n.el.logical != 0:
		return false
	case n.el.converted == -1:
		return true
	}
	return n.el.converted >= ctUint8 && n.el.converted <= ctInt64
}

func isString(n *node) bool {
	if !n.isLeaf() || n.el.phys != tyBytes {
		return false
	}
	switch n.el.logical {
	case ltString, ltEnum, ltJSON:
		return true
	}
	switch n.el.converted {
	case ctUTF8, ctEnum, ctJSON:
		return true
	}
	return false
}

func isBinary(n *node) bool {
	return n.isLeaf() && n.el.phys == tyBytes && n.el.logical == 0 && n.el.converted == -1
}

// listElement returns the element node of a LIST-annotated group n, by
// the Parquet spec's backward-compatibility rules, and the repeated node.
func listElement(n *node) (elem, repeated *node, ok bool) {
	if len(n.children) != 1 || n.children[0].el.rep != repRepeated {
		return nil, nil, false
	}
	r := n.children[0]
	if r.isLeaf() || len(r.children) != 1 || r.el.name == "array" || r.el.name == n.el.name+"_tuple" {
		return r, r, true
	}
	return r.children[0], r, true
}

// npyType returns the NumPy type of an integer column's values.
func npyType(n *node) (string, int) {
	bits, signed := 32, true
	if n.el.phys == tyInt64 {
		bits = 64
	}
	if n.el.logical == ltInteger {
		bits, signed = int(n.el.bitWidth), n.el.signed
	} else if c := n.el.converted; c >= ctUint8 && c <= ctInt64 {
		bits = []int{8, 16, 32, 64}[(c-ctUint8)%4]
		signed = c >= ctInt8
	}
	if bits != 8 && bits != 16 && bits != 32 && bits != 64 {
		bits = 32
		if n.el.phys == tyInt64 {
			bits = 64
		}
	}
	if bits == 64 && n.el.phys == tyInt32 {
		bits = 32
	}
	t := "i"
	if !signed {
		t = "u"
	}
	order := "<"
	if bits == 8 {
		order = "|"
	}
	return fmt.Sprintf("%s%s%d", order, t, bits/8), bits / 8
}

// classify decides a top-level column's kind.
func classify(n *node) *field {
	f := &field{name: n.el.name, node: n, kind: kindJSON, leaves: n.leaves(nil), bytesLeaf: -1, pathLeaf: -1}
	switch {
	case n.el.rep == repRepeated:
		// A bare repeated column is a list of its values.
		if isInt(n) {
			f.kind, f.element = kindNpy, n
		}
	case n.isLeaf():
		switch {
		case isInt(n):
			f.kind = kindCls
		case isString(n):
			f.kind, f.bytesLeaf = kindTxt, n.leaf
		case isBinary(n):
			f.kind, f.bytesLeaf = kindImage, n.leaf
		}
	case n.isList():
		if e, r, ok := listElement(n); ok && isInt(e) && e.rep == 1 && (e == r || e.el.rep != repRepeated) {
			f.kind, f.element = kindNpy, e
		}
	case !n.isMap() && len(n.children) == 2:
		var b, p *node
		for _, c := range n.children {
			switch {
			case c.el.name == "bytes" && c.isLeaf() && c.el.phys == tyBytes && c.el.rep != repRepeated:
				b = c
			case c.el.name == "path" && c.isLeaf() && c.el.phys == tyBytes && c.el.rep != repRepeated:
				p = c
			}
		}
		if b != nil && p != nil {
			f.kind, f.bytesLeaf, f.pathLeaf = kindImage, b.leaf, p.leaf
		}
	}
	switch f.kind {
	case kindNpy:
		f.descr, f.size = npyType(f.element)
	case kindCls:
		f.descr, f.size = npyType(n)
	}
	return f
}

// typeName describes a node's type for listings and errors.
func typeName(n *node) string {
	var b strings.Builder
	writeType(&b, n, 0)
	s := b.String()
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	return s
}

func writeType(b *strings.Builder, n *node, d int) {
	if b.Len() > 200 || d > 8 {
		b.WriteString("...")
		return
	}
	rep := n.el.rep == repRepeated && n.parent != nil && !n.parent.isList() && !n.parent.isMap()
	if rep {
		b.WriteString("list<")
		defer b.WriteString(">")
	}
	switch {
	case n.isLeaf():
		switch {
		case isString(n):
			b.WriteString("string")
		case isInt(n):
			t, size := npyType(n)
			if t[1] == 'u' {
				fmt.Fprintf(b, "uint%d", size*8)
			} else {
				fmt.Fprintf(b, "int%d", size*8)
			}
		default:
			b.WriteString([]string{"boolean", "int32", "int64", "int96", "float", "double", "binary", "fixed_len_byte_array"}[n.el.phys])
			if n.el.phys == tyFixed {
				fmt.Fprintf(b, "(%d)", n.el.typeLen)
			}
		}
	case n.isList():
		if e, _, ok := listElement(n); ok {
			b.WriteString("list<")
			writeType(b, e, d+1)
			b.WriteString(">")
			return
		}
		fallthrough
	default:
		b.WriteString("struct<")
		for i, c := range n.children {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(c.el.name)
			b.WriteString(": ")
			writeType(b, c, d+1)
		}
		b.WriteString(">")
	}
}

// Image extensions a path may give a member, and the longest.
var imageExts = map[string]bool{
	"jpg": true, "jpeg": true, "png": true, "webp": true, "gif": true, "bmp": true,
	"tif": true, "tiff": true, "avif": true, "heic": true, "jxl": true, "jp2": true,
	"ppm": true, "pgm": true, "pbm": true, "pnm": true, "ico": true,
}

const maxImageExt = 4

// nullExt names the empty member of a sample none of whose selected
// fields has a value (the resident form has no empty samples).
const nullExt = "null"

// sanitize makes a column name usable in a member's extension: letters,
// digits, '_' and '-' are kept, anything else becomes '_'.
func sanitize(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			b[i] = '_'
		}
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}

func validExt(e string) bool {
	if e == "" || e[0] == '.' || e[len(e)-1] == '.' || len(e) > 64 || e == nullExt {
		return false
	}
	for _, c := range []byte(e) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// assignExts gives each field its member extension: its kind's default
// (an image field's per value), or Options.Members' for it. Fields whose
// defaults collide — with each other or with an override (image fields
// collide with each other and with any image extension) — are qualified
// with their column name ("label.cls", "label2.cls", "image.jpg"); two
// overrides alike, or names that still collide, are refused.
func assignExts(fs []*field, members map[string]string) error {
	for name, ext := range members {
		if !slices.ContainsFunc(fs, func(f *field) bool { return f.name == name }) {
			return fmt.Errorf("Options.Members names column %q, which the dataset does not have", name)
		}
		if !validExt(ext) {
			return fmt.Errorf("Options.Members gives column %q the extension %q: use letters, digits, '_', '-' and inner dots, not %q", name, ext, nullExt)
		}
	}
	class := func(f *field) string {
		if ext, ok := members[f.name]; ok {
			if imageExts[strings.ToLower(ext)] {
				return "image"
			}
			return "=" + ext
		}
		if f.kind == kindImage {
			return "image"
		}
		return "=" + f.kind.defaultExt()
	}
	count := map[string]int{}
	for _, f := range fs {
		count[class(f)]++
	}
	for _, f := range fs {
		ext, forced := members[f.name]
		switch {
		case forced:
			f.ext, f.forced = ext, true
		case count[class(f)] > 1 && f.kind == kindImage:
			f.ext = sanitize(f.name) + "."
		case count[class(f)] > 1:
			f.ext = sanitize(f.name) + "." + f.kind.defaultExt()
		case f.kind == kindImage:
			f.ext = ""
		default:
			f.ext = f.kind.defaultExt()
		}
	}
	// What remains: overrides alike, or sanitized names alike.
	seen := map[string]string{}
	for _, f := range fs {
		key := f.ext
		if f.kind == kindImage && !f.forced {
			key = f.ext + "*"
		}
		if other, ok := seen[key]; ok {
			return fmt.Errorf("columns %q and %q would both be members .%s; name one in Options.Members", other, f.name, strings.TrimSuffix(key, "*"))
		}
		seen[key] = f.name
	}
	return nil
}

// maxExtLen is the longest extension a field's members may have.
func (f *field) maxExtLen() int {
	if f.kind == kindImage && !f.forced {
		return len(f.ext) + maxImageExt
	}
	return len(f.ext)
}
