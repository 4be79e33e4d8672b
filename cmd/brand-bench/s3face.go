package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const s3faceSynopsis = "s3face [--small] [flags]"

// s3faceBenchmark is the S3 face benchmark (bench.RunS3Face): the same
// boto3 map-style DataLoader against MinIO and against Brand's S3 face.
func s3faceBenchmark() benchmark[bench.S3FaceConfig, *bench.S3FaceReport] {
	return benchmark[bench.S3FaceConfig, *bench.S3FaceReport]{
		name: "s3face", synopsis: s3faceSynopsis, config: bench.DefaultS3FaceConfig, timeout: 60 * time.Minute,
		small: bench.SmallS3FaceConfig, smallDoc: "samples of 10 KiB: 8,192 of them (flags given explicitly still apply)",
		run: bench.RunS3Face,
		flags: func(fs *flag.FlagSet, cfg *bench.S3FaceConfig) func() error {
			fs.IntVar(&cfg.Samples, "samples", cfg.Samples, "samples in the dataset; every pass reads all of them")
			fs.Var((*cli.ByteSize)(&cfg.MeanBytes), "mean-bytes", "mean sample size")
			fs.Var((*cli.ByteSize)(&cfg.ChunkSize), "chunk-size", "Brand's chunk size")
			fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "DataLoader workers")
			fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples per DataLoader batch")
			fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "alternations of MinIO direct and Brand (a cold and a warm pass)")
			fs.StringVar(&cfg.Interpreter, "python", "", "Python with torch and boto3 (default: $BRAND_BENCH_PYTHON, python3, /usr/bin/python3)")
			fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where MinIO's data and the logs go (default: a temporary directory, removed)")
			return nil
		},
	}
}
