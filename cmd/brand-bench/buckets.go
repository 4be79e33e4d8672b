package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
)

const bucketsSynopsis = "buckets [flags]"

// bucketsBenchmark is the buckets benchmark (bench.RunBuckets): a
// training node and a data node on one core each, a text-to-image
// model's shape buckets made the usual way with PIL in DataLoader
// workers and by the gateway (brand.Buckets); with --clips, a
// text-to-video model's clip buckets too, the usual way with PyAV and
// PIL.
func bucketsBenchmark() benchmark[bench.BucketsConfig, *bench.BucketsReport] {
	return benchmark[bench.BucketsConfig, *bench.BucketsReport]{
		name: "buckets", synopsis: bucketsSynopsis, config: bench.DefaultBucketsConfig, timeout: 40 * time.Minute,
		small: func() bench.BucketsConfig {
			c := bench.DefaultBucketsConfig()
			c.Images, c.MinSide, c.MaxSide, c.Side, c.Budget, c.Rounds, c.CheckWorld = 96, 400, 900, 512, 1<<20, 1, 2
			return c
		},
		smallDoc: "96 photos of 400 to 900 px at the 512² buckets, one round: a smoke test",
		run:      bench.RunBuckets,
		flags: func(fs *flag.FlagSet, cfg *bench.BucketsConfig) func() error {
			fs.IntVar(&cfg.Images, "images", cfg.Images, "photo-like JPEGs of 24 aspect ratios (internal/gen/photos)")
			fs.IntVar(&cfg.MinSide, "min-side", cfg.MinSide, "the photos' shortest longer side, px")
			fs.IntVar(&cfg.MaxSide, "max-side", cfg.MaxSide, "the photos' longest longer side, px (up to 4000 as the issue's)")
			fs.IntVar(&cfg.Side, "side", cfg.Side, "SDXL's buckets at 1024² (sdxl), 768 or 512")
			fs.Int64Var(&cfg.Budget, "budget", cfg.Budget, "pixels of a step's batch")
			fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "alternations of the two loaders")
			fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "DataLoader workers of both, on the training node's core")
			fs.IntVar(&cfg.CheckWorld, "check-world", cfg.CheckWorld, "if not 0, read a whole epoch at this world size once more and hold it to the files: one shape a step, each image once in the bucket its file's header gives, shares, fill")
			fs.IntVar(&cfg.Clips, "clips", cfg.Clips, "if not 0, also this many short H.264 videos of 8 sizes and 3 lengths (ffmpeg), read as clip buckets by brand.Buckets and by PyAV + PIL in DataLoader workers (the gateway built with -tags brand_libav)")
			fs.BoolVar(&cfg.ClipsOnly, "clips-only", cfg.ClipsOnly, "with --clips, skip the photos")
			fs.StringVar(&cfg.ClipBuckets, "clip-buckets", cfg.ClipBuckets, "the clips' buckets, HxWxT,... or video-480")
			fs.Int64Var(&cfg.ClipBudget, "clip-budget", cfg.ClipBudget, "pixels (H·W·T) of a step's batch of clips")
			fs.BoolVar(&cfg.Mix, "mix", cfg.Mix, "also read the photos split by class into two datasets as one bucketed mixture in two stages (brand-mix): weights 0.3/0.7 at the buckets one size below --side's, then 0.5/0.5 at --side's from a third of the measured epoch")
			fs.StringVar(&cfg.Baseline, "baseline-python", cfg.Baseline, "if set, another tree's python directory whose brand.Buckets each round also reads the photos with (brand-before): a client's change before and after in one run")
			fs.IntVar(&cfg.TrainerCPU, "trainer-cpu", cfg.TrainerCPU, "the training node's core")
			fs.IntVar(&cfg.DataCPU, "data-cpu", cfg.DataCPU, "the data node's core: the gateway")
			fs.StringVar(&cfg.Interpreter, "python", "", "Python with torch and PIL (default: $BRAND_BENCH_PYTHON, python3, /usr/bin/python3)")
			fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where the photos, the packed dataset and the logs go (default: a temporary directory, removed)")
			return nil
		},
	}
}
