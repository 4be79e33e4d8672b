// Package formattest is test support for package format's seam: Lines,
// a format of text files whose lines are samples, small enough to read in
// a sitting, so that the rest of Brand's handling of datasets served in
// place (indexing, the catalog, the cache, the reader, a cluster) is
// tested without any real format's library. It is linked only into tests.
package formattest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/brandgw/brand/format"
)

// Lines is a format of objects named *.lines: each line (ending in "\n")
// is a sample with two fields, "txt" (the line, without its newline) and
// "len" (its length in decimal, member extension "cls"). A chunk is a run
// of whole lines of one object of about Options.ChunkBytes bytes; keys
// are the object's key without ".lines", "/", and the line's number. Its
// index reads every object whole: for lines the data is the metadata.
type Lines struct {
	// Short makes every chunk's bound a quarter of what it needs, as a
	// format whose metadata cannot bound its values gives: decoding it
	// tells the size it needs (format.GrowError).
	Short bool
}

// Name implements format.Format.
func (Lines) Name() string { return "lines" }

// Detect implements format.Format.
func (Lines) Detect(objs []format.Object) bool {
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".lines") {
			return true
		}
	}
	return false
}

type chunk struct {
	Object string  `json:"object"`
	Off    int64   `json:"off"`
	Lens   []int64 `json:"lens"`  // each line's length, newline excluded
	First  int     `json:"first"` // the first line's number in the object
}

func (c chunk) len() int64 {
	n := int64(len(c.Lens))
	for _, l := range c.Lens {
		n += l
	}
	return n
}

// Index implements format.Format.
func (Lines) Index(ctx context.Context, st format.Store, objs []format.Object, opt format.Options) (*format.Layout, error) {
	target := opt.ChunkBytes
	if target <= 0 {
		target = format.DefaultChunkBytes
	}
	lay := &format.Layout{}
	var chunks []chunk
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, ".lines") {
			continue
		}
		b := make([]byte, o.Size)
		if err := st.ReadRange(ctx, o.Key, o.ETag, 0, b); err != nil {
			return nil, fmt.Errorf("reading %s: %w", o.Key, err)
		}
		if len(b) > 0 && b[len(b)-1] != '\n' {
			return nil, fmt.Errorf("%w: %s does not end in a newline", format.ErrInvalid, o.Key)
		}
		stem := strings.TrimSuffix(o.Key, ".lines")
		cur := chunk{Object: o.Key}
		off, line := int64(0), 0
		for len(b) > 0 {
			i := bytes.IndexByte(b, '\n')
			if cur.len() > 0 && cur.len()+int64(i)+1 > target {
				lay.Chunks = append(lay.Chunks, format.Chunk{Object: o.Key, ETag: o.ETag, Size: o.Size, Samples: len(cur.Lens)})
				chunks = append(chunks, cur)
				cur = chunk{Object: o.Key, Off: off, First: line}
			}
			cur.Lens = append(cur.Lens, int64(i))
			lay.Keys = append(lay.Keys, stem+"/"+strconv.Itoa(line))
			off, line, b = off+int64(i)+1, line+1, b[i+1:]
		}
		if len(cur.Lens) > 0 {
			lay.Chunks = append(lay.Chunks, format.Chunk{Object: o.Key, ETag: o.ETag, Size: o.Size, Samples: len(cur.Lens)})
			chunks = append(chunks, cur)
		}
	}
	if len(chunks) == 0 {
		return nil, fmt.Errorf("%w: no .lines objects", format.ErrInvalid)
	}
	meta, err := json.Marshal(chunks)
	if err != nil {
		return nil, err
	}
	lay.Meta = meta
	return lay, nil
}

// Open implements format.Format.
func (l Lines) Open(meta []byte) (format.Decoder, error) {
	d := decoder{short: l.Short}
	if err := json.Unmarshal(meta, &d.chunks); err != nil {
		return nil, fmt.Errorf("%w: lines meta: %v", format.ErrInvalid, err)
	}
	return &d, nil
}

type decoder struct {
	chunks []chunk
	short  bool
}

var fields = []format.Field{{Name: "txt", Ext: "txt", Type: "string"}, {Name: "len", Ext: "cls", Type: "int"}}

func (d *decoder) Fields() []format.Field { return fields }

func (d *decoder) key(c chunk, i int) string {
	return strings.TrimSuffix(c.Object, ".lines") + "/" + strconv.Itoa(c.First+i)
}

func (d *decoder) Extent(c int, sel format.Selection) ([]format.Range, int64) {
	ch := d.chunks[c]
	n := format.Overhead(len(ch.Lens))
	for i, l := range ch.Lens {
		k := len(d.key(ch, i))
		if sel.Has(0) {
			n += format.MemberLen(k+4, l)
		}
		if sel.Has(1) {
			n += format.MemberLen(k+4, int64(len(strconv.FormatInt(l, 10))))
		}
	}
	if d.short {
		n = max(n/4, format.Overhead(len(ch.Lens)))
	}
	return []format.Range{{Off: ch.Off, Len: ch.len()}}, n
}

func (d *decoder) Decode(c int, sel format.Selection, src, dst []byte, opt format.WriterOptions) error {
	ch := d.chunks[c]
	if int64(len(src)) != ch.len() {
		return fmt.Errorf("%w: %d bytes read of %d", format.ErrDamaged, len(src), ch.len())
	}
	opt.MayGrow = d.short
	w, err := format.NewWriter(dst, len(ch.Lens), opt)
	if err != nil {
		return err
	}
	for i, l := range ch.Lens {
		line := src[:l]
		if int64(len(src)) <= l || src[l] != '\n' {
			return fmt.Errorf("%w: line %d of %s is not where the index put it", format.ErrDamaged, ch.First+i, ch.Object)
		}
		src = src[l+1:]
		if err := w.Begin(d.key(ch, i)); err != nil {
			return err
		}
		if sel.Has(0) {
			if err := w.Add("txt", line); err != nil {
				return err
			}
		}
		if sel.Has(1) {
			if err := w.Add("cls", strconv.AppendInt(nil, l, 10)); err != nil {
				return err
			}
		}
	}
	return w.Finish()
}

// Write is what a test's source holds: each object's lines.
func Write(objects map[string][]string) map[string][]byte {
	out := make(map[string][]byte, len(objects))
	for k, lines := range objects {
		var b bytes.Buffer
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
		out[path.Clean(k)] = b.Bytes()
	}
	return out
}

// Append implements format.Appender: the new objects indexed as Index
// would, their chunks after the dataset's in the description.
func (l Lines) Append(ctx context.Context, st format.Store, meta []byte, objs []format.Object, opt format.Options) (*format.Layout, error) {
	var old []chunk
	if err := json.Unmarshal(meta, &old); err != nil {
		return nil, fmt.Errorf("%w: lines meta: %v", format.ErrInvalid, err)
	}
	if !l.Detect(objs) {
		return &format.Layout{Meta: meta}, nil
	}
	lay, err := l.Index(ctx, st, objs, opt)
	if err != nil {
		return nil, err
	}
	var added []chunk
	if err := json.Unmarshal(lay.Meta, &added); err != nil {
		return nil, err
	}
	if lay.Meta, err = json.Marshal(append(old, added...)); err != nil {
		return nil, err
	}
	return lay, nil
}
