package parquet

import (
	"context"
	"fmt"
	"slices"

	"github.com/brandgw/brand/format"
)

// Append describes new Parquet files added beside a dataset's indexed
// ones (format.Appender): only their footers are read. Each file's row
// groups are cut into chunks as Index cuts them — one file at a time —
// and the dataset's description gains the files after its own, so its
// chunks keep their numbers. The new files must have the dataset's
// schema, and take its member extensions. A token dataset's description
// (the documents' token counts) is not extended: index it again.
func (Format) Append(ctx context.Context, st format.Store, meta []byte, objs []format.Object, opt format.Options) (*format.Layout, error) {
	old, err := decodeMeta(meta)
	if err != nil {
		return nil, err
	}
	if old.tokens != nil {
		return nil, fmt.Errorf("%w: files added to a token dataset: index it again (brand index without --append)", format.ErrUnsupported)
	}
	files := parquetFiles(objs)
	if len(files) == 0 {
		return &format.Layout{Meta: meta}, nil
	}
	d, lay, err := index(ctx, st, files, opt, old)
	if err != nil {
		return nil, err
	}
	lay.Meta = encodeMeta(merge(old, d.ds))
	return lay, nil
}

// merge is the description of a's row groups and chunks followed by b's,
// b of the same schema and extensions.
func merge(a, b *dataset) *dataset {
	m := &dataset{elems: a.elems, exts: a.exts}
	m.files = append(slices.Clone(a.files), b.files...)
	m.chunks = slices.Clone(a.chunks)
	for _, c := range b.chunks {
		c.file += len(a.files)
		m.chunks = append(m.chunks, c)
	}
	if a.ends == nil && b.ends == nil {
		return m // a chunk a row group, as both were
	}
	m.ends = make([]int, 0, a.numChunks()+b.numChunks())
	for c := range a.numChunks() {
		m.ends = append(m.ends, ends(a, c))
	}
	for c := range b.numChunks() {
		m.ends = append(m.ends, len(a.chunks)+ends(b, c))
	}
	return m
}

// ends is where chunk c of d ends among its row groups.
func ends(d *dataset, c int) int {
	if d.ends == nil {
		return c + 1
	}
	return d.ends[c]
}
