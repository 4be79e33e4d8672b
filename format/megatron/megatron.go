package megatron

import (
	"context"
	"fmt"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/internal/keys"
	"github.com/brandgw/brand/internal/codec/npy"
)

// Format is the Megatron indexed dataset format. Its zero value is ready.
type Format struct{}

// Name is "megatron".
func (Format) Name() string { return "megatron" }

// Detect reports whether objs hold at least one prefix with both a .bin
// and a .idx.
func (Format) Detect(objs []format.Object) bool {
	idx := make(map[string]bool)
	for _, o := range objs {
		if p, ok := strings.CutSuffix(o.Key, ".idx"); ok {
			idx[p] = true
		}
	}
	for _, o := range objs {
		if p, ok := strings.CutSuffix(o.Key, ".bin"); ok && idx[p] {
			return true
		}
	}
	return false
}

// prefix is one name.bin + name.idx pair.
type prefix struct {
	name     string
	bin, idx format.Object
}

// prefixes pairs objs' .bin and .idx files; any other object is not the
// dataset's and is left alone.
func prefixes(objs []format.Object) ([]prefix, error) {
	byName := make(map[string]*prefix)
	var ps []*prefix
	for _, o := range objs {
		name, ext := o.Key, ""
		if p, ok := strings.CutSuffix(o.Key, ".bin"); ok {
			name, ext = p, "bin"
		} else if p, ok := strings.CutSuffix(o.Key, ".idx"); ok {
			name, ext = p, "idx"
		} else {
			continue
		}
		p := byName[name]
		if p == nil {
			p = &prefix{name: name}
			byName[name] = p
			ps = append(ps, p)
		}
		if ext == "bin" {
			p.bin = o
		} else {
			p.idx = o
		}
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%w: no Megatron prefix (name.bin beside name.idx) in the source", format.ErrInvalid)
	}
	out := make([]prefix, len(ps))
	for i, p := range ps {
		switch {
		case p.idx.Key == "":
			return nil, fmt.Errorf("%w: prefix %q has %s but no %s.idx", format.ErrInvalid, p.name, p.bin.Key, p.name)
		case p.bin.Key == "":
			return nil, fmt.Errorf("%w: prefix %q has %s but no %s.bin", format.ErrInvalid, p.name, p.idx.Key, p.name)
		}
		out[i] = *p
	}
	return out, nil
}

// Index reads every prefix's .idx (never a .bin), checks it against its
// .bin's size, and cuts each .bin into chunks of whole documents.
func (Format) Index(ctx context.Context, st format.Store, objs []format.Object, opt format.Options) (*format.Layout, error) {
	lim := opt.Limits.WithDefaults()
	target := opt.ChunkBytes
	if target <= 0 {
		target = format.DefaultChunkBytes
	}
	par := opt.Parallel
	if par <= 0 {
		par = 16
	}
	for f, ext := range opt.Members {
		if f != "tokens" || ext != "npy" {
			return nil, fmt.Errorf("%w: a Megatron dataset's one field is \"tokens\", served as npy (members asked: %q → %q)", format.ErrUnsupported, f, ext)
		}
	}
	// Always a token dataset, from its .idx: the options that make one
	// of another format's column are refused, not ignored.
	switch {
	case opt.Tokens != "" && opt.Tokens != "tokens":
		return nil, fmt.Errorf("%w: a Megatron dataset's tokens are its field \"tokens\", not %q", format.ErrUnsupported, opt.Tokens)
	case opt.Text != "" || opt.Tokenizer != nil:
		return nil, fmt.Errorf("%w: a Megatron dataset is tokens already; --text and --tokenizer are for text columns", format.ErrUnsupported)
	case opt.Vocabulary != "":
		return nil, fmt.Errorf("%w: a Megatron dataset's vocabulary is not recorded yet (its .idx does not name one)", format.ErrUnsupported)
	}
	ps, err := prefixes(objs)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		if p.idx.Size > lim.MetaBytes {
			return nil, fmt.Errorf("%w: %s: %d bytes, over the metadata limit of %d", format.ErrInvalid, p.idx.Key, p.idx.Size, lim.MetaBytes)
		}
	}
	idx := make([]index, len(ps))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(par)
	for i, p := range ps {
		g.Go(func() error {
			b := make([]byte, p.idx.Size)
			if err := st.ReadRange(gctx, p.idx.Key, p.idx.ETag, 0, b); err != nil {
				return fmt.Errorf("megatron: reading %s: %w", p.idx.Key, err)
			}
			x, err := parseIdx(p.idx.Key, b, p.bin.Size)
			idx[i] = x
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	for i := range ps {
		if idx[i].code != idx[0].code {
			return nil, fmt.Errorf("%w: %s holds %s tokens and %s %s: one dataset has one dtype", format.ErrInvalid,
				ps[0].idx.Key, dtypes[idx[0].code].name, ps[i].idx.Key, dtypes[idx[i].code].name)
		}
	}
	m := meta{code: idx[0].code}
	for i, p := range ps {
		m.prefixes = append(m.prefixes, prefixMeta{name: p.name, docs: len(idx[i].docs)})
		m.tokens = append(m.tokens, idx[i].docs...)
	}
	if err := m.cut(target, lim, func(pi, d int, r int64) error {
		return fmt.Errorf("%w: %s: document %d has %d tokens, %d bytes as a sample: over the chunk limit of %d bytes",
			format.ErrInvalid, ps[pi].idx.Key, d, idx[pi].docs[d], r, lim.ChunkBytes)
	}); err != nil {
		return nil, err
	}
	lay := &format.Layout{
		Chunks: make([]format.Chunk, len(m.chunks)),
		Keys:   make([]string, 0, len(m.tokens)),
		Meta:   m.marshal(),
	}
	for i, c := range m.chunks {
		p := ps[c.prefix]
		lay.Chunks[i] = format.Chunk{Object: p.bin.Key, ETag: p.bin.ETag, Size: p.bin.Size, Samples: c.docs}
		lay.Keys = keys.Append(lay.Keys, p.name, c.first, c.docs, keyWidth)
	}
	return lay, nil
}

// keyWidth is the digits a document's number is padded to.
const keyWidth = 9

// keyOf is document d of prefix name's key.
func keyOf(name string, d int) string { return keys.One(name, d, keyWidth) }

// keyLen is len(keyOf(name, d)).
func keyLen(name string, d int) int { return keys.Len(name, d, keyWidth) }

// docResident is what a document of n tokens, whose key is keyLen
// bytes, costs in the resident form: its member and its table entry.
func docResident(keyLen int, dt dtype, n uint32) int64 {
	return format.MemberLen(keyLen+len(".npy"), memberLen(dt, n)) + format.TableEntryLen
}

// memberLen is a document's .npy: its header and its tokens.
func memberLen(dt dtype, n uint32) int64 {
	return int64(npy.HeaderLen(dt.descr, []int64{int64(n)})) + int64(n)*dt.size
}

// Open returns the decoder of a dataset Index described in meta.
func (Format) Open(b []byte) (format.Decoder, error) {
	m, err := unmarshal(b)
	if err != nil {
		return nil, err
	}
	return newDecoder(m), nil
}
