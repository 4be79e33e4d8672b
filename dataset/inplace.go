package dataset

import (
	"context"
	"crypto/sha256"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/s3backend"
)

// InPlaceOptions configures IndexInPlace.
type InPlaceOptions struct {
	// Formats are the formats a source may be in, as the caller offers
	// them (cmd/brand passes every format Brand reads).
	Formats []format.Format
	// Format forces one of Formats by name; "" detects the source's.
	Format string
	// Prefix selects the source's objects: those whose keys (relative to
	// the source's root) start with it.
	Prefix string
	// Name is the dataset's name in the manifest (default: the last
	// segment of the prefix or the source's URL).
	Name string
	// Data is the URL of the source, recorded in the manifest when the
	// index is written elsewhere (Dst not the source): a gateway serving
	// the index reads the chunks there.
	Data string
	// Format options: the chunk size of formats that cut their own
	// chunks, member extensions by field, metadata reads at once, limits.
	Options format.Options
	// Tool is recorded in the manifest (default "brand").
	Tool string
	// Checksums has the index record the CRC32C of every range of every
	// chunk's object (checksums.go), read once now, which every read of a
	// chunk checks: a file changed or damaged since is then caught
	// whatever changed, as a packed dataset's chunks are by their
	// samples' CRC32Cs, and a copy of the dataset or a touched file reads
	// under the index as long as its bytes are the indexed ones. Without
	// them, a local file is pinned by its identity — its size and
	// modification time (s3backend.Local.IdentityETags) — and an S3
	// object by its ETag.
	Checksums bool
	// NoChecksums records none for a format that records them by default
	// (format.DefaultChecksums: video, whose damaged packets decode into
	// wrong frames without an error): its files are then pinned by their
	// identity or ETag alone, and bytes damaged at rest are not caught
	// (docs/format.md §6.8). Neither set: the format's default.
	NoChecksums bool
	// ImageText refuses, before anything is stored, a dataset whose
	// samples are not image-text samples (format.CheckImageText): the
	// caller writes their facts next (WriteVisionFactsInPlace).
	ImageText bool
}

// checksummed reports whether an index of f records checksums under
// opts: asked for, or f's default unless refused.
func (opts InPlaceOptions) checksummed(f format.Format) bool {
	if opts.Checksums || opts.NoChecksums {
		return opts.Checksums
	}
	d, ok := f.(format.DefaultChecksums)
	return ok && d.ChecksumsByDefault()
}

// ErrSkipUnsupported marks InPlaceOptions.Options.SkipBad asked of a
// format that cannot leave a file out (not a format.Skipper).
var ErrSkipUnsupported = errkind.New(errkind.Invalid, "dataset: files cannot be skipped")

// ErrNoFormat marks a source no offered format recognises, or that more
// than one does.
var ErrNoFormat = errkind.New(errkind.Internal, "no format recognised")

// IndexInPlace indexes a dataset served in place — Parquet files, MDS
// shards, Megatron token files, whatever Formats offers — from the
// source's own metadata (and, for a token dataset named by
// Options.Tokens or Options.Text, the token column read once to count
// each document's tokens), never rewriting or copying its objects, and
// publishes Brand's index, the format's description of the chunks and a
// manifest to dst, which may be the source itself or another prefix or
// bucket (a read-only Hub mirror). Run again over a source with new files,
// it publishes a new index version, as a re-pack does; run again over the
// same files with the same options (to write a dataset's image-text facts,
// say), it keeps the version stored at dst, its creation time and so its
// ID, so that a job pinned to it reads on. Without Options.ChunkBytes a
// re-index cuts chunks at the target the stored manifest records
// (chunk_target_bytes, the ChunkBytes it was indexed with; 0 for the
// format's default), keeping the dataset's chunking.
//
// Each chunk's object is recorded with the version a read of it is pinned
// to: an S3 object's ETag; a local file's identity, its size and
// modification time (s3backend.Local.IdentityETags), which any write
// changes — files modified within their timestamps' settle time are
// waited for — or, with InPlaceOptions.Checksums, its content ETag and
// the CRC32C of every range the chunk is read in.
//
// The format's description is stored first, under the new index's ID
// (chunkindex.FormatKey), then the index, then the manifest: a gateway
// polling dst never finds an index whose description is missing, and an
// error part-way leaves the index it was serving current.
func IndexInPlace(ctx context.Context, src, dst s3backend.Store, opts InPlaceOptions) (*Result, error) {
	if opts.Tool == "" {
		opts.Tool = DefaultTool
	}
	if opts.Name == "" {
		opts.Name = defaultIndexName(src, opts.Prefix)
	}
	// A local file is listed by its identity first: nothing would check
	// its middle without checksums.
	lister := src
	il, identity := src.(identityLister)
	if identity {
		lister = il.IdentityETags()
	}
	objs, err := listData(ctx, lister, opts.Prefix)
	if err != nil {
		return nil, err
	}
	f, err := chooseFormat(opts.Formats, opts.Format, objs)
	if err != nil {
		return nil, err
	}
	if _, ok := f.(format.Skipper); opts.Options.SkipBad && !ok {
		return nil, fmt.Errorf("%w: a %s dataset's files are indexed whole or refused, naming the file: skipping those that cannot be indexed (--skip-bad-files) is for a tree of videos", ErrSkipUnsupported, f.Name())
	}
	prev := storedOf(ctx, dst, f)
	if opts.Options.ChunkBytes <= 0 && prev != nil {
		// The dataset's chunking kept: a re-index (to write image-text
		// facts, to pick up new files) cuts where the last one did unless
		// told otherwise.
		opts.Options.ChunkBytes = prev.target
	}
	checksummed := opts.checksummed(f)
	if _, confines := f.(format.DefaultChecksums); identity && checksummed && !confines {
		// With checksums a local file is pinned by its content (size,
		// first and last 64 KiB), so a copy or a touch serves. Not a
		// format that confines damage to samples (video): a content ETag
		// would fail every chunk of a file for one GOP's damage in its
		// ends, so its files keep their identity, and the checksums
		// check every byte read.
		if objs, err = listData(ctx, src, opts.Prefix); err != nil {
			return nil, err
		}
	}
	lay, err := f.Index(ctx, src, objs, opts.Options)
	if err != nil {
		return nil, fmt.Errorf("dataset: indexing %s as %s: %w", storeLocation(src, opts.Prefix), f.Name(), err)
	}
	created := time.Now().Truncate(time.Second)
	dec, err := f.Open(lay.Meta)
	if err != nil {
		return nil, fmt.Errorf("dataset: opening the %s description just made: %w", f.Name(), err)
	}
	if opts.ImageText {
		if err := format.CheckImageText(f.Name(), dec); err != nil {
			return nil, fmt.Errorf("dataset: %s: %w", storeLocation(src, opts.Prefix), err)
		}
	}
	var spans [][]chunkindex.Span
	if checksummed {
		if spans, err = checksums(ctx, src, lay.Chunks, 0, dec, checksumReads(opts.Options)); err != nil {
			return nil, err
		}
	}
	ix, err := buildInPlace(f, lay, dec, created, spans)
	if err != nil {
		return nil, err
	}
	if same, at := prev.same(f, lay, dec, spans); same != nil {
		// Nothing changed: the stored version is kept, and a job pinned
		// to it (index=) reads on.
		ix, created = same, at
	}
	m := chunkindex.NewManifest(opts.Name, ix)
	m.ChunkTargetBytes = max(opts.Options.ChunkBytes, 0)
	m.Created = created
	m.Source = storeLocation(src, opts.Prefix)
	m.Tool = opts.Tool
	m.InPlace = &chunkindex.ManifestInPlace{Format: f.Name(), Data: opts.Data}
	for _, fd := range dec.Fields() {
		m.InPlace.Fields = append(m.InPlace.Fields, chunkindex.ManifestField{Name: fd.Name, Ext: fd.Ext, Type: fd.Type})
	}
	for _, sk := range lay.Skipped {
		m.InPlace.Skipped = append(m.InPlace.Skipped, chunkindex.ManifestSkipped{Key: sk.Key, Reason: sk.Reason})
	}
	res, err := publish(ctx, dst, ix, m, companion{
		key: chunkindex.FormatKey(ix.ID()), what: "the format's description", b: lay.Meta,
	})
	if err != nil {
		return nil, err
	}
	res.Tokens, _ = dec.(format.Tokens)
	res.Decoder = dec
	return res, nil
}

// checksumReads is how many chunks are read at once for their
// checksums: a read of checksumPiece at a time each.
func checksumReads(opt format.Options) int {
	if p := opt.Parallel; p > 0 {
		return min(p, maxChecksumReads)
	}
	return maxChecksumReads
}

// identityLister is a store that lists its objects under ETags naming
// each one's identity rather than its content (s3backend.Local).
type identityLister interface {
	IdentityETags() *s3backend.Local
}

// settleRounds bounds the listings listData makes waiting for files just
// written to settle.
const settleRounds = 3

// listData lists the source's data objects under prefix — Brand's
// metadata, beside them or in an index written under the source (--dst
// inside --src), is not data — waiting for any a listing marks Unsettled
// (a local file modified within its timestamps' settle time: another
// write in the same tick would keep its identity) to settle first, so
// that the identity recorded changes with any later write.
func listData(ctx context.Context, st s3backend.Store, prefix string) ([]format.Object, error) {
	for round := 1; ; round++ {
		listed, err := st.List(ctx, prefix)
		if err != nil {
			return nil, fmt.Errorf("dataset: listing %q: %w", prefix, err)
		}
		objs := make([]format.Object, 0, len(listed))
		var until time.Time // when every unsettled object will have settled
		var last s3backend.ObjectInfo
		for _, o := range listed {
			if strings.HasPrefix(o.Key, "_brand/") || strings.Contains(o.Key, "/_brand/") {
				continue
			}
			objs = append(objs, format.Object{Key: o.Key, Size: o.Size, ETag: o.ETag})
			if at := o.ModTime.Add(s3backend.SettleOf(o.ModTime)); o.Unsettled && at.After(until) {
				until, last = at, o
			}
		}
		if len(objs) == 0 {
			return nil, fmt.Errorf("%w: no objects under %q", ErrEmpty, prefix)
		}
		if until.IsZero() {
			return objs, nil
		}
		if round == settleRounds || time.Until(until) > s3backend.DefaultSettle {
			// Still changing, or stamped past any settle time from now.
			return nil, fmt.Errorf("dataset: %s was modified at %s and is being written still (or its file system's clock is ahead of this machine's): index the dataset once its files are complete",
				last.Key, last.ModTime.Format(time.RFC3339Nano))
		}
		wait := min(time.Until(until), s3backend.DefaultSettle) + time.Millisecond
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// chooseFormat returns the format named, or the one format that
// recognises objs.
func chooseFormat(fs []format.Format, name string, objs []format.Object) (format.Format, error) {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = f.Name()
		if name != "" && f.Name() == name {
			return f, nil
		}
	}
	if name != "" {
		return nil, fmt.Errorf("%w: no format %q (formats: %s)", ErrNoFormat, name, strings.Join(names, ", "))
	}
	var found []format.Format
	for _, f := range fs {
		if f.Detect(objs) {
			found = append(found, f)
		}
	}
	// A composite (format.Supersedes) wins over the formats it is built of.
	var over []string
	for _, f := range found {
		if s, ok := f.(format.Supersedes); ok {
			over = append(over, s.Supersedes()...)
		}
	}
	found = slices.DeleteFunc(found, func(f format.Format) bool { return slices.Contains(over, f.Name()) })
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		return nil, fmt.Errorf("%w: none of %s recognises the %d objects listed (tar shards: brand index without --format)", ErrNoFormat, strings.Join(names, ", "), len(objs))
	}
	both := make([]string, len(found))
	for i, f := range found {
		both[i] = f.Name()
	}
	return nil, fmt.Errorf("%w: the source holds datasets of %s; choose one with --format (and --prefix)", ErrNoFormat, strings.Join(both, " and "))
}

// BuildInPlace builds the deferred index of a layout f's Index returned:
// chunk c is named by its object and its name (format.Chunk.Name) or else
// its place among that object's chunks ("data/train-00000.parquet#3",
// "data/train-00000.parquet#0-1"; stored.ChunkObject), sized by its resident
// bound with every field, and the index names f and the SHA-256 of
// lay.Meta and its creation time (every decoded member's). It returns the
// decoder opened on lay.Meta too.
func BuildInPlace(f format.Format, lay *format.Layout, created time.Time) (*chunkindex.Index, format.Decoder, error) {
	dec, err := f.Open(lay.Meta)
	if err != nil {
		return nil, nil, fmt.Errorf("dataset: opening the %s description just made: %w", f.Name(), err)
	}
	ix, err := buildInPlace(f, lay, dec, created, nil)
	return ix, dec, err
}

// buildInPlace is BuildInPlace with the decoder opened, and the chunks'
// checksums if not nil.
func buildInPlace(f format.Format, lay *format.Layout, dec format.Decoder, created time.Time, spans [][]chunkindex.Span) (*chunkindex.Index, error) {
	chunks := inPlaceChunks(lay.Chunks, 0, dec)
	src := chunkindex.InPlace{Format: f.Name(), Meta: sha256.Sum256(lay.Meta), Created: created.Unix()}
	var ix *chunkindex.Index
	var err error
	if spans != nil {
		ix, err = chunkindex.NewDeferredChecked(chunks, lay.Keys, src, spans)
	} else {
		ix, err = chunkindex.NewDeferred(chunks, lay.Keys, src)
	}
	if err != nil {
		return nil, fmt.Errorf("dataset: building the index: %w", err)
	}
	return ix, nil
}

// inPlaceChunks are the index's records of chunks, dec's from first on:
// each named by its object and its name or else its place among that
// object's chunks, sized by its resident bound with every field.
func inPlaceChunks(chunks []format.Chunk, first int, dec format.Decoder) []chunkindex.Chunk {
	out := make([]chunkindex.Chunk, len(chunks))
	nth := map[string]int{}
	for c, ch := range chunks {
		_, bound := dec.Extent(first+c, nil)
		name := ch.Name
		if name == "" {
			name = strconv.Itoa(nth[ch.Object])
		}
		out[c] = chunkindex.Chunk{Key: ch.Object + "#" + name, Size: bound, ETag: ch.ETag, Samples: ch.Samples}
		nth[ch.Object]++
	}
	return out
}
