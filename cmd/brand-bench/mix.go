package main

import (
	"context"
	"flag"
	"os"
	"time"

	"github.com/brandgw/brand/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const mixSynopsis = "mix [flags]"

// runMixBench runs the mixture benchmark (bench.RunMix): a two-component
// mixture against one dataset of the same size, side by side. It writes
// mix.txt and mix.json.
func runMixBench(ctx context.Context, env *cli.Env, args []string) error {
	cfg := bench.DefaultMixConfig()
	var (
		out     = "bench-results"
		timeout = 60 * time.Minute
	)
	fs := flag.NewFlagSet("mix", flag.ContinueOnError)
	fs.IntVar(&cfg.Samples, "samples", cfg.Samples, "samples of the single dataset; each component of the mixture has half")
	fs.Var((*cli.ByteSize)(&cfg.MeanBytes), "mean-bytes", "mean sample size")
	fs.Var((*cli.ByteSize)(&cfg.ChunkSize), "chunk-size", "target chunk size")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples per batch")
	fs.IntVar(&cfg.Window, "window", cfg.Window, "shuffle window, in chunks")
	fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "epochs read by each gateway (0 cold, the rest warm)")
	fs.IntVar(&cfg.Readers, "readers", cfg.Readers, "ranks reading at once")
	fs.IntVar(&cfg.Pairs, "pairs", cfg.Pairs, "alternations of the single dataset and the mixture per cache size")
	fs.Var((*percentList)(&cfg.CacheFractions), "cache", "cache sizes, in percent of the dataset (comma-separated)")
	fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
	fs.Var((*stringList)(&cfg.GatewayArgs), "gateway-arg", "extra `FLAG` of brand serve for every gateway (repeatable)")
	fs.StringVar(&cfg.WorkDir, "work-dir", "", "where the datasets and the gateways' logs go; kept and reused when given (default: a temporary directory, removed)")
	fs.DurationVar(&cfg.ConfigTimeout, "config-timeout", cfg.ConfigTimeout, "bound on each gateway run")
	fs.StringVar(&out, "out", out, "directory for mix.txt and mix.json")
	fs.DurationVar(&timeout, "timeout", timeout, "bound on the whole run")
	if err := parseFlags(fs, env, args, mixSynopsis); err != nil {
		return err
	}
	if cfg.GatewayBinary == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		if cfg.GatewayBinary, err = findBrand(exe); err != nil {
			return err
		}
	}
	cleanup, err := workAndOut(&cfg.WorkDir, out, "mix")
	defer cleanup()
	if err != nil {
		return err
	}
	cfg.Command = commandLine("brand-bench mix", args)
	cfg.Log = env.Stderr
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rep, err := bench.RunMix(ctx, cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteText(env.Stdout); err != nil {
		return err
	}
	return writeReports(env.Stderr, out, report{"mix.txt", rep.WriteText}, report{"mix.json", rep.WriteJSON})
}
