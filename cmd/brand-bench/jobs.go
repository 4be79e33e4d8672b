package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const jobsSynopsis = "jobs [--quick] [flags]"

// jobsBenchmark is the shared-cache benchmark (bench.RunJobs): J jobs
// through one gateway, its store reads per job-epoch against the
// planner's optimum and against LRU.
func jobsBenchmark() benchmark[bench.JobsConfig, *bench.JobsReport] {
	return benchmark[bench.JobsConfig, *bench.JobsReport]{
		name: "jobs", synopsis: jobsSynopsis, config: bench.DefaultJobsConfig, timeout: 60 * time.Minute,
		run: bench.RunJobs,
		flags: func(fs *flag.FlagSet, cfg *bench.JobsConfig) func() error {
			quick := fs.Bool("quick", false, "J = 1 and 4 at a 50 % cache, equal speeds only: the harness and the headline figure in a minute")
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
			return func() error {
				if given(fs, "speeds") {
					cfg.Speeds = cfg.Speeds[len(bench.DefaultJobsConfig().Speeds):] // the flag appends to the default
				}
				if *quick {
					cfg.Jobs, cfg.CacheFractions, cfg.Speeds = []int{1, 4}, []float64{0.5}, []string{bench.SpeedsEqual}
				}
				return nil
			}
		},
	}
}

// given reports whether the flag name was set on the command line.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
