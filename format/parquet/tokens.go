package parquet

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"strings"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"golang.org/x/sync/errgroup"
	"golang.org/x/sync/semaphore"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/inflate"
	"github.com/brandgw/brand/internal/codec/npy"
	"github.com/brandgw/brand/tokenize"
)

// A token dataset (format.Options.Tokens or Text; package doc, "Token
// datasets") is the one case where indexing reads data: the token
// column's column chunks, once, to count each row's tokens, which the
// description then holds (tokenSpec) and the decoder answers from
// (format.Tokens).

// tokenSpec is a token dataset's part of the description.
type tokenSpec struct {
	field  int    // the list column's field (Tokens) or the text column's (Text)
	text   bool   // field is text tokenized with model
	model  []byte // Text: the SentencePiece model's bytes
	vocab  string // Tokens: the vocabulary the user named, if any
	counts [][]uint32
}

// countBudget bounds the column chunks held at once while counting: a
// column chunk larger than it is read alone.
const countBudget = 256 << 20

// counter counts the tokens of each row of a token field when a dataset
// is indexed (indexTokens): the index's half of a token dataset, apart
// from the decoder's serving.
type counter struct {
	d     *decoder
	model *tokenize.Model // a text's; nil for a list column
	lim   format.Limits
}

// count reads field fi's column chunk of every row group once and counts
// each row's tokens: a list's elements from its levels (the values are
// not decoded; a data page v2's levels are not even decompressed), or a
// text's tokens by the model. objs are the files, by ds.files' order.
func (k counter) count(ctx context.Context, st format.Store, objs []format.Object, fi, par int) ([][]uint32, error) {
	d, model, lim := k.d, k.model, k.lim
	f := d.fields[fi]
	leaf := f.leaves[0]
	if model != nil {
		leaf = f.bytesLeaf
	}
	counts := make([][]uint32, len(d.ds.chunks))
	sem := semaphore.NewWeighted(countBudget)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(par)
	for c := range d.ds.chunks {
		ch := &d.ds.chunks[c]
		m := &ch.cols[leaf]
		o := objs[ch.file]
		where := func() string {
			return fmt.Sprintf("%s, row group of rows %d–%d, column %q", o.Key, ch.first, ch.first+ch.rows-1, f.name)
		}
		if m.length > lim.ChunkBytes {
			return nil, fmt.Errorf("%w: %s: a column chunk of %d bytes, more than a chunk may be (Limits.ChunkBytes)", format.ErrInvalid, where(), m.length)
		}
		w := min(m.length, countBudget)
		if err := sem.Acquire(gctx, w); err != nil {
			break // the group's error, or ctx's, below
		}
		g.Go(func() error {
			defer sem.Release(w)
			b := make([]byte, m.length)
			if err := st.ReadRange(gctx, o.Key, o.ETag, m.start, b); err != nil {
				return fmt.Errorf("parquet: reading %s: %w", where(), err)
			}
			var n []uint32
			var err error
			if model != nil {
				n, err = k.text(ch, f, leaf, b)
			} else {
				n, err = countList(ch, f, d.schema.leaves[leaf], m, b, lim)
			}
			if err != nil {
				return fmt.Errorf("%w: %s: %v", format.ErrInvalid, where(), err)
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
	return counts, nil
}

// listLevels are the definition levels that tell a row's list: below
// listDef it is null, below nonEmpty empty, else every level of the row
// is one element (a null element included: it is 0, as npyWriter writes
// it).
func listLevels(f *field) (listDef, nonEmpty int16) {
	listDef = int16(f.node.def)
	if f.node == f.element { // a bare repeated column: never null
		listDef = int16(f.node.def - 1)
	}
	_, rep, _ := listElement(f.node)
	if rep == nil {
		rep = f.node
	}
	return listDef, int16(rep.def)
}

// countList counts the elements of each row's list in a column chunk b
// from its repetition and definition levels alone.
func countList(ch *chunk, f *field, leaf *node, m *colMeta, b []byte, lim format.Limits) ([]uint32, error) {
	if err := checkPages(m, leaf, b); err != nil {
		return nil, err
	}
	_, nonEmpty := listLevels(f)
	counts := make([]uint32, ch.rows)
	row := int64(-1)
	var buf []byte
	for pos, i := 0, 0; pos < len(b); i++ {
		h, err := parsePageHeader(b[pos:])
		if err != nil {
			return nil, fmt.Errorf("page %d: %v", i, err)
		}
		body := b[pos+h.len : pos+h.len+int(h.comp)]
		pos += h.len + int(h.comp)
		var reps, defs []byte
		switch h.typ {
		case pageData:
			if h.repEnc != encRLE || h.defEnc != encRLE {
				return nil, fmt.Errorf("%w: page %d's levels are not RLE-encoded (the deprecated BIT_PACKED levels are not read)", errUnsupported, i)
			}
			data := body
			if m.codec != 0 {
				if cap(buf) < int(h.unc) {
					buf = make([]byte, h.unc)
				}
				codec, err := compress.GetCodec(compress.Compression(m.codec))
				if err != nil {
					return nil, fmt.Errorf("%w: %v", errUnsupported, err)
				}
				if data, err = compress.Decode(codec, buf[:h.unc], body); err != nil || len(data) != int(h.unc) {
					return nil, fmt.Errorf("page %d does not decompress to its %d bytes", i, h.unc)
				}
			}
			if reps, data, err = lengthPrefixed(data); err != nil {
				return nil, fmt.Errorf("page %d's repetition levels: %v", i, err)
			}
			if leaf.def > 0 {
				if defs, _, err = lengthPrefixed(data); err != nil {
					return nil, fmt.Errorf("page %d's definition levels: %v", i, err)
				}
			}
		case pageDataV2:
			if int(h.levelsLen) > len(body) || h.repLen > h.levelsLen {
				return nil, fmt.Errorf("page %d's levels (%d bytes) do not fit it", i, h.levelsLen)
			}
			reps, defs = body[:h.repLen], body[h.repLen:h.levelsLen]
		default:
			continue // a dictionary: values only
		}
		// Run by run: a run of repetition level 0 starts as many rows, a
		// run of 1 adds to the row's count, so a list of 10^9 elements
		// in two runs costs two steps (and is refused past DocTokens).
		rl, dl := newLevelReader(reps, leaf.rep), newLevelReader(defs, leaf.def)
		var repV, defV int16
		var repN, defN int64
		for left := int64(h.numValues); left > 0; {
			if repN == 0 {
				if repV, repN, err = rl.take(left); err != nil {
					return nil, fmt.Errorf("page %d: %v", i, err)
				}
			}
			if defN == 0 {
				if leaf.def == 0 {
					defV, defN = 0, left
				} else if defV, defN, err = dl.take(left); err != nil {
					return nil, fmt.Errorf("page %d: %v", i, err)
				}
			}
			k := min(repN, defN)
			repN, defN, left = repN-k, defN-k, left-k
			switch {
			case repV == 0:
				if row+k >= ch.rows {
					return nil, fmt.Errorf("more lists than the row group's %d rows", ch.rows)
				}
				if defV >= nonEmpty {
					for r := row + 1; r <= row+k; r++ {
						counts[r] = 1
					}
				}
				row += k
			case row < 0:
				return nil, fmt.Errorf("the column starts inside a list (repetition level %d)", repV)
			case defV >= nonEmpty:
				if n := int64(counts[row]) + k; n > lim.DocTokens {
					return nil, fmt.Errorf("row %d has more than %d tokens (Limits.DocTokens)", ch.first+row, lim.DocTokens)
				} else {
					counts[row] = uint32(n)
				}
			}
		}
	}
	if row+1 != ch.rows {
		return nil, fmt.Errorf("%d lists in a row group of %d rows", row+1, ch.rows)
	}
	return counts, nil
}

// lengthPrefixed splits a data page v1's RLE levels (a u32 length, then
// the runs) from what follows.
func lengthPrefixed(b []byte) (levels, rest []byte, err error) {
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("no length")
	}
	n := binary.LittleEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, nil, fmt.Errorf("%d bytes in a page of %d", n, len(b)-4)
	}
	return b[4 : 4+n], b[4+n:], nil
}

// text tokenizes each row's text of a column chunk b with the model and
// counts the tokens; a null text is a document of none. A text longer
// than the model reads (tokenize.MaxTextBytes) is refused naming its
// row from its length, found before any value is read where the pages
// state it (scanLong), never read to be refused.
func (k counter) text(ch *chunk, f *field, leaf int, b []byte) ([]uint32, error) {
	if m := &ch.cols[leaf]; m.bytesMax > tokenize.MaxTextBytes {
		streams := inflate.Streams{Keep: true}
		lv, _, err := scanLong(&streams, m, k.d.schema.leaves[leaf], b, tokenize.MaxTextBytes)
		streams.Close()
		if err == nil && len(lv) > 0 {
			return nil, fmt.Errorf("row %d holds a text of %d bytes, more than a document may be (%d: tokenize.MaxTextBytes)",
				ch.first+lv[0].row, lv[0].n, tokenize.MaxTextBytes)
		}
	}
	read, err := format.NewRead([]format.Range{{Off: ch.cols[leaf].start, Len: int64(len(b))}}, b)
	if err != nil {
		return nil, err
	}
	tw, err := k.d.textReader(ch, f, leaf, read, k.model)
	if err != nil {
		return nil, err
	}
	counts := make([]uint32, ch.rows)
	for r := range ch.rows {
		ids, _, err := tw.next()
		if err != nil {
			return nil, fmt.Errorf("row %d: %w", ch.first+r, err)
		}
		if int64(len(ids)) > k.lim.DocTokens {
			return nil, fmt.Errorf("row %d has %d tokens, more than %d (Limits.DocTokens)", ch.first+r, len(ids), k.lim.DocTokens)
		}
		counts[r] = uint32(len(ids))
	}
	return counts, nil
}

// textTokens reads a string column and tokenizes each row's text.
type textTokens struct {
	col   *bytesCol
	model *tokenize.Model
	ids   []int32
}

func (d *decoder) textReader(ch *chunk, f *field, leaf int, read *format.Read, model *tokenize.Model) (*textTokens, error) {
	r, err := d.reader(ch, leaf, read)
	if err != nil {
		return nil, err
	}
	bc, err := newBytesCol(r, ch.cols[leaf].numValues)
	if err != nil {
		return nil, err
	}
	return &textTokens{col: bc, model: model}, nil
}

// next returns the next row's tokens (valid until the next call), and
// whether it has a text.
func (t *textTokens) next() ([]int32, bool, error) {
	v, ok, err := t.col.next()
	if err != nil || !ok {
		return nil, false, err
	}
	t.ids, err = t.model.Append(t.ids[:0], v)
	if err != nil {
		return nil, false, err
	}
	return t.ids, true, nil
}

// tokensWriter writes each row's text tokenized as a 1-D int32 .npy: the
// Text dataset's tokens field. A count other than the index's is damage
// (the model or the bytes are not those indexed).
type tokensWriter struct {
	f      *field
	t      *textTokens
	counts []uint32
	rows   int
	data   []byte
}

func (tw *tokensWriter) name() string { return tw.f.name }

func (tw *tokensWriter) row(w *format.Writer) (bool, error) {
	r := tw.rows
	tw.rows++
	ids, ok, err := tw.t.next()
	if err != nil {
		return false, err
	}
	if r >= len(tw.counts) || len(ids) != int(tw.counts[r]) {
		return false, fmt.Errorf("%w: a text of %d tokens where the index counted another number", format.ErrDamaged, len(ids))
	}
	if !ok {
		return false, nil
	}
	data := tw.data[:0]
	for _, id := range ids {
		data = binary.LittleEndian.AppendUint32(data, uint32(id))
	}
	tw.data = data
	var hdr [npyHeaderMax]byte
	h, err := npy.AppendHeader(hdr[:0], "<i4", []int64{int64(len(ids))})
	if err != nil {
		return false, err
	}
	m, err := w.Member(tw.f.ext, int64(len(h)+len(data)))
	if err != nil {
		return false, err
	}
	copy(m[copy(m, h):], data)
	return true, nil
}

// tokenFieldName finds the field Options.Tokens or Options.Text names,
// and checks it is of the kind it must be.
func tokenFieldName(fields []*field, opt format.Options) (int, error) {
	name, want := opt.Tokens, kindNpy
	if opt.Text != "" {
		name, want = opt.Text, kindTxt
	}
	have := make([]string, len(fields))
	for i, f := range fields {
		have[i] = f.name
		if f.name != name {
			continue
		}
		if f.kind != want {
			if want == kindNpy {
				return 0, fmt.Errorf("%w: --tokens: column %q is %s, not a list of integers", format.ErrInvalid, name, typeName(f.node))
			}
			return 0, fmt.Errorf("%w: --text: column %q is %s, not a string", format.ErrInvalid, name, typeName(f.node))
		}
		if opt.Text != "" && f.name == format.TextTokensField {
			return 0, fmt.Errorf("%w: --text: column %q is named as its tokens' field would be", format.ErrInvalid, name)
		}
		return i, nil
	}
	return 0, fmt.Errorf("%w: no column %q; the dataset has %s", format.ErrInvalid, name, strings.Join(have, ", "))
}

// numpyName is a .npy descriptor's NumPy type name ("<i4": "int32").
func numpyName(descr string) string {
	size := descr[2] - '0'
	if descr[1] == 'u' {
		return fmt.Sprintf("uint%d", 8*size)
	}
	return fmt.Sprintf("int%d", 8*size)
}

// tokenDecoder is the decoder of a token dataset: it answers
// format.Tokens from the description. Open returns one only for a token
// dataset, so a type assertion on format.Tokens tells which datasets are.
type tokenDecoder struct{ *decoder }

var _ format.Tokens = tokenDecoder{}

// DocTokens is chunk c's rows' token counts, as indexing counted them.
func (d tokenDecoder) DocTokens(c int) []uint32 {
	if d.ds.docs != nil {
		return d.ds.docs[c]
	}
	return d.ds.tokens.counts[c]
}

// TokenType is the list column's integer type, or "int32" for text.
func (d tokenDecoder) TokenType() string {
	if d.ds.tokens.text {
		return "int32"
	}
	return numpyName(d.fields[d.ds.tokens.field].descr)
}

// TokenField is the list column, or format.TextTokensField for text.
func (d tokenDecoder) TokenField() string {
	if d.ds.tokens.text {
		return format.TextTokensField
	}
	return d.fields[d.ds.tokens.field].name
}

// Vocabulary is the model's fingerprint for text; what indexing was told
// for a list column ("" when nothing).
func (d tokenDecoder) Vocabulary() string {
	if d.ds.tokens.text {
		return d.model.Fingerprint()
	}
	return d.ds.tokens.vocab
}

// addTokens adds a text token dataset's tokens field (format.TextTokensField,
// reading the text column's leaf) and loads its model.
func (d *decoder) addTokens() error {
	t := d.ds.tokens
	if t == nil {
		return nil
	}
	if t.field >= len(d.fields) || len(t.counts) != len(d.ds.chunks) {
		return fmt.Errorf("%w: a token section of field %d, %d chunks", errMeta, t.field, len(t.counts))
	}
	for i, c := range d.ds.chunks {
		if int64(len(t.counts[i])) != c.rows {
			return fmt.Errorf("%w: %d token counts for %d rows", errMeta, len(t.counts[i]), c.rows)
		}
	}
	tf := d.fields[t.field]
	if !t.text {
		if tf.kind != kindNpy {
			return fmt.Errorf("%w: token column %q is not a list of integers", errMeta, tf.name)
		}
		return nil
	}
	if tf.kind != kindTxt {
		return fmt.Errorf("%w: text column %q is not a string", errMeta, tf.name)
	}
	m, err := tokenize.Load(t.model)
	if err != nil {
		return fmt.Errorf("parquet: the dataset's tokenizer: %w", err)
	}
	d.model = m
	ext := "npy"
	for _, f := range d.fields {
		if f.name == format.TextTokensField {
			return fmt.Errorf("%w: a column is named %q, as the text's tokens are", errMeta, f.name)
		}
		if f.ext == "npy" {
			ext = format.TextTokensField + ".npy"
		}
	}
	f := &field{name: format.TextTokensField, node: tf.node, kind: kindTokens, leaves: []int{tf.bytesLeaf},
		ext: ext, bytesLeaf: tf.bytesLeaf, pathLeaf: -1, descr: "<i4", size: 4}
	d.fields = append(d.fields, f)
	d.pub = append(d.pub, format.Field{Name: f.name, Ext: ext, Type: "list<int32> (" + tf.name + " tokenized, " + m.File() + " " + m.Fingerprint() + ")"})
	return nil
}

// valueRange is the values an npy field's integer type holds, where its
// physical type holds more; else every int64 (an unsigned 32- or 64-bit
// type stored in as many bits is its bits reinterpreted).
func valueRange(f *field) (lo, hi int64) {
	phys := 4
	if f.element.el.phys == tyInt64 {
		phys = 8
	}
	if f.size >= phys {
		return math.MinInt64, math.MaxInt64
	}
	bits := 8 * f.size
	if f.descr[1] == 'u' {
		return 0, 1<<bits - 1
	}
	return -1 << (bits - 1), 1<<(bits-1) - 1
}

// indexTokens makes ds a token dataset (Options.Tokens or Text): it
// checks the field, counts every row's tokens and returns the decoder of
// the dataset with its counts.
func indexTokens(ctx context.Context, st format.Store, ds *dataset, d *decoder, objs []format.Object, opt format.Options, lim format.Limits, par int) (*decoder, error) {
	if opt.Tokens != "" && opt.Text != "" {
		return nil, fmt.Errorf("%w: --tokens and --text: a dataset's tokens are a list column or a text, not both", format.ErrInvalid)
	}
	if (opt.Text != "") != (opt.Tokenizer != nil) {
		return nil, fmt.Errorf("%w: --text and --tokenizer go together", format.ErrInvalid)
	}
	fi, err := tokenFieldName(d.fields, opt)
	if err != nil {
		return nil, err
	}
	t := &tokenSpec{field: fi, vocab: opt.Vocabulary}
	var model *tokenize.Model
	if opt.Text != "" {
		if model, err = tokenize.Load(opt.Tokenizer); err != nil {
			return nil, fmt.Errorf("%w: --tokenizer: %w", format.ErrInvalid, err)
		}
		if opt.Vocabulary != "" && opt.Vocabulary != model.Fingerprint() {
			return nil, fmt.Errorf("%w: --vocabulary %q: a text dataset's vocabulary is its model's fingerprint, %s", format.ErrInvalid, opt.Vocabulary, model.Fingerprint())
		}
		for _, f := range d.fields {
			if f.name == format.TextTokensField {
				return nil, fmt.Errorf("%w: --text: the dataset has a column %q, the name its text's tokens would have; index that column with --tokens, or rename it", format.ErrInvalid, f.name)
			}
		}
		t.text, t.model, t.vocab = true, opt.Tokenizer, ""
	}
	if t.counts, err = (counter{d: d, model: model, lim: lim}).count(ctx, st, objs, fi, par); err != nil {
		return nil, err
	}
	ds.tokens = t
	nd, err := newDecoder(ds)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", format.ErrInvalid, err)
	}
	return nd, nil
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
