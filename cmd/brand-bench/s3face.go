package main

import (
	"context"
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const s3faceSynopsis = "s3face [--small] [flags]"

type s3faceOptions struct {
	cfg     bench.S3FaceConfig
	small   bool
	out     string
	timeout time.Duration
}

func (o *s3faceOptions) flagSet() *flag.FlagSet {
	cfg := &o.cfg
	fs := flag.NewFlagSet("s3face", flag.ContinueOnError)
	fs.BoolVar(&o.small, "small", false, "samples of 10 KiB: 8,192 of them (flags given explicitly still apply)")
	fs.IntVar(&cfg.Samples, "samples", cfg.Samples, "samples in the dataset; every pass reads all of them")
	fs.Var((*cli.ByteSize)(&cfg.MeanBytes), "mean-bytes", "mean sample size")
	fs.Var((*cli.ByteSize)(&cfg.ChunkSize), "chunk-size", "Brand's chunk size")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "DataLoader workers")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples per DataLoader batch")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "alternations of MinIO direct and Brand (a cold and a warm pass)")
	fs.StringVar(&cfg.Interpreter, "python", "", "Python with torch and boto3 (default: $BRAND_BENCH_PYTHON, python3, /usr/bin/python3)")
	fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
	fs.StringVar(&cfg.WorkDir, "work-dir", "", "where MinIO's data and the logs go (default: a temporary directory, removed)")
	fs.StringVar(&o.out, "out", o.out, "directory for s3face.txt and s3face.json")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on the whole run")
	return fs
}

func newS3FaceOptions(cfg bench.S3FaceConfig) *s3faceOptions {
	return &s3faceOptions{cfg: cfg, out: "bench-results", timeout: 60 * time.Minute}
}

func parseS3Face(env *cli.Env, args []string) (*s3faceOptions, error) {
	return parseSmall(env, args, s3faceSynopsis, func(small bool) *s3faceOptions {
		if small {
			return newS3FaceOptions(bench.SmallS3FaceConfig())
		}
		return newS3FaceOptions(bench.DefaultS3FaceConfig())
	})
}

func (o *s3faceOptions) isSmall() bool { return o.small }

// runS3FaceBench runs the S3 face benchmark (bench.RunS3Face): the same
// boto3 map-style DataLoader against MinIO and against Brand's S3 face.
func runS3FaceBench(ctx context.Context, env *cli.Env, args []string) error {
	o, err := parseS3Face(env, args)
	if err != nil {
		return err
	}
	cfg := o.cfg
	if err := defaultBrand(&cfg.GatewayBinary); err != nil {
		return err
	}
	cleanup, err := workAndOut(&cfg.WorkDir, o.out, "s3face")
	defer cleanup()
	if err != nil {
		return err
	}
	cfg.Command = commandLine("brand-bench s3face", args)
	cfg.Log = env.Stderr
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := bench.RunS3Face(ctx, cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteText(env.Stdout); err != nil {
		return err
	}
	return writeReports(env.Stderr, o.out, report{"s3face.txt", rep.WriteText}, report{"s3face.json", rep.WriteJSON})
}
