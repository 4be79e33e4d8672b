package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const resizeSynopsis = "resize [flags]"

// resizeBenchmark is the resize benchmark (bench.RunResize): a job read
// while its cluster goes 3 → 5 → 4 nodes and loses one, beside a fixed
// cluster of 4.
func resizeBenchmark() benchmark[bench.ResizeConfig, *bench.ResizeReport] {
	return benchmark[bench.ResizeConfig, *bench.ResizeReport]{
		name: "resize", synopsis: resizeSynopsis, config: bench.DefaultResizeConfig, timeout: 60 * time.Minute,
		run: bench.RunResize,
		flags: func(fs *flag.FlagSet, cfg *bench.ResizeConfig) func() error {
			fs.IntVar(&cfg.Samples, "samples", cfg.Samples, "samples in the dataset")
			fs.Var((*cli.ByteSize)(&cfg.MeanBytes), "mean-bytes", "mean sample size")
			fs.Var((*cli.ByteSize)(&cfg.ChunkSize), "chunk-size", "target chunk size")
			fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples per rank per batch")
			fs.IntVar(&cfg.Window, "window", cfg.Window, "shuffle window, in chunks")
			fs.IntVar(&cfg.World, "world", cfg.World, "ranks of the job, reading each step together")
			fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "epochs of each run: the joins in epoch 0, the leave in epoch 1, the kill in the last (at least 3)")
			fs.Float64Var(&cfg.NodeCache, "node-cache", cfg.NodeCache, "each node's cache, a fraction of the dataset")
			fs.Float64Var(&cfg.ChangeAt, "change-at", cfg.ChangeAt, "where in an epoch each change starts, a fraction of its steps")
			fs.DurationVar(&cfg.StepTime, "step-time", cfg.StepTime, "the training step: each global step's batches are asked for no sooner than this after the last step's")
			fs.IntVar(&cfg.Pairs, "pairs", cfg.Pairs, "alternations of the fixed 4-node cluster and the resized one")
			fs.DurationVar(&cfg.PeersPoll, "peers-poll", cfg.PeersPoll, "the gateways' --peers-poll")
			fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
			fs.Var((*stringList)(&cfg.GatewayArgs), "gateway-arg", "extra `FLAG` of brand serve for every gateway (repeatable)")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where MinIO's data, the dataset and the gateways' logs go; kept and reused when given (default: a temporary directory, removed)")
			fs.DurationVar(&cfg.ConfigTimeout, "config-timeout", cfg.ConfigTimeout, "bound on each run")
			return nil
		},
	}
}
