package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/s3backend"
)

// runIndex is `brand index`: index a dataset where it is, never
// rewriting or copying its objects — tar shards (a WebDataset dataset, or
// chunks whose index must be rebuilt), or a dataset of a format served in
// place (Parquet, MDS, Megatron: formats()), recognised from its listing
// or named by --format — writing the index, the manifest and the member
// table or the format's description to --src or to --dst. Run over a
// dataset packed before member tables, it adds one (docs/format.md §5).
func runIndex(ctx context.Context, env *cli.Env, args []string) error {
	var (
		sf                              cli.S3Flags
		src, dst, prefix, name, fmtName string
		members                         string
		chunk                           cli.ByteSize
		parallel                        int
	)
	fs := flag.NewFlagSet("index", flag.ContinueOnError)
	fs.StringVar(&src, "src", "", "store holding the dataset: s3://bucket/prefix, file:///dir or a directory; the index is written there unless --dst is given")
	fs.StringVar(&dst, "dst", "", "where to write the index, manifest and format description, when not beside the data (a read-only mirror); a dataset served in place only")
	fs.StringVar(&fmtName, "format", "", "the dataset's format: "+formatNames()+" (default: recognised from the objects listed)")
	fs.StringVar(&prefix, "prefix", "", "index only the objects whose keys (relative to --src) start with this")
	fs.StringVar(&name, "name", "", "dataset name in the manifest (default: the last segment of the prefix or URL)")
	fs.StringVar(&members, "members", "", "member extensions by field, comma-separated (label=cls,caption=txt), overriding the format's mapping (docs/format.md)")
	fs.Var(&chunk, "chunk-size", "target chunk size for formats that cut their own chunks (Megatron: spans of a .bin; default 64MiB)")
	fs.IntVar(&parallel, "parallel", dataset.DefaultParallel, "shards (tar), or metadata reads (other formats: 4 × this), at once")
	sf.Register(fs)
	if err := cli.ParseFlags(fs, env, args, "brand index --src URL [flags]"); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageError(env, "index", "unexpected argument %q", fs.Arg(0))
	case src == "":
		return errors.New("no --src given: name the store holding the shards (s3://bucket/prefix or a directory)")
	case parallel < 1:
		return usageError(env, "index", "--parallel must be at least 1")
	}
	st, err := s3backend.Open(ctx, src, sf.Config())
	if err != nil {
		return err
	}
	if fmtName != "tar" && fmtName != "webdataset" && (fmtName != "" || !onlyTar(ctx, st, prefix)) {
		return indexInPlace(ctx, env, st, src, dst, prefix, name, fmtName, members, int64(chunk), parallel, sf)
	}
	if dst != "" {
		return usageError(env, "index", "--dst: tar shards are indexed beside themselves (their index names them by key)")
	}
	bar := newProgressBar(env, "index")
	res, err := dataset.IndexShards(ctx, st, dataset.IndexOptions{
		Prefix:   prefix,
		Name:     name,
		Parallel: parallel,
		Tool:     "brand " + version,
		Progress: bar.callback(),
	})
	bar.finish()
	if err != nil {
		return err
	}
	ix := res.Index
	fmt.Fprintf(env.Stdout, "indexed %s samples in %d shards (%s) at %s, index %s\n",
		humanize.Comma(int64(ix.NumSamples())), ix.NumChunks(), humanize.IBytes(uint64(ix.TotalBytes())), src, ix.ID())
	return nil
}

// formatNames lists the formats --format takes.
func formatNames() string {
	names := []string{"tar (webdataset)"}
	for _, f := range formats() {
		names = append(names, f.Name())
	}
	return strings.Join(names, ", ")
}

// onlyTar reports whether no format served in place recognises the
// objects under prefix: the tar indexer's case (which says what it found
// when that is no tar shards either).
func onlyTar(ctx context.Context, st s3backend.Store, prefix string) bool {
	objs, err := st.List(ctx, prefix)
	if err != nil {
		return true // the tar indexer lists again, and says why it failed
	}
	listed := make([]format.Object, 0, len(objs))
	for _, o := range objs {
		listed = append(listed, format.Object{Key: o.Key, Size: o.Size, ETag: o.ETag})
	}
	for _, f := range formats() {
		if f.Detect(listed) {
			return false
		}
	}
	return true
}

// indexInPlace is `brand index` of a dataset served in place.
func indexInPlace(ctx context.Context, env *cli.Env, st s3backend.Store, src, dst, prefix, name, format_, members string,
	chunk int64, parallel int, sf cli.S3Flags) error {
	out := st
	data := ""
	if dst != "" {
		var err error
		if out, err = s3backend.Open(ctx, dst, sf.Config()); err != nil {
			return err
		}
		data = src
	}
	opt := format.Options{ChunkBytes: chunk, Parallel: 4 * parallel}
	if members != "" {
		opt.Members = map[string]string{}
		for _, kv := range strings.Split(members, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" || v == "" {
				return usageError(env, "index", "--members: %q is not FIELD=EXT", kv)
			}
			opt.Members[k] = v
		}
	}
	start := time.Now()
	res, err := dataset.IndexInPlace(ctx, st, out, dataset.InPlaceOptions{Formats: formats(), Format: format_,
		Prefix: prefix, Name: name, Data: data, Options: opt, Tool: "brand " + version})
	if err != nil {
		return err
	}
	ix, where := res.Index, src
	if dst != "" {
		where = dst
	}
	fmt.Fprintf(env.Stdout, "indexed %s samples in %d chunks of %s (%s resident at most) in place at %s in %s, index %s at %s\n",
		humanize.Comma(int64(ix.NumSamples())), ix.NumChunks(), res.Manifest.InPlace.Format, humanize.IBytes(uint64(ix.TotalBytes())),
		src, time.Since(start).Round(time.Millisecond), ix.ID(), where)
	return nil
}
