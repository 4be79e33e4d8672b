package mds

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/tokenize"
)

// A token dataset (format.Options.Tokens or Text) is the one case where
// indexing reads shards: each shard once, whole (MDS stores a sample's
// columns together, so there is no less to read), to count each sample's
// tokens, which the description then holds and the decoder answers from
// (format.Tokens).

// tokensMeta is a token dataset's part of the description.
type tokensMeta struct {
	Column     int    `json:"column"`         // the ndarray column (Tokens) or the str column (Text)
	Text       bool   `json:"text,omitempty"` // Column is text tokenized with Model
	Model      []byte `json:"model,omitempty"`
	Vocabulary string `json:"vocabulary,omitempty"`
	DType      string `json:"dtype"` // the tokens' NumPy type
	// Counts holds each shard's samples' counts as uvarints.
	Counts [][]byte   `json:"counts"`
	counts [][]uint32 // Counts, read by Open
}

// countBudget bounds the shards held at once while counting: a shard
// larger than it is read alone.
const countBudget = 256 << 20

// indexTokens counts every sample's tokens of the column opt names, and
// returns the description's token part.
func (d *Decoder) indexTokens(ctx context.Context, st format.Store, chunks []format.Chunk, opt format.Options, lim format.Limits, par int) (*tokensMeta, error) {
	if opt.Tokens != "" && opt.Text != "" {
		return nil, fmt.Errorf("%w: --tokens and --text: a dataset's tokens are a list column or a text, not both", format.ErrInvalid)
	}
	if (opt.Text != "") != (opt.Tokenizer != nil) {
		return nil, fmt.Errorf("%w: --text and --tokenizer go together", format.ErrInvalid)
	}
	name := opt.Tokens + opt.Text
	col := -1
	have := make([]string, len(d.m.Columns))
	for i, c := range d.m.Columns {
		have[i] = c.Name
		if c.Name == name {
			col = i
		}
	}
	if col < 0 {
		return nil, fmt.Errorf("%w: no column %q; the dataset has %s", format.ErrInvalid, name, strings.Join(have, ", "))
	}
	e, enc := d.encs[col], d.m.Columns[col].Encoding
	t := &tokensMeta{Column: col, Vocabulary: opt.Vocabulary}
	var model *tokenize.Model
	if opt.Text != "" {
		if enc != "str" {
			return nil, fmt.Errorf("%w: --text: column %q is %s, not a string (str)", format.ErrInvalid, name, enc)
		}
		for _, c := range d.m.Columns {
			if c.Name == format.TextTokensField {
				return nil, fmt.Errorf("%w: --text: the dataset has a column %q, the name its text's tokens would have; index that column with --tokens", format.ErrInvalid, c.Name)
			}
		}
		var err error
		if model, err = tokenize.Load(opt.Tokenizer); err != nil {
			return nil, fmt.Errorf("%w: --tokenizer: %w", format.ErrInvalid, err)
		}
		if opt.Vocabulary != "" && opt.Vocabulary != model.Fingerprint() {
			return nil, fmt.Errorf("%w: --vocabulary %q: a text dataset's vocabulary is its model's fingerprint, %s", format.ErrInvalid, opt.Vocabulary, model.Fingerprint())
		}
		t.Text, t.Model, t.Vocabulary, t.DType = true, opt.Tokenizer, "", "int32"
	} else {
		notList := fmt.Errorf("%w: --tokens: column %q is %s, not a list of integers (a 1-D integer ndarray)", format.ErrInvalid, name, enc)
		if e.kind != ndarray || (e.shape != nil && len(e.shape) != 1) {
			return nil, notList
		}
		if e.dtype != nil {
			if !isIntType(*e.dtype) {
				return nil, notList
			}
			t.DType = e.dtype.name
		}
	}
	counts := make([][]uint32, len(d.m.Shards))
	dtypes := make([]string, len(d.m.Shards))
	sem := semaphore.NewWeighted(countBudget)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(par)
	for c, s := range d.m.Shards {
		rs, _ := d.Extent(c, nil)
		size := rs[0].Len
		w := min(size, countBudget)
		if err := sem.Acquire(gctx, w); err != nil {
			break
		}
		g.Go(func() error {
			defer sem.Release(w)
			src := make([]byte, size)
			if err := st.ReadRange(gctx, s.Object, chunks[c].ETag, 0, src); err != nil {
				return fmt.Errorf("mds: reading %s: %w", s.Object, err)
			}
			n := make([]uint32, s.Samples)
			var ids []int32
			err := d.samples(s, src, nil, func(i int, vals [][]byte) error {
				var k int64
				if model != nil {
					var err error
					if ids, err = model.Append(ids[:0], vals[col]); err != nil {
						return err
					}
					k = int64(len(ids))
				} else {
					dt, err := valueType(e, vals[col])
					if err != nil {
						return err
					}
					if dtypes[c] == "" {
						dtypes[c] = dt
					} else if dt != dtypes[c] {
						return fmt.Errorf("column %q holds %s and %s lists: a dataset's tokens have one type", name, dtypes[c], dt)
					}
					if k, err = d.listLen(e, vals[col]); err != nil {
						return err
					}
				}
				if k > lim.DocTokens {
					return fmt.Errorf("%d tokens, more than %d (Limits.DocTokens)", k, lim.DocTokens)
				}
				n[i] = uint32(k)
				return nil
			})
			if err != nil {
				return fmt.Errorf("%w: --%s %s: %v", format.ErrInvalid, map[bool]string{false: "tokens", true: "text"}[model != nil], name, err)
			}
			counts[c] = n
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if t.DType == "" { // "ndarray": each value says its type; they agree
		for c, dt := range dtypes {
			if t.DType != "" && dt != "" && dt != t.DType {
				return nil, fmt.Errorf("%w: --tokens %s: shard %s holds %s lists, another %s: a dataset's tokens have one type", format.ErrInvalid, name, d.m.Shards[c].Object, dt, t.DType)
			}
			if dt != "" {
				t.DType = dt
			}
		}
		if t.DType == "" {
			return nil, fmt.Errorf("%w: --tokens %s: no list to tell the tokens' type", format.ErrInvalid, name)
		}
	}
	t.counts = counts
	for _, n := range counts {
		var b []byte
		for _, v := range n {
			b = binary.AppendUvarint(b, uint64(v))
		}
		t.Counts = append(t.Counts, b)
	}
	return t, nil
}

func isIntType(t arrayType) bool { return t.descr[1] == 'i' || t.descr[1] == 'u' }

// valueType is an ndarray value's NumPy type, refusing one that is not a
// 1-D integer array.
func valueType(e encoding, v []byte) (string, error) {
	dt := e.dtype
	if dt == nil {
		if len(v) < 1 {
			return "", fmt.Errorf("an ndarray value without its dtype")
		}
		t, ok := arrayTypes[v[0]]
		if !ok {
			return "", fmt.Errorf("ndarray dtype code %d", v[0])
		}
		dt = &t
	}
	if !isIntType(*dt) {
		return "", fmt.Errorf("a %s array, not a list of integers", dt.name)
	}
	return dt.name, nil
}

// listLen is the elements of a 1-D ndarray value, from its header; a
// value of another rank is not a list.
func (d *Decoder) listLen(e encoding, v []byte) (int64, error) {
	dt := e.dtype
	if dt == nil {
		if len(v) < 1 {
			return 0, fmt.Errorf("an ndarray value without its dtype")
		}
		t, ok := arrayTypes[v[0]]
		if !ok {
			return 0, fmt.Errorf("ndarray dtype code %d", v[0])
		}
		dt, v = &t, v[1:]
	}
	if e.shape != nil {
		if len(e.shape) != 1 {
			return 0, fmt.Errorf("a %d-D array, not a list", len(e.shape))
		}
		return e.shape[0], nil
	}
	if len(v) < 1 {
		return 0, fmt.Errorf("an ndarray value without its shape")
	}
	ndim, width := int(v[0]>>2), 1<<(v[0]&3)
	if ndim != 1 {
		return 0, fmt.Errorf("a %d-D array, not a list", ndim)
	}
	v = v[1:]
	if len(v) < width {
		return 0, fmt.Errorf("an ndarray shape in %d bytes", len(v))
	}
	var n uint64
	switch width {
	case 1:
		n = uint64(v[0])
	case 2:
		n = uint64(binary.LittleEndian.Uint16(v))
	case 4:
		n = uint64(binary.LittleEndian.Uint32(v))
	default:
		n = binary.LittleEndian.Uint64(v)
	}
	if n > math.MaxUint32 || int64(n)*dt.size != int64(len(v)-width) {
		return 0, fmt.Errorf("an ndarray of %d %s in %d bytes", n, dt.name, len(v)-width)
	}
	return int64(n), nil
}

// writeTokens writes a text's tokens as an int32 .npy, which must be as
// many as the index counted.
func (d *Decoder) writeTokens(w *format.Writer, text []byte, count uint32) error {
	ids, err := d.model.Encode(text)
	if err != nil {
		return fmt.Errorf("%w: %v", format.ErrDamaged, err)
	}
	if len(ids) != int(count) {
		return fmt.Errorf("%w: a text of %d tokens, indexed as %d", format.ErrDamaged, len(ids), count)
	}
	shape := []int64{int64(len(ids))}
	h, err := npy.AppendHeader(nil, "<i4", shape)
	if err != nil {
		return err
	}
	out, err := w.Member(d.fields[len(d.encs)].Ext, int64(len(h)+4*len(ids)))
	if err != nil {
		return err
	}
	n := copy(out, h)
	for _, id := range ids {
		binary.LittleEndian.PutUint32(out[n:], uint32(id))
		n += 4
	}
	return nil
}

// openTokens reads a token dataset's counts and, for text, loads its
// model and adds the tokens field.
func (d *Decoder) openTokens() error {
	t := d.m.Tokens
	if t == nil {
		return nil
	}
	bad := func(what string) error { return fmt.Errorf("%w: mds meta: tokens: %s", format.ErrInvalid, what) }
	if t.Column < 0 || t.Column >= len(d.encs) || len(t.Counts) != len(d.m.Shards) {
		return bad("column or shards")
	}
	t.counts = make([][]uint32, len(t.Counts))
	for c, b := range t.Counts {
		if d.m.Shards[c].Samples > len(b) { // a count is a byte at least
			return bad("counts")
		}
		n := make([]uint32, d.m.Shards[c].Samples)
		for i := range n {
			v, k := binary.Uvarint(b)
			if k <= 0 || v > math.MaxUint32 {
				return bad("counts")
			}
			n[i], b = uint32(v), b[k:]
		}
		if len(b) != 0 {
			return bad("counts")
		}
		t.counts[c] = n
	}
	if !t.Text {
		return nil
	}
	m, err := tokenize.Load(t.Model)
	if err != nil {
		return fmt.Errorf("mds: the dataset's tokenizer: %w", err)
	}
	d.model = m
	ext := "npy"
	for _, f := range d.fields {
		if f.Ext == "npy" {
			ext = format.TextTokensField + ".npy"
		}
	}
	d.fields = append(d.fields, format.Field{Name: format.TextTokensField, Ext: ext,
		Type: "ndarray:int32 (" + d.m.Columns[t.Column].Name + " tokenized, " + m.File() + " " + m.Fingerprint() + ")"})
	return nil
}

// tokenDecoder is the decoder of a token dataset: Open returns one only
// for a token dataset, so a type assertion on format.Tokens tells which
// datasets are.
type tokenDecoder struct{ *Decoder }

var _ format.Tokens = tokenDecoder{}

// DocTokens is shard c's samples' token counts, as indexing counted them.
func (d tokenDecoder) DocTokens(c int) []uint32 { return d.m.Tokens.counts[c] }

// TokenType is the ndarray column's dtype, or "int32" for text.
func (d tokenDecoder) TokenType() string { return d.m.Tokens.DType }

// TokenField is the ndarray column, or format.TextTokensField for text.
func (d tokenDecoder) TokenField() string {
	if d.m.Tokens.Text {
		return format.TextTokensField
	}
	return d.m.Columns[d.m.Tokens.Column].Name
}

// Vocabulary is the model's fingerprint for text; what indexing was told
// for a list column ("" when nothing).
func (d tokenDecoder) Vocabulary() string {
	if d.m.Tokens.Text {
		return d.model.Fingerprint()
	}
	return d.m.Tokens.Vocabulary
}

var _ format.TokenSpecials = tokenDecoder{}

// EOS is a text dataset's model's end-of-sequence ID; a list column's
// dataset does not know one.
func (d tokenDecoder) EOS() (int32, bool) {
	if d.model == nil || d.model.Special().EOS < 0 {
		return 0, false
	}
	return d.model.Special().EOS, true
}
