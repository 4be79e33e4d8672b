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
	"github.com/brandgw/brand/transform"
)

// runPack is `brand pack`: a directory tree into chunks, an index and a
// manifest in a store.
func runPack(ctx context.Context, env *cli.Env, args []string) error {
	var (
		sf                                 cli.S3Flags
		src, dst, name, prefix             string
		seed                               uint64
		noShuffle, overwrite, createBucket bool
		sizes                              bool
		parallel                           int
		chunk                              = cli.ByteSize(dataset.DefaultChunkSize)
	)
	fs := flag.NewFlagSet("pack", flag.ContinueOnError)
	fs.StringVar(&src, "src", "", "directory tree to pack (class folders such as train/n01440764/x.JPEG work as they are)")
	fs.StringVar(&dst, "dst", "", "store to pack into: s3://bucket/prefix, file:///dir or a directory")
	fs.Var(&chunk, "chunk-size", "target chunk size")
	fs.Uint64Var(&seed, "shuffle-seed", 0, "seed of the order samples are packed in")
	fs.BoolVar(&noShuffle, "no-shuffle", false, "pack samples in key order instead of a seeded random order (chunks of a class-sorted tree then hold few classes each, which hurts a chunk-level shuffle)")
	fs.IntVar(&parallel, "parallel", dataset.DefaultParallel, "chunks built and uploaded at once; each holds a chunk in memory")
	fs.StringVar(&name, "name", "", "dataset name in the manifest (default: the base name of --src)")
	fs.StringVar(&prefix, "chunk-prefix", dataset.DefaultChunkPrefix, "key prefix of the chunks")
	fs.BoolVar(&overwrite, "overwrite", false, "pack even if --dst already holds a dataset index (breaks whoever serves it)")
	fs.BoolVar(&createBucket, "create-bucket", false, "with an s3:// --dst, create the bucket if it does not exist")
	fs.BoolVar(&sizes, "sizes", false, sizesUsage)
	sf.Register(fs)
	if err := cli.ParseFlags(fs, env, args, "brand pack --src DIR --dst URL [flags]"); err != nil {
		return err
	}
	switch {
	case fs.NArg() > 0:
		return usageError(env, "pack", "unexpected argument %q", fs.Arg(0))
	case src == "":
		return errors.New("no --src given: name the directory to pack")
	case dst == "":
		return errors.New("no --dst given: name the store to pack into (s3://bucket/prefix or a directory)")
	case chunk <= 0:
		return usageError(env, "pack", "--chunk-size must be positive")
	case parallel < 1:
		return usageError(env, "pack", "--parallel must be at least 1")
	}

	cfg := sf.Config()
	if createBucket {
		if err := s3backend.EnsureBucket(ctx, dst, cfg); err != nil {
			return err
		}
	}
	st, err := s3backend.Open(ctx, dst, cfg)
	if err != nil {
		return err
	}
	bar := newProgressBar(env, "pack")
	res, err := dataset.Pack(ctx, src, st, dataset.PackOptions{
		ChunkSize:   int64(chunk),
		Shuffle:     !noShuffle,
		Seed:        seed,
		Parallel:    parallel,
		Name:        name,
		ChunkPrefix: prefix,
		Overwrite:   overwrite,
		Tool:        "brand " + version,
		Progress:    bar.callback(),
	})
	bar.finish()
	if errors.Is(err, dataset.ErrExists) {
		return fmt.Errorf("%w; pack elsewhere, or pass --overwrite to replace it", err)
	}
	if errors.Is(err, s3backend.ErrNoBucket) {
		return fmt.Errorf("the bucket of %s does not exist: pass --create-bucket to create it (%w)", dst, err)
	}
	if err != nil {
		return err
	}
	if res.SkippedHidden > 0 {
		fmt.Fprintf(env.Stderr, "skipped %d hidden files or directories (names starting with '.')\n", res.SkippedHidden)
	}
	ix := res.Index
	fmt.Fprintf(env.Stdout, "packed %s samples into %d chunks (%s) at %s, index %s\n",
		humanize.Comma(int64(ix.NumSamples())), ix.NumChunks(), humanize.IBytes(uint64(ix.TotalBytes())), dst, ix.ID())
	if sizes {
		f, err := dataset.WriteSizes(ctx, st, ix, transform.DefaultMaxPixels, parallel)
		if err != nil {
			return fmt.Errorf("packed, but no image sizes written: %w", err)
		}
		printSizes(env, f, ix)
	}
	return nil
}

// usageError reports a command line the flag package accepted but the
// command cannot use, and makes run exit with status 2.
func usageError(env *cli.Env, cmd, format string, args ...any) error {
	fmt.Fprintf(env.Stderr, "brand %s: %s\nRun `brand help %s` for its flags.\n", cmd, fmt.Sprintf(format, args...), cmd)
	return cli.ErrUsage
}
