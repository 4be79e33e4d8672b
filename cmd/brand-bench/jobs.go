package main

import (
	"context"
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const jobsSynopsis = "jobs [--quick] [flags]"

// runJobsBench runs the shared-cache benchmark (bench.RunJobs): J jobs
// through one gateway, its store reads per job-epoch against the planner's
// optimum and against LRU. It writes jobs.txt, jobs.json, jobs.chart.json and jobs.png.
func runJobsBench(ctx context.Context, env *cli.Env, args []string) error {
	cfg := bench.DefaultJobsConfig()
	var (
		out     = "bench-results"
		timeout = 60 * time.Minute
		quick   bool
	)
	fs := flag.NewFlagSet("jobs", flag.ContinueOnError)
	fs.BoolVar(&quick, "quick", false, "J = 1 and 4 at a 50 % cache, equal speeds only: the harness and the headline figure in a minute")
	fs.Var((*intList)(&cfg.Jobs), "jobs", "job counts (comma-separated)")
	fs.Var((*percentList)(&cfg.CacheFractions), "cache", "cache sizes, in percent of the dataset (comma-separated)")
	fs.Var((*stringList)(&cfg.Speeds), "speeds", "speed mixes, equal or 1:2 (repeatable; default both)")
	fs.IntVar(&cfg.Samples, "samples", cfg.Samples, "synthetic samples")
	fs.Var((*cli.ByteSize)(&cfg.MeanBytes), "mean-bytes", "mean sample size")
	fs.Var((*cli.ByteSize)(&cfg.ChunkSize), "chunk-size", "target chunk size")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples per batch")
	fs.IntVar(&cfg.Window, "window", cfg.Window, "shuffle window, in chunks")
	fs.IntVar(&cfg.Epochs, "epochs", cfg.Epochs, "epochs each job reads")
	fs.DurationVar(&cfg.Pace, "pace", cfg.Pace, "with speeds 1:2, the fast jobs' time per batch per job sharing the gateway")
	fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
	fs.Var((*stringList)(&cfg.GatewayArgs), "gateway-arg", "extra `FLAG` of brand serve for every gateway (repeatable)")
	fs.StringVar(&cfg.WorkDir, "work-dir", "", "where the dataset and the gateways' logs go; kept and reused when given (default: a temporary directory, removed)")
	fs.DurationVar(&cfg.ConfigTimeout, "config-timeout", cfg.ConfigTimeout, "bound on each gateway run")
	fs.StringVar(&out, "out", out, "directory for jobs.txt, jobs.json, jobs.chart.json and jobs.png (drawn by brand-chart)")
	fs.DurationVar(&timeout, "timeout", timeout, "bound on the whole run")
	speedsGiven := false
	if err := parseFlags(fs, env, args, jobsSynopsis); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) { speedsGiven = speedsGiven || f.Name == "speeds" })
	if speedsGiven {
		cfg.Speeds = cfg.Speeds[len(bench.DefaultJobsConfig().Speeds):] // the flag appends to the default
	}
	if quick {
		cfg.Jobs, cfg.CacheFractions, cfg.Speeds = []int{1, 4}, []float64{0.5}, []string{bench.SpeedsEqual}
	}
	if err := defaultBrand(&cfg.GatewayBinary); err != nil {
		return err
	}
	cleanup, err := workAndOut(&cfg.WorkDir, out, "jobs")
	defer cleanup()
	if err != nil {
		return err
	}
	cfg.Command = commandLine("brand-bench jobs", args)
	cfg.Log = env.Stderr
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	rep, err := bench.RunJobs(ctx, cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteText(env.Stdout); err != nil {
		return err
	}
	return writeReports(env.Stderr, out, report{"jobs.txt", rep.WriteText}, report{"jobs.json", rep.WriteJSON}, chartReport("jobs", rep))
}
