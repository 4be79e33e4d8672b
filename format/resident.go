package format

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/brandgw/brand/format/internal/crcjoin"
	"github.com/brandgw/brand/internal/codec/ustar"
)

// ErrOverBound marks a decode that would write past its chunk's resident
// bound: the data does not agree with the metadata the bound came from.
// It wraps ErrDamaged.
var ErrOverBound = fmt.Errorf("%w: the chunk's data does not fit the size its metadata allows", ErrDamaged)

// The resident form's footer (package doc).
const (
	residentMagic   = "BRANDRES"
	residentVersion = 1
	// FooterLen is the footer's length in bytes.
	FooterLen = 8 + 4 + 4 + 8 + 4
	// TableEntryLen is the table's length per sample.
	TableEntryLen = 16
	// Block is the tar block size: every member starts on one.
	Block = 512
	// HeaderLen is what a member's ustar header costs; a name over 100
	// bytes costs a PAX header more (MemberLen).
	HeaderLen = Block
)

var (
	le         = binary.LittleEndian
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// MemberLen is the most a member whose name (key + "." + extension) is
// nameLen bytes and whose data is n bytes occupies in the resident form:
// its header (and a PAX header with the name when it does not fit
// ustar's 100 bytes), its data and its padding. Formats add it up, per
// member, for their bounds.
func MemberLen(nameLen int, n int64) int64 {
	h := int64(HeaderLen)
	if nameLen > 100 {
		// A PAX header block, its records ("NN path=NAME\n") padded.
		h += Block + pad(int64(nameLen)+16)
	}
	return h + pad(n)
}

// Overhead is the most the resident form adds besides the members: the
// table and the footer.
func Overhead(samples int) int64 { return int64(samples)*TableEntryLen + FooterLen }

func pad(n int64) int64 { return (n + Block - 1) / Block * Block }

// Writer writes a chunk's resident form into a buffer of its bound.
type Writer struct {
	// counting: past the bound, a decode that may grow (WriterOptions.
	// MayGrow) goes on only counting what the chunk needs (need), its
	// values decoded into scratch and dropped.
	counting bool
	mayGrow  bool
	need     int64
	scratch  []byte

	dst     []byte
	n       int64 // bytes written
	limit   int64 // where the table starts: the members must end before it
	samples int
	i       int // samples begun
	start   int64
	mtime   time.Time
	// template is the ustar header of the writer's members, made on the
	// first; noTemplate, that ustar cannot hold the time.
	template   *ustar.Template
	noTemplate bool
	key        string // the current sample's
	open       bool
	err        error

	// watch, when set (Watch), is told of each member's bytes before
	// they are written; known holds the current sample's members whose
	// data's CRC32C the caller gave (Known).
	watch   func(from, to, data int64)
	known   []knownCRC
	lastOff int64 // the data Member last returned: its offset, -1 for none
	lastN   int64
}

// knownCRC is a member's data whose CRC32C the caller computed.
type knownCRC struct {
	off, n int64
	crc    uint32
}

// NewWriter returns a writer of a chunk of samples samples into dst (its
// resident bound's length), every member modified at opt.ModTime.
func NewWriter(dst []byte, samples int, opt WriterOptions) (*Writer, error) {
	limit := int64(len(dst)) - Overhead(samples)
	if int64(len(dst)) > MaxChunkBytes {
		return nil, fmt.Errorf("%w: a resident bound of %d bytes, over the %d a chunk may have", ErrOverBound, len(dst), int64(MaxChunkBytes))
	}
	if samples < 0 || limit < 0 {
		return nil, fmt.Errorf("%w: a resident bound of %d bytes cannot hold the table of %d samples", ErrOverBound, len(dst), samples)
	}
	return &Writer{dst: dst, limit: limit, samples: samples, mtime: time.Unix(opt.ModTime, 0).UTC(), mayGrow: opt.MayGrow, lastOff: -1}, nil
}

// Begin starts the next sample, whose members are named key + "." + ext.
func (w *Writer) Begin(key string) error {
	if w.err != nil {
		return w.err
	}
	w.end()
	if w.i == w.samples {
		return w.fail(fmt.Errorf("%w: more samples than the %d its metadata counts", ErrDamaged, w.samples))
	}
	w.key = key
	w.start = w.n
	w.open = true
	w.known, w.lastOff = w.known[:0], -1
	return nil
}

// Member reserves the next member of the current sample, named by ext,
// with n bytes of data, and returns the slice of the buffer its data goes
// into: the caller fills it (decoding straight into place) before the next
// call. Its padding is zeroed.
func (w *Writer) Member(ext string, n int64) ([]byte, error) {
	if w.err != nil {
		return nil, w.err
	}
	if !w.open {
		return nil, w.fail(errors.New("format: a member before Begin"))
	}
	key := w.key
	nameLen := len(key) + 1 + len(ext)
	need := MemberLen(nameLen, n)
	if n >= 0 && (w.counting || w.n+need > w.limit && w.mayGrow) {
		return w.count(need, n)
	}
	if n < 0 || w.n+need > w.limit {
		return nil, w.fail(fmt.Errorf("%w (member %q of %d bytes)", ErrOverBound, key+"."+ext, n))
	}
	if w.watch != nil {
		data := int64(-1) // where the data goes, if the header is ustar's
		if w.template != nil && ustar.Fits(n, key, ".", ext) {
			data = w.n + HeaderLen
		}
		w.watch(w.n, w.n+need, data)
	}
	if err := w.header(key, ext, n); err != nil {
		return nil, err
	}
	data := w.dst[w.n : w.n+n : w.n+n]
	w.lastOff, w.lastN = w.n, n
	w.n += n
	p := pad(n) - n
	clear(w.dst[w.n : w.n+p])
	w.n += p
	return data, nil
}

// header writes the header of a member named key + "." + ext of n
// bytes at w.n, which the caller made sure fits: from the writer's ustar
// template when it holds the member (ustar.Fits) — archive/tar's header
// byte for byte, without its allocation and a quarter of a decode's CPU
// — else archive/tar's, through ustar (tarHeader).
func (w *Writer) header(key, ext string, n int64) error {
	w.makeTemplate()
	if w.template != nil && ustar.Fits(n, key, ".", ext) {
		w.template.Put(w.dst[w.n:w.n+HeaderLen], n, key, ".", ext)
		w.n += HeaderLen
		return nil
	}
	return w.tarHeader(key+"."+ext, n)
}

// makeTemplate makes the writer's ustar template, once: archive/tar's
// header of its members, mode 0644, modified at its time; none if ustar
// cannot hold the time (every member then takes archive/tar's header,
// which says why).
func (w *Writer) makeTemplate() {
	if w.template == nil && !w.noTemplate {
		w.template, _ = ustar.NewTemplate(0o644, w.mtime)
		w.noTemplate = w.template == nil
	}
}

// tarHeader writes a member's header through ustar.AppendHeader, that
// is archive/tar's: a name over ustar's 100 bytes (ustar's prefix where
// it splits, else a PAX header first), or one ustar cannot hold.
func (w *Writer) tarHeader(name string, n int64) error {
	f := ustar.USTAR
	if len(name) > 100 {
		f = ustar.PAX
	}
	room := w.dst[w.n:w.n:w.limit]
	b, err := ustar.AppendHeader(room, ustar.Header{Name: name, Size: n, Mode: 0o644, ModTime: w.mtime, Format: f})
	if err == nil && len(b) > cap(room) {
		err = ErrOverBound // the blocks were appended elsewhere: none past the bound
	}
	if err != nil {
		return w.fail(fmt.Errorf("%w: member %q: %v", ErrDamaged, name, err))
	}
	w.n += int64(len(b))
	return nil
}

// MemberWorking is what Member allocates a member, at most (archive/tar's
// header writer, about 1 KB measured, for a name ustar's template does
// not hold): a decode's Working counts it, or HeaderWorking.
const MemberWorking = 2 << 10

// HeaderWorking is what Member allocates a member whose name (key + "." +
// extension) is nameLen bytes: nothing when the writer's ustar template
// holds it (at most 100 bytes), else MemberWorking. A name of non-ASCII
// bytes goes through archive/tar too, which refuses it: the decode ends
// there, so one MemberWorking a decode covers it.
func HeaderWorking(nameLen int) int64 {
	if nameLen > 100 {
		return MemberWorking
	}
	return 0
}

// count is Member past the bound of a decode that may grow: it counts
// what the member needs and hands out scratch room for its data.
func (w *Writer) count(need, n int64) ([]byte, error) {
	if !w.counting {
		w.counting, w.need = true, w.n
	}
	w.need += need
	if w.need+Overhead(w.samples) > MaxChunkBytes {
		return nil, w.fail(fmt.Errorf("%w: the chunk's samples need more than the %d bytes a chunk may have", ErrDamaged, int64(MaxChunkBytes)))
	}
	if int64(cap(w.scratch)) < n {
		w.scratch = make([]byte, n)
	}
	return w.scratch[:n:n], nil
}

// Watch has the writer call watch(from, to, data) before it writes a
// member's bytes, [from, to) of the buffer: its header, its data from
// data on (-1 when the header is not ustar's plain one, whose length is
// not HeaderLen) and its padding. A decoder that placed values in the
// buffer before the writer reached them moves those the member would
// write over.
func (w *Writer) Watch(watch func(from, to, data int64)) {
	w.makeTemplate()
	w.watch = watch
}

// Known gives the CRC32C of the data of the member Member last returned,
// which the caller computed as it wrote it (from its pieces, with
// crcjoin): the sample's CRC32C is then joined from it rather than read
// again from memory.
func (w *Writer) Known(crc uint32) {
	if w.open && !w.counting && w.lastOff >= w.start {
		w.known = append(w.known, knownCRC{off: w.lastOff, n: w.lastN, crc: crc})
		w.lastOff = -1
	}
}

// Counting reports whether the chunk went past its bound in a decode
// that may grow: Member then hands out scratch room, reused member after
// member, whose data is not kept (Finish returns a GrowError).
func (w *Writer) Counting() bool { return w.counting }

// Add adds a member whose data is data (a copy).
func (w *Writer) Add(ext string, data []byte) error {
	d, err := w.Member(ext, int64(len(data)))
	if err != nil {
		return err
	}
	copy(d, data)
	return nil
}

// end closes the current sample: its table entry.
func (w *Writer) end() {
	if !w.open {
		return
	}
	w.open = false
	if w.counting {
		w.i++
		return
	}
	length := w.n - w.start
	e := w.dst[w.limit+int64(w.i)*TableEntryLen:]
	le.PutUint64(e, uint64(w.start))
	le.PutUint32(e[8:], uint32(length))
	le.PutUint32(e[12:], w.sampleCRC())
	w.i++
}

// sampleCRC is the CRC32C of the current sample, its members' data whose
// CRC32C is known joined rather than read again.
func (w *Writer) sampleCRC() uint32 {
	if len(w.known) == 0 {
		return crc32.Checksum(w.dst[w.start:w.n], castagnoli)
	}
	var crc uint32
	at := w.start
	for _, k := range w.known {
		crc = crc32.Update(crc, castagnoli, w.dst[at:k.off])
		crc = crcjoin.Join(crc, k.crc, k.n)
		at = k.off + k.n
	}
	w.known = w.known[:0]
	return crc32.Update(crc, castagnoli, w.dst[at:w.n])
}

// Finish ends the last sample and writes the table's footer. It fails if
// fewer samples were written than the writer was made for, or a sample
// has no member.
func (w *Writer) Finish() error {
	if w.err != nil {
		return w.err
	}
	w.end()
	if w.i != w.samples {
		return w.fail(fmt.Errorf("%w: %d samples decoded, its metadata counts %d", ErrDamaged, w.i, w.samples))
	}
	if w.counting {
		return w.fail(&GrowError{Need: w.need + Overhead(w.samples)})
	}
	for i := range w.samples {
		if le.Uint32(w.dst[w.limit+int64(i)*TableEntryLen+8:]) == 0 {
			return w.fail(fmt.Errorf("%w: sample %d has no member", ErrDamaged, i))
		}
	}
	f := w.dst[len(w.dst)-FooterLen:]
	copy(f, residentMagic)
	le.PutUint32(f[8:], residentVersion)
	le.PutUint32(f[12:], uint32(w.samples))
	le.PutUint64(f[16:], uint64(w.limit))
	crc := crc32.Checksum(w.dst[w.limit:len(w.dst)-FooterLen], castagnoli)
	le.PutUint32(f[24:], crc32.Update(crc, castagnoli, f[:24]))
	return nil
}

// GrowError is a decode that may grow (WriterOptions.MayGrow) whose
// chunk needs more than its bound: Need bytes. Its samples were counted,
// not written; the chunk decodes whole into a buffer of Need bytes.
type GrowError struct{ Need int64 }

func (e *GrowError) Error() string {
	return fmt.Sprintf("format: the chunk needs %d bytes, more than the bound its metadata gave", e.Need)
}

// Len is the bytes of samples written so far.
func (w *Writer) Len() int64 { return w.n }

func (w *Writer) fail(err error) error {
	w.err = err
	return err
}

// Table is a resident chunk's sample table.
type Table struct {
	t []byte // TableEntryLen bytes a sample
	n int    // end of the samples: where the table starts
}

// ReadTable finds and checks the table of the resident chunk b. It fails
// with an error wrapping ErrDamaged when b is not a whole resident chunk
// (a wrong footer or a table that fails its CRC32C, an entry outside the
// samples' bytes).
func ReadTable(b []byte) (Table, error) {
	if len(b) < FooterLen {
		return Table{}, fmt.Errorf("%w: %d bytes cannot hold a resident footer", ErrDamaged, len(b))
	}
	f := b[len(b)-FooterLen:]
	if string(f[:8]) != residentMagic || le.Uint32(f[8:]) != residentVersion {
		return Table{}, fmt.Errorf("%w: no resident footer", ErrDamaged)
	}
	samples, at := int64(le.Uint32(f[12:])), le.Uint64(f[16:])
	if at > uint64(len(b)-FooterLen) || uint64(len(b)-FooterLen)-at != uint64(samples)*TableEntryLen {
		return Table{}, fmt.Errorf("%w: a resident table of %d samples at %d does not fit %d bytes", ErrDamaged, samples, at, len(b))
	}
	crc := crc32.Checksum(b[at:len(b)-FooterLen], castagnoli)
	if crc32.Update(crc, castagnoli, f[:24]) != le.Uint32(f[24:]) {
		return Table{}, fmt.Errorf("%w: the resident table fails its CRC32C", ErrDamaged)
	}
	t := Table{t: b[at : len(b)-FooterLen], n: int(at)}
	end := int64(0)
	for i := range t.Len() {
		off, n, _ := t.Sample(i)
		if off < end || off%Block != 0 || n <= 0 || n%Block != 0 || off+n > int64(t.n) {
			return Table{}, fmt.Errorf("%w: resident sample %d at %d+%d is outside the samples' %d bytes or out of order", ErrDamaged, i, off, n, t.n)
		}
		end = off + n
	}
	return t, nil
}

// Len is the number of samples.
func (t Table) Len() int { return len(t.t) / TableEntryLen }

// Need is the least buffer the chunk's resident form fits: its samples'
// bytes, its table and its footer. A decode into a buffer of its bound
// leaves the room between them unused.
func (t Table) Need() int64 {
	var end int64
	if n := t.Len(); n > 0 {
		off, length, _ := t.Sample(n - 1)
		end = off + length
	}
	return end + Overhead(t.Len())
}

// Sample returns sample i's range in the chunk and its CRC32C.
func (t Table) Sample(i int) (off, length int64, crc uint32) {
	e := t.t[i*TableEntryLen:]
	return int64(le.Uint64(e)), int64(le.Uint32(e[8:])), le.Uint32(e[12:])
}

// Verify checks every sample of the resident chunk b against its table's
// CRC32C: what a chunk read back from disk or received from a peer must
// pass before it is served.
func Verify(b []byte) (Table, error) {
	t, err := ReadTable(b)
	if err != nil {
		return Table{}, err
	}
	for i := range t.Len() {
		off, n, crc := t.Sample(i)
		if got := crc32.Checksum(b[off:off+n], castagnoli); got != crc {
			return Table{}, fmt.Errorf("%w: resident sample %d has CRC32C %08x, its table says %08x", ErrDamaged, i, got, crc)
		}
	}
	return t, nil
}

// Entry returns sample i's range and CRC32C in the resident chunk b
// without checking the table: for a chunk checked when it was decoded or
// received (ReadTable, Verify), on the path that serves every sample.
func Entry(b []byte, i int) (off, length int64, crc uint32) {
	at := int64(le.Uint64(b[len(b)-FooterLen+16:]))
	e := b[at+int64(i)*TableEntryLen:]
	return int64(le.Uint64(e)), int64(le.Uint32(e[8:])), le.Uint32(e[12:])
}
