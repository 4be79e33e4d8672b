package dataset

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/s3backend"
)

// ErrNothingNew reports an append that found no object under the prefix
// the dataset's index does not hold already: nothing is stored.
var ErrNothingNew = errkind.New(errkind.Invalid, "dataset: no new files to append")

// ErrCannotAppend reports an append refused with nothing stored: the
// dataset is packed (tar chunks), its format's description cannot be
// extended, or a file it indexed was changed or removed since (index it
// again instead).
var ErrCannotAppend = errkind.New(errkind.Invalid, "dataset: cannot append")

// AppendOptions configures AppendInPlace.
type AppendOptions struct {
	// Formats are the formats Brand reads (the index names its own).
	Formats []format.Format
	// Prefix selects the source's objects, as the index was made with.
	Prefix string
	// Options are the format options for the new files: their chunk
	// size (0: the one the dataset's manifest records), metadata reads at
	// once, limits. Member extensions and token fields are the dataset's.
	Options format.Options
	// Tool is recorded in the manifest (default "brand").
	Tool string
}

// AppendInPlace adds the objects under the source's prefix that the
// index at dst does not hold yet to a dataset served in place (`brand
// index --append`): it reads the new objects' metadata alone (Parquet
// footers; format.Appender) and publishes a new index version that
// extends the stored one (chunkindex.Lineage.Extend): the old chunks, in
// the same order and with the same sample IDs, then the new objects'
// chunks, the parent's ID and chunk count recorded in it. A job pinned to the
// old version is then served its order as the prefix of the new one
// (docs/http-api.md, "Appends: data added during a run").
//
// The new index keeps its parent's creation time, the time every
// decoded member carries, so that an old chunk decodes to the bytes it
// did; it carries checksums if its parent does (the new objects read
// once for them). Refused with nothing stored: a packed dataset, a
// format that cannot extend its description, an indexed object changed
// or removed since (ErrCannotAppend); new objects whose schema is not the
// dataset's (the format's error); no new object (ErrNothingNew).
func AppendInPlace(ctx context.Context, src, dst s3backend.Store, opts AppendOptions) (*Result, error) {
	if opts.Tool == "" {
		opts.Tool = DefaultTool
	}
	old, err := stored.ReadIndex(ctx, dst)
	if err != nil {
		return nil, err
	}
	if !old.Deferred() {
		return nil, fmt.Errorf("%w: %s holds a packed dataset (tar chunks): pack the new files with the rest (brand pack --overwrite), or index them as a dataset of their own", ErrCannotAppend, storeLocation(dst, ""))
	}
	name := old.InPlace().Format
	i := slices.IndexFunc(opts.Formats, func(f format.Format) bool { return f.Name() == name })
	if i < 0 {
		return nil, fmt.Errorf("%w: the dataset is of format %s, which this build does not read", ErrCannotAppend, name)
	}
	f := opts.Formats[i]
	app, ok := f.(format.Appender)
	if !ok {
		return nil, fmt.Errorf("%w: a %s dataset's description cannot be extended: index it again (brand index without --append)", ErrCannotAppend, name)
	}
	meta, err := stored.ReadFormat(ctx, dst, old)
	if err != nil {
		return nil, err
	}
	m, err := stored.ReadManifest(ctx, dst)
	if err != nil {
		return nil, err
	}
	if opts.Options.ChunkBytes <= 0 {
		opts.Options.ChunkBytes = m.ChunkTargetBytes // the new files cut as the dataset's were
	}
	lister := src
	if il, ok := src.(identityLister); ok && !old.Checksummed() {
		lister = il.IdentityETags() // as IndexInPlace listed them
	}
	objs, err := listData(ctx, lister, opts.Prefix)
	if err != nil {
		return nil, err
	}
	added, err := newObjects(old, objs)
	if err != nil {
		return nil, err
	}
	lay, err := app.Append(ctx, src, meta, added, opts.Options)
	if err != nil {
		return nil, fmt.Errorf("dataset: appending to %s as %s: %w", storeLocation(src, opts.Prefix), name, err)
	}
	if len(lay.Chunks) == 0 {
		return nil, fmt.Errorf("%w: every %s file under %s is indexed already (index %s)", ErrNothingNew, name, storeLocation(src, opts.Prefix), old.ID())
	}
	dec, err := f.Open(lay.Meta)
	if err != nil {
		return nil, fmt.Errorf("dataset: opening the %s description just made: %w", name, err)
	}
	n := old.NumChunks()
	chunks := make([]chunkindex.Chunk, n, n+len(lay.Chunks))
	keys := make([]string, old.NumSamples(), old.NumSamples()+len(lay.Keys))
	for c := range n {
		chunks[c] = old.Chunk(c)
		_, chunks[c].Size = dec.Extent(c, nil) // Extend checks it is the old one
	}
	for id := range keys {
		keys[id] = old.SampleKey(id)
	}
	chunks = append(chunks, inPlaceChunks(lay.Chunks, n, dec)...)
	keys = append(keys, lay.Keys...)
	ip := chunkindex.InPlace{Format: name, Meta: sha256.Sum256(lay.Meta), Created: old.InPlace().Created}
	var ix *chunkindex.Index
	if old.Checksummed() {
		spans, err := checksums(ctx, src, lay.Chunks, n, dec, checksumReads(opts.Options))
		if err != nil {
			return nil, err
		}
		all := make([][]chunkindex.Span, n, n+len(spans))
		for c := range n {
			all[c] = old.Spans(c)
		}
		ix, err = chunkindex.NewDeferredChecked(chunks, keys, ip, append(all, spans...))
	} else {
		ix, err = chunkindex.NewDeferred(chunks, keys, ip)
	}
	if err != nil {
		return nil, fmt.Errorf("dataset: building the index: %w", err)
	}
	if ix, err = old.Lineage().Extend(ix); err != nil {
		return nil, fmt.Errorf("%w: the %s description of the old files changed as it was extended: %w", ErrCannotAppend, name, err)
	}
	nm := chunkindex.NewManifest(m.Name, ix)
	nm.Created = time.Now().Truncate(time.Second)
	nm.Source, nm.Tool, nm.InPlace, nm.ChunkTargetBytes = m.Source, opts.Tool, m.InPlace, m.ChunkTargetBytes
	res, err := publish(ctx, dst, ix, nm, companion{
		key: chunkindex.FormatKey(ix.ID()), what: "the format's description", b: lay.Meta,
	})
	if err != nil {
		return nil, err
	}
	res.Tokens, _ = dec.(format.Tokens)
	res.Decoder = dec
	return res, nil
}

// newObjects returns the objects of a listing that index ix does not
// hold, in the listing's order, after checking that every object it holds
// is listed as it was indexed.
func newObjects(ix *chunkindex.Index, objs []format.Object) ([]format.Object, error) {
	indexed := map[string]string{} // object → ETag
	for c := range ix.NumChunks() {
		ch := ix.Chunk(c)
		indexed[stored.ChunkObject(ch.Key)] = ch.ETag
	}
	var added []format.Object
	seen := 0
	for _, o := range objs {
		etag, ok := indexed[o.Key]
		switch {
		case !ok:
			added = append(added, o)
		case etag != "" && etag != o.ETag:
			return nil, fmt.Errorf("%w: %s changed since it was indexed (ETag %s, indexed %s): index the dataset again", ErrCannotAppend, o.Key, o.ETag, etag)
		default:
			seen++
		}
	}
	if seen < len(indexed) {
		listed := map[string]bool{}
		for _, o := range objs {
			listed[o.Key] = true
		}
		for c := range ix.NumChunks() {
			if k := stored.ChunkObject(ix.Chunk(c).Key); !listed[k] {
				return nil, fmt.Errorf("%w: %s, which the index holds, is not listed (removed, or not under the prefix given): index the dataset again", ErrCannotAppend, k)
			}
		}
	}
	return added, nil
}
