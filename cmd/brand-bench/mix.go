package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const mixSynopsis = "mix [--small] [flags]"

// mixBenchmark is the mixture benchmark (bench.RunMix): a two-component
// mixture against one dataset of the same size, side by side.
func mixBenchmark() benchmark[bench.MixConfig, *bench.MixReport] {
	return benchmark[bench.MixConfig, *bench.MixReport]{
		name: "mix", synopsis: mixSynopsis, config: bench.DefaultMixConfig, timeout: 60 * time.Minute,
		small: bench.SmallMixConfig, smallDoc: "samples of 10 KiB: 40,960 of them, the same 400 MiB (flags given explicitly still apply)",
		profiles: func(cfg *bench.MixConfig) *string { return &cfg.GatewayProfiles },
		run:      bench.RunMix,
		flags: func(fs *flag.FlagSet, cfg *bench.MixConfig) func() error {
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
			return nil
		},
	}
}
