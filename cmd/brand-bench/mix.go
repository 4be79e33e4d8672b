package main

import (
	"context"
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const mixSynopsis = "mix [--small] [flags]"

// mixOptions are the mix command's flags.
type mixOptions struct {
	cfg     bench.MixConfig
	small   bool
	out     string
	timeout time.Duration
}

func (o *mixOptions) flagSet() *flag.FlagSet {
	cfg := &o.cfg
	fs := flag.NewFlagSet("mix", flag.ContinueOnError)
	fs.BoolVar(&o.small, "small", false, "samples of 10 KiB: 40,960 of them, the same 400 MiB (flags given explicitly still apply)")
	fs.IntVar(&cfg.Samples, "samples", cfg.Samples, "samples of the single dataset; each component of the mixture has half")
	fs.Var((*cli.ByteSize)(&cfg.MeanBytes), "mean-bytes", "mean sample size")
	fs.Var((*cli.ByteSize)(&cfg.ChunkSize), "chunk-size", "target chunk size")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples per batch")
	fs.IntVar(&cfg.Window, "window", cfg.Window, "shuffle window, in chunks")
	fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "epochs read by each gateway (0 cold, the rest warm)")
	fs.IntVar(&cfg.Readers, "readers", cfg.Readers, "ranks reading at once")
	fs.IntVar(&cfg.RankLead, "rank-lead", cfg.RankLead, "how many batches beyond the slowest rank's reads a rank's reads may reach, the batch it reads included, as a data-parallel job's loaders read ahead of the step its ranks take together (1: lockstep; negative: the ranks run free)")
	fs.IntVar(&cfg.Pairs, "pairs", cfg.Pairs, "alternations of the single dataset and the mixture per cache size")
	fs.Var((*percentList)(&cfg.CacheFractions), "cache", "cache sizes, in percent of the dataset (comma-separated)")
	fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
	fs.Var((*stringList)(&cfg.GatewayArgs), "gateway-arg", "extra `FLAG` of brand serve for every gateway (repeatable)")
	fs.StringVar(&cfg.GatewayProfiles, "gateway-profiles", "", "directory for a CPU profile of each gateway run (gateway-mix-<config>-<cache bytes>-<pair>.pprof; go tool pprof -tagfocus epoch=0 for the cold epoch)")
	fs.StringVar(&cfg.WorkDir, "work-dir", "", "where the datasets and the gateways' logs go; kept and reused when given (default: a temporary directory, removed)")
	fs.DurationVar(&cfg.ConfigTimeout, "config-timeout", cfg.ConfigTimeout, "bound on each gateway run")
	fs.StringVar(&o.out, "out", o.out, "directory for mix.txt and mix.json")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on the whole run")
	return fs
}

func newMixOptions(cfg bench.MixConfig) *mixOptions {
	return &mixOptions{cfg: cfg, out: "bench-results", timeout: 60 * time.Minute}
}

// parseMix parses the mix command's flags as parseRun does the run
// command's: once onto the defaults to find --small, then onto its
// configuration, so that flags given explicitly override it wherever they
// stand.
func parseMix(env *cli.Env, args []string) (*mixOptions, error) {
	return parseSmall(env, args, mixSynopsis, func(small bool) *mixOptions {
		if small {
			return newMixOptions(bench.SmallMixConfig())
		}
		return newMixOptions(bench.DefaultMixConfig())
	})
}

func (o *mixOptions) isSmall() bool { return o.small }

// runMixBench runs the mixture benchmark (bench.RunMix): a two-component
// mixture against one dataset of the same size, side by side. It writes
// mix.txt and mix.json.
func runMixBench(ctx context.Context, env *cli.Env, args []string) error {
	o, err := parseMix(env, args)
	if err != nil {
		return err
	}
	cfg := o.cfg
	if err := defaultBrand(&cfg.GatewayBinary); err != nil {
		return err
	}
	cleanup, err := workAndOut(&cfg.WorkDir, o.out, "mix")
	defer cleanup()
	if err != nil {
		return err
	}
	if cfg.GatewayProfiles, err = profileDir(cfg.GatewayProfiles); err != nil {
		return err
	}
	cfg.Command = commandLine("brand-bench mix", args)
	cfg.Log = env.Stderr
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := bench.RunMix(ctx, cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteText(env.Stdout); err != nil {
		return err
	}
	return writeReports(env.Stderr, o.out, report{"mix.txt", rep.WriteText}, report{"mix.json", rep.WriteJSON})
}
