package megatron

import (
	"fmt"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/keys"
	"github.com/brandgw/brand/internal/codec/npy"
)

// Decoder decodes the chunks of one Megatron dataset. Beyond
// format.Decoder it answers what packing token sequences needs before
// reading: each document's token count and the dtype.
type Decoder struct {
	m  *meta
	dt dtype
}

func newDecoder(m *meta) *Decoder { return &Decoder{m: m, dt: dtypes[m.code]} }

// Fields is the one field, "tokens": each document's .npy.
func (d *Decoder) Fields() []format.Field {
	return []format.Field{{Name: "tokens", Ext: "npy", Type: d.dt.name}}
}

// Extent is chunk c's span of its .bin and its exact resident bound
// (there is one field, so every selection reads it).
func (d *Decoder) Extent(c int, _ format.Selection) ([]format.Range, int64) {
	ch := d.m.chunks[c]
	if ch.len == 0 {
		return nil, ch.resident
	}
	return []format.Range{{Off: ch.off, Len: ch.len}}, ch.resident
}

// Chunks is the number of chunks.
func (d *Decoder) Chunks() int { return len(d.m.chunks) }

// DocTokens returns the token count of each of chunk c's documents, in
// the order of its samples, from the index alone. The slice is shared:
// read it, never write it.
func (d *Decoder) DocTokens(c int) []uint32 {
	ch := d.m.chunks[c]
	return d.m.tokens[ch.at : ch.at+ch.docs : ch.at+ch.docs]
}

// DType is the tokens' NumPy dtype name ("uint16", "int32", ...); every
// document of the dataset has it.
func (d *Decoder) DType() string { return d.dt.name }

// TokenType implements format.Tokens: the tokens' dtype (DType).
func (d *Decoder) TokenType() string { return d.dt.name }

// TokenField implements format.Tokens: a document's one field.
func (d *Decoder) TokenField() string { return "tokens" }

// Vocabulary implements format.Tokens: an .idx does not name its
// tokenizer.
func (d *Decoder) Vocabulary() string { return "" }

// TokenSize is the bytes a token takes.
func (d *Decoder) TokenSize() int { return int(d.dt.size) }

// Working implements format.Working: the documents' keys and each
// member's header, which allocates only for a name over ustar's 100 bytes
// (format.HeaderWorking; the last document's key is the longest), plus
// one for a name refused, and 16 bytes a document for the keys' slice
// growing past its length (measured under the race detector: 12 a
// document more than keys.Working; TestWorking).
func (d *Decoder) Working(c int, _ format.Selection) int64 {
	ch := d.m.chunks[c]
	stem := d.m.prefixes[ch.prefix].name
	longest := keys.Len(stem, ch.first+max(ch.docs-1, 0), keyWidth) + len(".npy")
	return keys.Working(stem, ch.first, ch.docs, keyWidth) + int64(ch.docs)*(16+format.HeaderWorking(longest)) + format.MemberWorking + 64<<10
}

// Decode writes chunk c's documents, each as key.npy, from src, the
// chunk's span of its .bin.
func (d *Decoder) Decode(c int, _ format.Selection, src, dst []byte, wo format.WriterOptions) error {
	ch := d.m.chunks[c]
	if int64(len(src)) != ch.len {
		return fmt.Errorf("%w: read %d bytes of a span of %d", format.ErrDamaged, len(src), ch.len)
	}
	w, err := format.NewWriter(dst, ch.docs, wo)
	if err != nil {
		return err
	}
	names := keys.Append(nil, d.m.prefixes[ch.prefix].name, ch.first, ch.docs, keyWidth)
	var hdr []byte
	for i, n := range d.DocTokens(c) {
		if err := w.Begin(names[i]); err != nil {
			return err
		}
		shape := []int64{int64(n)}
		data := int64(n) * d.dt.size
		out, err := w.Member("npy", int64(npy.HeaderLen(d.dt.descr, shape))+data)
		if err != nil {
			return err
		}
		if hdr, err = npy.AppendHeader(hdr[:0], d.dt.descr, shape); err != nil {
			return fmt.Errorf("%w: %v", format.ErrDamaged, err)
		}
		copy(out[copy(out, hdr):], src[:data])
		src = src[data:]
	}
	return w.Finish()
}

var _ format.Tokens = (*Decoder)(nil)
