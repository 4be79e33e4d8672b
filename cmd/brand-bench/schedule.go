package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const scheduleSynopsis = "schedule [--small] [flags]"

// scheduleBenchmark is the schedule benchmark (bench.RunSchedule): batch
// latency and store stalls around a three-phase schedule's switches, and
// the gateway's memory and goroutines at 2, 10 and 100 sources.
func scheduleBenchmark() benchmark[bench.ScheduleConfig, *bench.ScheduleReport] {
	return benchmark[bench.ScheduleConfig, *bench.ScheduleReport]{
		name: "schedule", synopsis: scheduleSynopsis, config: bench.DefaultScheduleConfig, timeout: 60 * time.Minute,
		small: bench.SmallScheduleConfig, smallDoc: "a short run: 1,024 samples a source, switches at steps 150 and 300 of 450, 100 steps through each mixture of sources (flags given explicitly still apply)",
		run: bench.RunSchedule,
		flags: func(fs *flag.FlagSet, cfg *bench.ScheduleConfig) func() error {
			fs.IntVar(&cfg.Samples, "samples", cfg.Samples, "samples of each of the three sources")
			fs.Var((*cli.ByteSize)(&cfg.MeanBytes), "mean-bytes", "mean sample size")
			fs.Var((*cli.ByteSize)(&cfg.ChunkSize), "chunk-size", "target chunk size")
			fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples per rank per batch")
			fs.IntVar(&cfg.World, "world", cfg.World, "ranks, reading each step's batches together")
			fs.IntVar(&cfg.Window, "window", cfg.Window, "shuffle window, in chunks")
			fs.Float64Var(&cfg.CacheFraction, "cache", cfg.CacheFraction, "the cold cache, a fraction of the three sources' bytes")
			fs.IntVar(&cfg.Switch1, "switch1", cfg.Switch1, "the step the ramp starts at")
			fs.IntVar(&cfg.Switch2, "switch2", cfg.Switch2, "the step the ramp ends and the third source's weight jumps from 0.1 to 0.8")
			fs.IntVar(&cfg.Steps, "steps", cfg.Steps, "global steps read")
			fs.IntVar(&cfg.After, "after", cfg.After, "steps after each switch (and at the start) reported apart from the steady state")
			fs.DurationVar(&cfg.StepTime, "step-time", cfg.StepTime, "the training step: each global step's batches are asked for no sooner than this after the last step's")
			fs.Var((*intList)(&cfg.SourceCounts), "sources", "sizes of the mixtures whose gateway memory and goroutines are measured (2..100)")
			fs.IntVar(&cfg.SourceSamples, "source-samples", cfg.SourceSamples, "samples of each of those mixtures, split evenly among its sources")
			fs.IntVar(&cfg.SourceSteps, "source-steps", cfg.SourceSteps, "batches read through each of those mixtures")
			fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
			fs.Var((*stringList)(&cfg.GatewayArgs), "gateway-arg", "extra `FLAG` of brand serve for every gateway (repeatable)")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where MinIO's data and the gateways' logs go; kept and reused when given (default: a temporary directory, removed)")
			fs.DurationVar(&cfg.ConfigTimeout, "config-timeout", cfg.ConfigTimeout, "bound on each gateway run")
			return nil
		},
	}
}
