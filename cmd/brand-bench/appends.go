package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
)

const appendsSynopsis = "appends [flags]"

// appendsBenchmark is the appends benchmark (bench.RunAppends): Parquet
// files added beside a dataset a job reads, `brand index --append` and
// POST /jobs/{job}/append, timed to the first batch holding a new row.
func appendsBenchmark() benchmark[bench.AppendsConfig, *bench.AppendsReport] {
	return benchmark[bench.AppendsConfig, *bench.AppendsReport]{
		name: "appends", synopsis: appendsSynopsis, config: bench.DefaultAppendsConfig, timeout: 30 * time.Minute,
		run: bench.RunAppends,
		flags: func(fs *flag.FlagSet, cfg *bench.AppendsConfig) func() error {
			fs.IntVar(&cfg.Files, "files", cfg.Files, "Parquet files of the dataset the job starts on")
			fs.IntVar(&cfg.NewFiles, "new-files", cfg.NewFiles, "Parquet files appended each round")
			fs.IntVar(&cfg.RowsPerFile, "rows", cfg.RowsPerFile, "rows (samples) a file")
			fs.IntVar(&cfg.RowBytes, "row-bytes", cfg.RowBytes, "bytes of a row's text")
			fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples per batch")
			fs.IntVar(&cfg.Window, "window", cfg.Window, "shuffle window, in chunks")
			fs.DurationVar(&cfg.StepTime, "step", cfg.StepTime, "the job's training step: how long its loop holds a batch")
			fs.IntVar(&cfg.WarmSteps, "warm-steps", cfg.WarmSteps, "steps the job reads before a round's files are written")
			fs.DurationVar(&cfg.IndexPoll, "index-poll", cfg.IndexPoll, "the gateway's --index-poll")
			fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "appends, each under a job of its own")
			fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where MinIO's data and the gateway's log go (default: a temporary directory, removed)")
			return nil
		},
	}
}
