package main

import (
	"context"
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const tokensSynopsis = "tokens [--small] [flags]"

type tokensOptions struct {
	cfg     bench.TokensConfig
	small   bool
	out     string
	timeout time.Duration
}

func (o *tokensOptions) flagSet() *flag.FlagSet {
	cfg := &o.cfg
	fs := flag.NewFlagSet("tokens", flag.ContinueOnError)
	fs.BoolVar(&o.small, "small", false, "a short run: 12,000 documents, a blend of 2,000 prefixes of 4 documents, 8 Mi tokens per trainer loader (flags given explicitly still apply)")
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
	fs.StringVar(&o.out, "out", o.out, "directory for tokens.txt, tokens.json, tokens.chart.json and tokens.png (drawn by brand-chart)")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on the whole run")
	return fs
}

func newTokensOptions(cfg bench.TokensConfig) *tokensOptions {
	return &tokensOptions{cfg: cfg, out: "bench-results", timeout: 60 * time.Minute}
}

// parseTokens parses the flags as parseMix does: --small picks the
// configuration, flags given explicitly override it.
func parseTokens(env *cli.Env, args []string) (*tokensOptions, error) {
	return parseSmall(env, args, tokensSynopsis, func(small bool) *tokensOptions {
		if small {
			return newTokensOptions(bench.SmallTokensConfig())
		}
		return newTokensOptions(bench.DefaultTokensConfig())
	})
}

func (o *tokensOptions) isSmall() bool { return o.small }

// runTokensBench runs the token-job benchmark (bench.RunTokens).
func runTokensBench(ctx context.Context, env *cli.Env, args []string) error {
	o, err := parseTokens(env, args)
	if err != nil {
		return err
	}
	cfg := o.cfg
	if err := defaultBrand(&cfg.GatewayBinary); err != nil {
		return err
	}
	cleanup, err := workAndOut(&cfg.WorkDir, o.out, "tokens")
	defer cleanup()
	if err != nil {
		return err
	}
	cfg.Command = commandLine("brand-bench tokens", args)
	cfg.Log = env.Stderr
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := bench.RunTokens(ctx, cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteText(env.Stdout); err != nil {
		return err
	}
	return writeReports(env.Stderr, o.out, report{"tokens.txt", rep.WriteText}, report{"tokens.json", rep.WriteJSON},
		chartReport("tokens", rep))
}
