package parquet

import (
	"unsafe"

	"github.com/brandgw/brand/format"
)

// placement is where DecodeStream put the values of the columns it
// streamed (stream.go), and what the decode that follows does with them:
// a value already where its member goes stays; one that is not is copied
// there; and before the writer writes over a value not yet used, the
// values not yet used are moved out of its way (rescue).
type placement struct {
	dst   []byte
	limit int64 // where the resident form's table starts
	bufs  format.Buffers

	// leaf is, by row group (chunk.at), the leaf streamed (-1: none).
	leaf  map[int]int
	pages map[pageKey]*streamedPage

	// The values, in the order they came (k-th: row k's on trust), and
	// their CRC32Cs; inDst, whether each is still in dst.
	vals  [][]byte
	crcs  []uint32
	inDst []bool
	last  int // the last value placed in dst, -1 for none

	// The guess: the next row's sample starts at at; a row's members
	// before the streamed one take before bytes, all but it per.
	at, before, per int64

	// The decode: the next value on trust, the one being placed now (-1:
	// none), whether the values were moved out (trust dropped).
	w       *format.Writer
	next    int
	cur     int
	rescued bool
	moved   int // values rescue moved, for tests
	shifted int // values moved down to their members, for tests

	snappy snappyStream
	arena  []byte
	held   [][]byte // scratch from bufs
	spare  []byte   // the free part of the last of held
}

// plan returns the placement of chunk gs's streamed columns, or nil when
// it streams none: a row group's first selected image field whose bytes
// are a flat leaf, snappy or uncompressed, is streamed, unless a member's
// name may not fit a plain ustar header. A chunk whose bound was a guess
// and proves short ends in a GrowError as Decode's does; its src, which
// lacks the streamed pages, cannot be decoded again (the caller streams
// it again into the room it asks for).
func (d *decoder) plan(gs []chunk, sel format.Selection, dst []byte, wo format.WriterOptions) *placement {
	var img *field
	var before, others int64
	for i, f := range d.fields {
		if !sel.Has(i) {
			continue
		}
		if img == nil && f.kind == kindImage {
			img = f
			continue
		}
		if img == nil {
			before++
		}
		others++
	}
	if img == nil {
		return nil
	}
	pl := &placement{dst: dst, bufs: wo.Buffers, pages: map[pageKey]*streamedPage{}, leaf: map[int]int{}, cur: -1, last: -1,
		before: before * 2 * format.Block, per: others * 2 * format.Block}
	if pl.bufs == nil {
		pl.bufs = unpooled{}
	}
	var rows int64
	any := false
	for gi := range gs {
		ch := &gs[gi]
		rows += ch.rows
		l := img.bytesLeaf
		m := &ch.cols[l]
		ok := d.flat(ch, l) && d.schema.leaves[l].el.phys == tyBytes && (m.codec == 0 || m.codec == 1) &&
			d.ds.keyLen(ch)+1+len(img.ext)+5 <= 100
		pl.leaf[ch.at] = -1
		if ok {
			pl.leaf[ch.at] = l
			any = true
		}
	}
	if !any {
		return nil
	}
	pl.limit = int64(len(dst)) - format.Overhead(int(rows))
	return pl
}

// place returns where the next value, of n bytes, goes: row k's image
// member's data, if every row before it is as guessed; past the table's
// start, scratch.
func (pl *placement) place(n int) []byte {
	start := pl.at + pl.before + format.HeaderLen
	pl.at += format.MemberLen(0, int64(n)) + pl.per
	if end := start + int64(n); end <= pl.limit && start >= 0 {
		pl.last = len(pl.inDst)
		pl.inDst = append(pl.inDst, true)
		return pl.dst[start:end:end]
	}
	pl.inDst = append(pl.inDst, false)
	return pl.scratch(n)
}

// scratch returns n bytes of the pools' buffers, kept until release.
func (pl *placement) scratch(n int) []byte {
	if len(pl.spare) < n {
		b := pl.bufs.Get(int64(max(n, 1<<20)))
		pl.held = append(pl.held, b)
		pl.spare = b[:cap(b)]
	}
	b := pl.spare[:n:n]
	pl.spare = pl.spare[n:]
	return b
}

// release gives the scratch back.
func (pl *placement) release() {
	for _, b := range pl.held {
		pl.bufs.Put(b)
	}
	pl.held, pl.spare = nil, nil
}

// start is value g's offset in dst.
func (pl *placement) start(g int) int64 {
	v := pl.vals[g]
	if len(v) == 0 {
		return -1
	}
	return int64(uintptr(unsafe.Pointer(unsafe.SliceData(v))) - uintptr(unsafe.Pointer(unsafe.SliceData(pl.dst))))
}

// rescue moves every value not yet used that is still in dst to scratch:
// the decode no longer trusts the guess.
func (pl *placement) rescue() {
	if pl.rescued {
		return
	}
	pl.rescued = true
	for g := pl.next; g < len(pl.vals); g++ {
		if pl.inDst[g] {
			b := pl.scratch(len(pl.vals[g]))
			copy(b, pl.vals[g])
			pl.vals[g], pl.inDst[g] = b, false
			pl.moved++
		}
	}
}

// watch is the writer's Watch: it is about to write [from, to), a
// member's data from data on (-1: unknown).
func (pl *placement) watch(from, to, data int64) {
	if pl.rescued {
		return
	}
	for g := pl.next; g <= pl.last; g++ {
		if !pl.inDst[g] || len(pl.vals[g]) == 0 {
			continue
		}
		s := pl.start(g)
		if s >= to {
			return // values lie in the order they came
		}
		if g == pl.cur && data >= 0 && data <= s {
			// The member being written is the value's: where it was
			// placed, or earlier (a row before it had fewer members than
			// guessed), when it moves down before its header and padding
			// are written, over nothing not yet used.
			if data < s {
				v := pl.vals[g]
				moved := pl.dst[data : data+int64(len(v)) : data+int64(len(v))]
				copy(moved, v)
				pl.vals[g] = moved
				pl.shifted++
			}
			continue
		}
		if s+int64(len(pl.vals[g])) > from {
			pl.rescue()
			return
		}
	}
}

// put writes value g where pl places it (an image's member), copying it
// only when it is not there already.
func (pl *placement) put(g int, p placer) error {
	if g != pl.next {
		// Not the value the guess gave this row: trust is over.
		pl.rescue()
	}
	v := pl.vals[g]
	pl.cur = g
	dst, _, err := p.place(int64(len(v)), v[:min(len(v), headLen)])
	pl.cur = -1
	if err != nil {
		return err
	}
	v = pl.vals[g] // rescue may have moved it
	if len(v) > 0 && unsafe.SliceData(dst) != unsafe.SliceData(v) {
		copy(dst, v)
	}
	if len(dst) == len(v) && pl.w != nil && !pl.w.Counting() {
		pl.w.Known(pl.crcs[g])
	}
	if g == pl.next {
		pl.next++
	}
	pl.vals[g] = dst // where a dictionary value used again is now
	return nil
}
