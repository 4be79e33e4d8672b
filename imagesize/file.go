package imagesize

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"slices"

	"github.com/brandgw/brand/internal/errkind"
)

// ErrFile marks a sizes file that does not decode: damaged, cut short,
// of another version of the file's layout, or failing its checksum.
var ErrFile = errkind.New(errkind.Upstream, "imagesize: bad sizes file")

// fileMagic opens a sizes file; its last byte is the layout's version.
const fileMagic = "BRANDSZ\x01"

// Bounds of a sizes file, so that a damaged or hostile one is refused
// before it allocates: an index ID's bytes and a reason's.
const (
	maxName   = 1 << 12
	maxReason = 1 << 10
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// A File is one dataset index version's sizes, one a sample in sample-ID
// order, as stored beside the index (docs/format.md, *Image sizes*).
type File struct {
	// Index is the ID of the index version the sizes are of: a file of
	// another version is refused (catalog.Dataset.LoadSizes).
	Index string
	// MaxPixels is the pixel bound the headers were read under (0:
	// transform's default): an append reads its new samples under it.
	MaxPixels int64
	// Sizes holds every sample's size by sample ID; zero for a sample in
	// Bad.
	Sizes []Size
	// Bad holds, by sample ID, why a sample has no size: NoImage, or why
	// its image's header does not read.
	Bad map[int]string
}

// Of returns sample id's size; false when the sample has no image, its
// header does not read (Bad), or id is not a sample of the file.
func (f *File) Of(id int) (Size, bool) {
	if id < 0 || id >= len(f.Sizes) {
		return Size{}, false
	}
	if _, bad := f.Bad[id]; bad {
		return Size{}, false
	}
	s := f.Sizes[id]
	return s, s != Size{}
}

// MarshalBinary encodes f (little-endian varints): the magic, the index
// ID, the pixel bound, the sample count and each sample's width and
// height, the distinct reasons and each bad sample's ID (ascending, as a
// difference from the one before) and reason, and a CRC32C of all of it.
// A bad sample's size is written as zero; a sample of zero size is bad.
func (f *File) MarshalBinary() ([]byte, error) {
	if len(f.Index) > maxName || f.MaxPixels < 0 {
		return nil, fmt.Errorf("%w: an index name of %d bytes, a pixel bound of %d", ErrFile, len(f.Index), f.MaxPixels)
	}
	ids := make([]int, 0, len(f.Bad))
	for id := range f.Bad {
		if id < 0 || id >= len(f.Sizes) {
			return nil, fmt.Errorf("%w: bad sample %d of %d", ErrFile, id, len(f.Sizes))
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	b := make([]byte, 0, len(fileMagic)+len(f.Index)+32+3*len(f.Sizes))
	b = append(b, fileMagic...)
	b = appendBytes(b, f.Index)
	b = binary.AppendUvarint(b, uint64(f.MaxPixels))
	b = binary.AppendUvarint(b, uint64(len(f.Sizes)))
	next := 0 // the next bad sample's place in ids
	for id, s := range f.Sizes {
		if next < len(ids) && ids[next] == id {
			s, next = Size{}, next+1
		} else if s.W == 0 || s.H == 0 {
			return nil, fmt.Errorf("%w: sample %d of %d×%d has no reason in Bad", ErrFile, id, s.W, s.H)
		}
		b = binary.AppendUvarint(b, uint64(s.W))
		b = binary.AppendUvarint(b, uint64(s.H))
	}
	reasons := map[string]int{}
	var table []string
	for _, id := range ids {
		why := clip(f.Bad[id])
		if _, ok := reasons[why]; !ok {
			reasons[why] = len(table)
			table = append(table, why)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(table)))
	for _, why := range table {
		b = appendBytes(b, why)
	}
	b = binary.AppendUvarint(b, uint64(len(ids)))
	prev := -1
	for _, id := range ids {
		b = binary.AppendUvarint(b, uint64(id-prev-1))
		b = binary.AppendUvarint(b, uint64(reasons[clip(f.Bad[id])]))
		prev = id
	}
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli)), nil
}

// UnmarshalBinary decodes a sizes file into f. Its checksum is checked
// first, and every count against the bytes left before anything is
// allocated for it; a file that does not decode is ErrFile and leaves f
// as it was. Whose index it is of is the caller's to check (f.Index).
func (f *File) UnmarshalBinary(p []byte) error {
	if len(p) < len(fileMagic)+4 || string(p[:len(fileMagic)]) != fileMagic {
		return fmt.Errorf("%w: not a sizes file of this version", ErrFile)
	}
	body := p[:len(p)-4]
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(p[len(p)-4:]) {
		return fmt.Errorf("%w: its checksum differs (damaged, or cut short)", ErrFile)
	}
	d := decoder{p: body[len(fileMagic):]}
	g := File{Index: string(d.bytes(maxName))}
	g.MaxPixels = int64(d.uint(math.MaxInt64))
	n := d.uint(uint64(len(d.p)) / 2) // a sample takes 2 bytes at least
	if d.err == nil {
		g.Sizes = make([]Size, n)
	}
	for i := range g.Sizes {
		g.Sizes[i] = Size{W: uint32(d.uint(math.MaxUint32)), H: uint32(d.uint(math.MaxUint32))}
	}
	table := make([]string, d.uint(uint64(len(d.p)))) // a reason takes a byte at least
	for i := range table {
		table[i] = string(d.bytes(maxReason))
	}
	k := d.uint(min(n, uint64(len(d.p))/2)) // a bad sample takes 2 bytes
	if d.err == nil && k > 0 {
		g.Bad = make(map[int]string, k)
	}
	id := -1
	for range k {
		id += int(d.uint(n-uint64(id+1))) + 1
		why := d.uint(uint64(max(len(table)-1, 0)))
		if d.err != nil {
			break
		}
		if id >= int(n) || len(table) == 0 {
			d.fail("bad sample %d of %d", id, n)
			break
		}
		if g.Sizes[id] != (Size{}) {
			d.fail("bad sample %d has a size", id)
			break
		}
		g.Bad[id] = table[why]
	}
	if d.err == nil {
		for id, s := range g.Sizes {
			if _, bad := g.Bad[id]; !bad && (s.W == 0 || s.H == 0) {
				d.fail("sample %d of %d×%d has no reason", id, s.W, s.H)
				break
			}
		}
	}
	if d.err == nil && len(d.p) != 0 {
		d.fail("%d bytes after the last bad sample", len(d.p))
	}
	if d.err != nil {
		return d.err
	}
	*f = g
	return nil
}

// clip bounds a reason to what a file holds.
func clip(s string) string {
	if len(s) > maxReason {
		return s[:maxReason]
	}
	return s
}

func appendBytes(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decoder reads a sizes file's fields; the first fault sticks.
type decoder struct {
	p   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrFile, fmt.Sprintf(format, args...))
	}
	d.p = nil
}

func (d *decoder) uint(bound uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p)
	if n <= 0 || v > bound {
		d.fail("a count past its bound (%d) or cut short", bound)
		return 0
	}
	d.p = d.p[n:]
	return v
}

func (d *decoder) bytes(bound uint64) []byte {
	n := d.uint(bound)
	if d.err == nil && n > uint64(len(d.p)) {
		d.fail("cut short")
	}
	if d.err != nil {
		return nil
	}
	b := d.p[:n:n]
	d.p = d.p[n:]
	return b
}
