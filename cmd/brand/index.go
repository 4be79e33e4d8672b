package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/dustin/go-humanize"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/s3backend"
)

// runIndex is `brand index`: index tar shards already in a store (a
// WebDataset dataset, or chunks whose index must be rebuilt) in place,
// writing the member table, the index and the manifest. Run over a
// dataset packed before member tables, it adds one (docs/format.md §5).
func runIndex(ctx context.Context, env *cli.Env, args []string) error {
	var (
		sf                cli.S3Flags
		src, prefix, name string
		parallel          int
	)
	fs := flag.NewFlagSet("index", flag.ContinueOnError)
	fs.StringVar(&src, "src", "", "store holding the shards: s3://bucket/prefix, file:///dir or a directory; the member table, index and manifest are written there")
	fs.StringVar(&prefix, "prefix", "", "index only the .tar objects whose keys (relative to --src) start with this")
	fs.StringVar(&name, "name", "", "dataset name in the manifest (default: the last segment of the prefix or URL)")
	fs.IntVar(&parallel, "parallel", dataset.DefaultParallel, "shards read at once")
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
