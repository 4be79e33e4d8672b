package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
)

const visionSynopsis = "vision [--small] [flags]"

// visionBenchmark is the image-text benchmark (bench.RunVision).
func visionBenchmark() benchmark[bench.VisionConfig, *bench.VisionReport] {
	return benchmark[bench.VisionConfig, *bench.VisionReport]{
		name: "vision", synopsis: visionSynopsis, config: bench.DefaultVisionConfig, timeout: 60 * time.Minute,
		small: bench.SmallVisionConfig, smallDoc: "a short run: 1,200 samples of images up to 448 pixels a side, seq 2,048, 12,000 documents of text in 2 rounds (flags given explicitly still apply)",
		run: bench.RunVision,
		flags: func(fs *flag.FlagSet, cfg *bench.VisionConfig) func() error {
			fs.IntVar(&cfg.Samples, "samples", cfg.Samples, "image-text samples (captions, conversations, interleaved, text alone)")
			fs.IntVar(&cfg.Shards, "shards", cfg.Shards, "tar shards the samples are written in")
			fs.IntVar(&cfg.MinSide, "min-side", cfg.MinSide, "an image's side at least, pixels")
			fs.IntVar(&cfg.MaxSide, "max-side", cfg.MaxSide, "an image's side at most before its aspect (1:2 to 2:1), pixels")
			fs.IntVar(&cfg.Seq, "seq", cfg.Seq, "tokens a sequence")
			fs.IntVar(&cfg.MinPixels, "min-pixels", cfg.MinPixels, "the rule's min: (pixels of a resized image)")
			fs.IntVar(&cfg.MaxPixels, "max-pixels", cfg.MaxPixels, "the rule's max:")
			fs.IntVar(&cfg.Patch, "patch", cfg.Patch, "the rule's patch:")
			fs.IntVar(&cfg.Merge, "merge", cfg.Merge, "the rule's merge:")
			fs.IntVar(&cfg.MaxImages, "images", cfg.MaxImages, "the rule's images: (a cap a sequence; 0 none)")
			fs.IntVar(&cfg.World, "world", cfg.World, "ranks of the vision job")
			fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "sequences a rank a step")
			fs.IntVar(&cfg.Window, "window", cfg.Window, "shuffle window, in shards")
			fs.StringVar(&cfg.Balance, "balance", cfg.Balance, "balance= of the balanced vision job, read beside the plain cut (empty: the plain cut alone)")
			fs.IntVar(&cfg.PackBuffer, "pack-buffer", cfg.PackBuffer, "samples in the Python collator's buffer")
			fs.IntVar(&cfg.TextDocs, "text-docs", cfg.TextDocs, "documents of the tokenizers' text corpus")
			fs.IntVar(&cfg.TextRounds, "text-rounds", cfg.TextRounds, "fresh gateways each reading a cold epoch with each tokenizer")
			fs.StringVar(&cfg.Interpreter, "python", "", "Python with numpy, torch, PIL and sentencepiece (default: $BRAND_BENCH_PYTHON, python3, /usr/bin/python3)")
			fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH)")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where MinIO's data, the shards and the logs go (default: a temporary directory, removed)")
			return nil
		},
	}
}
