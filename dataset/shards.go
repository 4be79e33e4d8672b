package dataset

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/s3backend"
)

// IndexOptions configures IndexShards.
type IndexOptions struct {
	// Prefix selects the shards: every object whose key starts with Prefix
	// and ends in ".tar", outside "_brand/". It is a plain key prefix
	// relative to the store's root (default "": the whole store).
	Prefix string
	// Name is the dataset name in the manifest (default: the last segment of
	// Prefix, else of the store's URL, else "dataset").
	Name string
	// Parallel is the number of shards read concurrently (default 4).
	Parallel int
	// Tool is recorded in the manifest (default "brand").
	Tool string
	// Progress, if set, is told how many shard bytes have been read and how
	// many shards (with their samples) are indexed; see Progress.
	Progress func(Progress)
}

// IndexShards indexes the tar shards already in st (a WebDataset dataset,
// or chunks a previous Pack wrote) and publishes an index and a manifest
// for them, without rewriting any shard.
//
// Shards are read in full with ranged reads pinned to the ETag the listing
// returned, and scanned with chunkindex.ScanTar, which accepts tar written by
// any POSIX tar (GNU tar, Python tarfile, Go); a shard that is not a valid
// uncompressed tar, or whose samples break the WebDataset rules (hidden
// members, links, a key split across places), fails with an error naming
// the shard. Shards appear in the index in key order, each with its listed
// size and ETag, so a shard rewritten afterwards is detected on read (the
// cure is to run IndexShards again). A sample key in two shards fails with
// an error naming both. No shards under Prefix fails with ErrEmpty.
func IndexShards(ctx context.Context, st s3backend.Store, opts IndexOptions) (*Result, error) {
	if opts.Parallel <= 0 {
		opts.Parallel = DefaultParallel
	}
	if opts.Tool == "" {
		opts.Tool = DefaultTool
	}
	if opts.Name == "" {
		opts.Name = defaultIndexName(st, opts.Prefix)
	}
	if strings.HasPrefix(opts.Prefix, "_brand/") {
		return nil, fmt.Errorf("dataset: prefix %q is inside the metadata folder _brand/", opts.Prefix)
	}
	shards, err := listShards(ctx, st, opts.Prefix)
	if err != nil {
		return nil, err
	}

	total := Progress{TotalChunks: len(shards)}
	for _, s := range shards {
		total.TotalBytes += s.Size
	}
	prog := startTracker(opts.Progress, total)
	defer prog.stop()

	found := make([][]chunkindex.Sample, len(shards))
	files := make([][][]chunkindex.MemberInfo, len(shards))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(opts.Parallel)
	bufs := newPartBuffers(opts.Parallel) // one part buffer per running scan
	for c, info := range shards {
		g.Go(func() error {
			buf := bufs.take()
			defer bufs.give(buf)
			r := newObjectReader(gctx, st, info, buf, func(n int64) { prog.add(n, 0, 0) })
			var ss []chunkindex.Sample
			var fs [][]chunkindex.MemberInfo
			size, err := chunkindex.ScanTar(r, func(t chunkindex.TarSample) error {
				ss = append(ss, chunkindex.Sample{Key: t.Key, Chunk: c, Offset: t.Offset, Length: t.Length, CRC: t.CRC})
				fs = append(fs, t.Files)
				return nil
			})
			if err != nil {
				return fmt.Errorf("dataset: indexing shard %s: %w", info.Key, err)
			}
			if size != info.Size {
				return fmt.Errorf("dataset: indexing shard %s: read %d bytes of %d", info.Key, size, info.Size)
			}
			found[c] = ss
			files[c] = fs
			prog.add(0, len(ss), 1)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	prog.finish()

	chunks := make([]chunkindex.Chunk, len(shards))
	var all []chunkindex.Sample
	where := map[string]int{} // sample key -> shard, to name both shards of a duplicate
	for c, info := range shards {
		chunks[c] = chunkindex.Chunk{Key: info.Key, Size: info.Size, ETag: info.ETag, Samples: len(found[c])}
		for _, s := range found[c] {
			if prev, dup := where[s.Key]; dup {
				return nil, fmt.Errorf("dataset: %w %q: in shard %s and in shard %s", chunkindex.ErrDuplicateKey, s.Key, shards[prev].Key, info.Key)
			}
			where[s.Key] = c
		}
		all = append(all, found[c]...)
	}
	ix, err := chunkindex.New(chunks, all)
	if err != nil {
		return nil, fmt.Errorf("dataset: building the index: %w", err)
	}
	m := chunkindex.NewManifest(opts.Name, ix)
	m.Source = storeLocation(st, opts.Prefix)
	m.Tool = opts.Tool
	return publishPacked(ctx, st, ix, m, slices.Concat(files...))
}

// listShards returns the .tar objects under prefix, in key order.
func listShards(ctx context.Context, st s3backend.Store, prefix string) ([]s3backend.ObjectInfo, error) {
	objs, err := st.List(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("dataset: listing %q: %w", prefix, err)
	}
	var shards []s3backend.ObjectInfo
	compressed := 0
	for _, o := range objs {
		switch {
		case strings.HasPrefix(o.Key, "_brand/"):
		case strings.HasSuffix(o.Key, ".tar"):
			shards = append(shards, o)
		case strings.HasSuffix(o.Key, ".tar.gz"), strings.HasSuffix(o.Key, ".tgz"),
			strings.HasSuffix(o.Key, ".tar.zst"), strings.HasSuffix(o.Key, ".tar.xz"):
			compressed++
		}
	}
	if len(shards) == 0 {
		if compressed > 0 {
			return nil, fmt.Errorf("%w: no .tar objects under %q, only %d compressed tar files: Brand serves samples as byte ranges, which a compressed stream does not have; decompress the shards first",
				ErrEmpty, prefix, compressed)
		}
		return nil, fmt.Errorf("%w: no .tar objects under %q (%d objects listed)", ErrEmpty, prefix, len(objs))
	}
	return shards, nil
}

// defaultIndexName names a dataset after the last segment of its prefix or,
// failing that, of its store's URL.
func defaultIndexName(st s3backend.Store, prefix string) string {
	for _, s := range []string{prefix, storeLocation(st, "")} {
		s = strings.Trim(s, "/")
		if i := strings.Index(s, "://"); i >= 0 {
			s = strings.Trim(s[i+3:], "/")
		}
		if base := path.Base(s); s != "" && base != "." {
			return base
		}
	}
	return "dataset"
}

// storeLocation describes where a store's prefix is, for the manifest.
func storeLocation(st s3backend.Store, prefix string) string {
	s, ok := st.(fmt.Stringer)
	if !ok {
		return prefix
	}
	if prefix == "" {
		return s.String()
	}
	return strings.TrimSuffix(s.String(), "/") + "/" + prefix
}
