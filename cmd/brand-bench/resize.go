package main

import (
	"context"
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const resizeSynopsis = "resize [flags]"

// resizeOptions are the resize command's flags.
type resizeOptions struct {
	cfg     bench.ResizeConfig
	out     string
	timeout time.Duration
}

func (o *resizeOptions) flagSet() *flag.FlagSet {
	cfg := &o.cfg
	fs := flag.NewFlagSet("resize", flag.ContinueOnError)
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
	fs.StringVar(&o.out, "out", o.out, "directory for resize.txt and resize.json")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on the whole run")
	return fs
}

// runResizeBench runs the resize benchmark (bench.RunResize): a job read
// while its cluster goes 3 → 5 → 4 nodes and loses one, beside a fixed
// cluster of 4. It writes resize.txt and resize.json.
func runResizeBench(ctx context.Context, env *cli.Env, args []string) error {
	o := &resizeOptions{cfg: bench.DefaultResizeConfig(), out: "bench-results", timeout: 60 * time.Minute}
	if err := parseFlags(o.flagSet(), env, args, resizeSynopsis); err != nil {
		return err
	}
	cfg := o.cfg
	if err := defaultBrand(&cfg.GatewayBinary); err != nil {
		return err
	}
	cleanup, err := workAndOut(&cfg.WorkDir, o.out, "resize")
	defer cleanup()
	if err != nil {
		return err
	}
	cfg.Command = commandLine("brand-bench resize", args)
	cfg.Log = env.Stderr
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := bench.RunResize(ctx, cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteText(env.Stdout); err != nil {
		return err
	}
	return writeReports(env.Stderr, o.out, report{"resize.txt", rep.WriteText}, report{"resize.json", rep.WriteJSON})
}
