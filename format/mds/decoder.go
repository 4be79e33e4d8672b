package mds

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/inflate"
	"github.com/brandgw/brand/format/internal/keys"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/tokenize"
)

// meta is an MDS dataset as Index found it and Open reads it back.
type meta struct {
	Columns []columnMeta `json:"columns"`
	Shards  []shardMeta  `json:"shards"`
	Tokens  *tokensMeta  `json:"tokens,omitempty"` // a token dataset's (tokens.go)
}

type columnMeta struct {
	Name     string `json:"name"`
	Encoding string `json:"encoding"`
	Ext      string `json:"ext"`
}

type shardMeta struct {
	Object      string `json:"object"`
	Stem        string `json:"stem"` // its samples' keys are stem/NNNNNN
	Compression string `json:"compression,omitempty"`
	Raw         int64  `json:"raw"`           // the (decompressed) shard's bytes
	Zip         int64  `json:"zip,omitempty"` // the compressed object's bytes
	Samples     int    `json:"samples"`
	// VarBytes bounds the stored bytes of the variable-size columns'
	// values, all samples together: the shard less its header and the
	// fixed-size values and size prefixes.
	VarBytes int64 `json:"var_bytes"`
}

// Decoder decodes the shards of one MDS dataset.
type Decoder struct {
	m      *meta
	encs   []encoding
	fields []format.Field
	model  *tokenize.Model // a text token dataset's
}

func newDecoder(m *meta) (*Decoder, error) {
	d := &Decoder{m: m}
	for _, c := range m.Columns {
		e, err := parseEncoding(c.Encoding)
		if err != nil || !validExt(c.Ext) {
			return nil, fmt.Errorf("%w: mds meta: column %q", format.ErrInvalid, c.Name)
		}
		d.encs = append(d.encs, e)
		d.fields = append(d.fields, format.Field{Name: c.Name, Ext: c.Ext, Type: c.Encoding})
	}
	if len(d.encs) == 0 {
		return nil, fmt.Errorf("%w: mds meta: no columns", format.ErrInvalid)
	}
	if err := d.openTokens(); err != nil {
		return nil, err
	}
	for _, s := range m.Shards {
		if s.Samples < 1 || s.Samples > 1<<31 || s.Raw < 0 || s.Raw > 1<<32-1 || s.VarBytes < 0 || s.VarBytes > s.Raw || s.Zip < 0 {
			return nil, fmt.Errorf("%w: mds meta: shard %q", format.ErrInvalid, s.Object)
		}
	}
	return d, nil
}

// Fields are the columns, in the order the shards store them.
func (d *Decoder) Fields() []format.Field { return d.fields }

// Extent is shard c read whole: MDS stores a sample's columns together,
// so a selection reads every byte. The resident bound shrinks with it.
func (d *Decoder) Extent(c int, sel format.Selection) ([]format.Range, int64) {
	s := d.m.Shards[c]
	size := s.Raw
	if s.Compression != "" {
		size = s.Zip
	}
	return []format.Range{{Off: 0, Len: size}}, d.bound(c, sel)
}

// bound is the most shard s's samples with the fields sel take in the
// resident form: per sample, each selected member's header (a PAX one
// for a long name), a fixed-size value's member padded, and for the
// variable-size values together their stored bytes, what the member
// adds to each (an ndarray's .npy header) and each one's padding.
func (d *Decoder) bound(c int, sel format.Selection) int64 {
	s := d.m.Shards[c]
	n := int64(s.Samples)
	total := format.Overhead(s.Samples)
	anyVar := false
	for ci, e := range d.encs {
		if !sel.Has(ci) {
			continue
		}
		ext := len(d.m.Columns[ci].Ext)
		// Keys are stem/NNNNNN: six digits, more from sample 10^6 on.
		for lo, w := 0, keyWidth; lo < s.Samples; w++ {
			hi := min(s.Samples, pow10(w))
			total += int64(hi-lo) * format.MemberLen(len(s.Stem)+1+w+1+ext, 0)
			lo = hi
		}
		if e.size > 0 {
			total += n * pad(e.memberBound(e.size))
		} else {
			anyVar = true
			total += n * (e.memberBound(0) + format.Block - 1)
		}
	}
	if anyVar {
		total += s.VarBytes
	}
	if d.model != nil && sel.Has(len(d.encs)) {
		// The text's tokens: exact, from the counts.
		ext := len(d.fields[len(d.encs)].Ext)
		for i, k := range d.m.Tokens.counts[c] {
			w := max(keyWidth, len(fmt.Sprint(i)))
			total += format.MemberLen(len(s.Stem)+1+w+1+ext, int64(npy.HeaderLen("<i4", []int64{int64(k)}))+4*int64(k))
		}
	}
	return total
}

func pad(n int64) int64 { return (n + format.Block - 1) / format.Block * format.Block }

func pow10(w int) int {
	p := 1
	for range w {
		p *= 10
	}
	return p
}

// Decode writes shard c's samples, with the fields sel, from src: the
// shard's object, decompressed here when it is compressed.
func (d *Decoder) Decode(c int, sel format.Selection, src, dst []byte, wo format.WriterOptions) error {
	s := d.m.Shards[c]
	w, err := format.NewWriter(dst, s.Samples, wo)
	if err != nil {
		return err
	}
	var scratch []byte
	var counts []uint32
	if t := d.m.Tokens; t != nil {
		counts = t.counts[c]
	}
	names := keys.Append(nil, s.Stem, 0, s.Samples, keyWidth)
	err = d.samples(s, src, wo.Buffers, func(i int, vals [][]byte) error {
		if err := w.Begin(names[i]); err != nil {
			return err
		}
		for c, e := range d.encs {
			if !sel.Has(c) {
				continue
			}
			if counts != nil && c == d.m.Tokens.Column && !d.m.Tokens.Text {
				if n, err := d.listLen(e, vals[c]); err != nil || n != int64(counts[i]) {
					return fmt.Errorf("%w: column %q: a list of other than the %d tokens the index counted", format.ErrDamaged, d.m.Columns[c].Name, counts[i])
				}
			}
			if scratch, err = e.member(w, d.m.Columns[c].Ext, vals[c], scratch); err != nil {
				return fmt.Errorf("column %q: %w", d.m.Columns[c].Name, err)
			}
		}
		if d.model != nil && sel.Has(len(d.encs)) {
			return d.writeTokens(w, vals[d.m.Tokens.Column], counts[i])
		}
		return nil
	})
	if err != nil {
		return err
	}
	return w.Finish()
}

// samples decompresses shard s's object src, checks its header and calls
// fn with each sample's stored values, column by column.
func (d *Decoder) samples(s shardMeta, src []byte, bufs format.Buffers, fn func(i int, vals [][]byte) error) error {
	data, give, err := d.decompress(s, src, bufs)
	if err != nil {
		return err
	}
	defer give()
	if int64(len(data)) != s.Raw {
		return damaged(s, "%d bytes; index.json says %d", len(data), s.Raw)
	}
	offsets, err := d.header(s, data)
	if err != nil {
		return err
	}
	vals := make([][]byte, len(d.encs))
	sizes := make([]int64, len(d.encs))
	for i := range s.Samples {
		lo, hi, err := sampleAt(s, offsets, i)
		if err != nil {
			return err
		}
		b := data[lo:hi]
		rest, err := d.columnSizes(s, i, b, sizes)
		if err != nil {
			return err
		}
		for c, size := range sizes {
			vals[c], rest = rest[:size], rest[size:]
		}
		if err := fn(i, vals); err != nil {
			return fmt.Errorf("shard %s: sample %d: %w", s.Object, i, err)
		}
	}
	return nil
}

// damaged is an error in shard s's bytes.
func damaged(s shardMeta, f string, a ...any) error {
	return fmt.Errorf("%w: shard %s: %s", format.ErrDamaged, s.Object, fmt.Sprintf(f, a...))
}

// headerLen is the bytes of shard s's header: its sample count and the
// offsets of its samples and of its end.
func headerLen(s shardMeta) int64 { return 4 + 4*(int64(s.Samples)+1) }

// header checks the header of shard s (of s.Raw bytes), b's first
// headerLen(s) bytes, and returns its offsets.
func (d *Decoder) header(s shardMeta, b []byte) ([]byte, error) {
	le := binary.LittleEndian
	n := s.Samples
	head := headerLen(s)
	if s.Raw < head || int64(len(b)) < head {
		return nil, damaged(s, "%d bytes cannot hold the header of %d samples", s.Raw, n)
	}
	if got := le.Uint32(b); int(got) != n {
		return nil, damaged(s, "its header counts %d samples; index.json says %d", got, n)
	}
	offsets := b[4:head]
	if first, last := int64(le.Uint32(offsets)), int64(le.Uint32(offsets[4*n:])); first < head || last != s.Raw {
		return nil, damaged(s, "its samples run from byte %d to %d, not from past its header (%d) to its end (%d)", first, last, head, s.Raw)
	}
	return offsets, nil
}

// sampleAt is where sample i of shard s starts and ends, by its offsets.
func sampleAt(s shardMeta, offsets []byte, i int) (lo, hi int64, err error) {
	le := binary.LittleEndian
	lo, hi = int64(le.Uint32(offsets[4*i:])), int64(le.Uint32(offsets[4*(i+1):]))
	if hi < lo || hi > s.Raw {
		return 0, 0, damaged(s, "sample %d ends at byte %d, before it starts (%d) or past the shard's end (%d)", i, hi, lo, s.Raw)
	}
	return lo, hi, nil
}

// vars is the number of variable-size columns: each stores a u32 size at
// the start of a sample.
func (d *Decoder) vars() int {
	n := 0
	for _, e := range d.encs {
		if e.size == 0 {
			n++
		}
	}
	return n
}

// columnSizes reads the sizes of sample i's values, column by column,
// into sizes, from b: the sample's stored bytes, of which only its first
// 4*vars() (the sizes of its variable-size values) need be there yet. It
// returns b after them, and checks that the values fill the sample.
func (d *Decoder) columnSizes(s shardMeta, i int, b []byte, sizes []int64) ([]byte, error) {
	le := binary.LittleEndian
	vars := d.vars()
	if len(b) < 4*vars {
		return nil, damaged(s, "sample %d of %d bytes cannot hold its %d sizes", i, len(b), vars)
	}
	prefix, rest := b[:4*vars], int64(len(b)-4*vars)
	for c, e := range d.encs {
		size := e.size
		if size == 0 {
			size, prefix = int64(le.Uint32(prefix)), prefix[4:]
		}
		if size > rest {
			return nil, damaged(s, "sample %d: column %q of %d bytes past the sample's end", i, d.m.Columns[c].Name, size)
		}
		sizes[c], rest = size, rest-size
	}
	if rest != 0 {
		return nil, damaged(s, "sample %d has %d bytes after its columns", i, rest)
	}
	return b[4*vars:], nil
}

// Working implements format.Working: a compressed shard decompressed
// whole (into a buffer of format.WriterOptions.Buffers) and what its
// codec takes beside (inflate.Working), its samples' keys, and each
// member's header writer; measured in TestWorking.
func (d *Decoder) Working(c int, _ format.Selection) int64 {
	s := d.m.Shards[c]
	n := keys.Working(s.Stem, 0, s.Samples, keyWidth) + int64(s.Samples)*int64(len(d.encs))*format.MemberWorking + workingSlack
	if s.Compression != "" {
		n += s.Raw + inflate.Working(codecs[s.Compression], s.Raw)
	}
	return n
}

// workingSlack is what a decode allocates besides (a value's text, an
// ndarray's header).
const workingSlack = 64 << 10

// codecs are the compressions a shard may have, by index.json's names.
var codecs = map[string]inflate.Codec{"zstd": inflate.ZSTD, "gz": inflate.Gzip, "bz2": inflate.BZ2}

// decompress returns shard s's raw bytes from its object's src, never
// more than s.Raw of them, in a buffer of bufs when it has to make one
// (given back with give): a shard that decompresses past its stated
// size, or does not decompress, is damaged; its codec allocates what
// inflate.Working says beside, whatever its bytes claim.
func (d *Decoder) decompress(s shardMeta, src []byte, bufs format.Buffers) (out []byte, give func(), err error) {
	give = func() {}
	if s.Compression == "" {
		return src, give, nil
	}
	c, ok := codecs[s.Compression]
	if !ok {
		return nil, give, fmt.Errorf("%w: shard %s: compression %q", format.ErrUnsupported, s.Object, s.Compression)
	}
	if bufs == nil {
		bufs = unpooled{}
	}
	buf := bufs.Get(s.Raw)
	give = func() { bufs.Put(buf) }
	out, err = inflate.Into(c, buf[:s.Raw], src)
	switch {
	case errors.Is(err, inflate.ErrOver):
		err = fmt.Errorf("%w: shard %s decompresses past the %d bytes index.json says (%v)", format.ErrDamaged, s.Object, s.Raw, err)
	case err != nil:
		err = fmt.Errorf("%w: shard %s does not decompress to the %d bytes index.json says: %v", format.ErrDamaged, s.Object, s.Raw, err)
	}
	if err != nil {
		give()
		return nil, func() {}, err
	}
	return out, give, nil
}

// unpooled allocates every buffer.
type unpooled struct{}

func (unpooled) Get(n int64) []byte { return make([]byte, 0, n) }
func (unpooled) Put([]byte)         {}
