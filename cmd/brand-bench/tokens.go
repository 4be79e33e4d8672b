package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const tokensSynopsis = "tokens [--small] [flags]"

// tokensBenchmark is the token-job benchmark (bench.RunTokens).
func tokensBenchmark() benchmark[bench.TokensConfig, *bench.TokensReport] {
	return benchmark[bench.TokensConfig, *bench.TokensReport]{
		name: "tokens", synopsis: tokensSynopsis, config: bench.DefaultTokensConfig, timeout: 60 * time.Minute,
		small: bench.SmallTokensConfig, smallDoc: "a short run: 12,000 documents, a blend of 2,000 prefixes of 4 documents, 8 Mi tokens per trainer loader (flags given explicitly still apply)",
		run: bench.RunTokens,
		flags: func(fs *flag.FlagSet, cfg *bench.TokensConfig) func() error {
			fs.IntVar(&cfg.Documents, "documents", cfg.Documents, "documents in the corpus (log-normal lengths)")
			fs.Float64Var(&cfg.Median, "median", cfg.Median, "median document length, tokens")
			fs.Float64Var(&cfg.Sigma, "sigma", cfg.Sigma, "σ of the log of a document's length")
			fs.Var((*intList)(&cfg.Seqs), "seqs", "sequence lengths of the fill and throughput jobs (comma-separated)")
			fs.IntVar(&cfg.BatchTokens, "batch-tokens", cfg.BatchTokens, "tokens a batch (batch_size = this ÷ seq)")
			fs.IntVar(&cfg.Window, "window", cfg.Window, "shuffle window, in chunks")
			fs.Var((*cli.ByteSize)(&cfg.ChunkSize), "chunk-size", "the corpus index's chunk size")
			fs.IntVar(&cfg.WarmEpochs, "warm-epochs", cfg.WarmEpochs, "warm epochs timed per job")
			fs.IntVar(&cfg.Readers, "readers", cfg.Readers, "concurrent readers of the warm epochs")
			fs.IntVar(&cfg.BlendPrefixes, "blend-prefixes", cfg.BlendPrefixes, "prefixes (.bin/.idx pairs) of the blend")
			fs.IntVar(&cfg.BlendDocs, "blend-docs", cfg.BlendDocs, "documents per blend prefix")
			fs.IntVar(&cfg.FirstBatches, "first-batches", cfg.FirstBatches, "fresh gateways timed to the blend's first batch")
			fs.IntVar(&cfg.TrainerTokens, "trainer-tokens", cfg.TrainerTokens, "tokens each trainer-side loader hands over")
			fs.IntVar(&cfg.TrainerSeq, "trainer-seq", cfg.TrainerSeq, "seq of the trainer-side loaders")
			fs.IntVar(&cfg.PackBuffer, "pack-buffer", cfg.PackBuffer, "documents in the Python packer's buffer")
			fs.StringVar(&cfg.Interpreter, "python", "", "Python with numpy and torch (default: $BRAND_BENCH_PYTHON, python3, /usr/bin/python3)")
			fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where MinIO's data, the corpus and the logs go (default: a temporary directory, removed)")
			return nil
		},
	}
}
