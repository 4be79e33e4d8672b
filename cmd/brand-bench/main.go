// Command brand-bench is Brand's benchmark harness (the package
// internal/bench beneath it) as a binary of its own, so that the server
// binary and its image link neither the harness nor its charting libraries
// (cmd/brand's TestServerLinksNoHarness checks).
//
// `brand-bench run` (the default command) measures a brand binary's
// gateway, started with `brand serve`, beside the limits and baselines; it
// starts each limit as a process of its own with `brand-bench limit`, run
// from this same executable. Run `brand-bench help` for the commands.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/brandgw/brand/internal/cli"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// program is brand-bench's command table. A command line that starts with
// a flag, or is empty, is the run command's.
func program() *cli.Program {
	return &cli.Program{Name: "brand-bench", Usage: usage, Default: "run", Commands: []cli.Command{
		{Name: "run", Synopsis: runSynopsis, Summary: "run the benchmark (the default command)", Run: runBench},
		{Name: "jobs", Synopsis: jobsSynopsis, Summary: "several jobs through one gateway: store reads against the planner's optimum and LRU", Run: command(jobsBenchmark())},
		{Name: "s3face", Synopsis: s3faceSynopsis, Summary: "the PyTorch map-style loader (boto3 get_object per sample) against MinIO and against Brand's S3 face: samples/s, store requests, CPU", Run: command(s3faceBenchmark())},
		{Name: "tensors", Synopsis: tensorsSynopsis, Summary: "a training node and a data node on a core each: torchvision's transform over boto3 and over BrandDataset's bytes, against the gateway's transform=imagenet-train — images/s, trainer CPU per image, the gateway's beside Pillow's", Run: command(tensorsBenchmark())},
		{Name: "buckets", Synopsis: bucketsSynopsis, Summary: "a training node and a data node on a core each: a text-to-image model's shape buckets (SDXL's) made with PIL in DataLoader workers, against brand.Buckets — images/s, trainer CPU per image, the gateway's, the fill of the budget", Run: command(bucketsBenchmark())},
		{Name: "train", Synopsis: trainSynopsis, Summary: "a torchvision ResNet trained on synthetic tensors on the device (S), fed by ImageFolder and a DataLoader (P), and by BrandDataset with transform=imagenet-train (B), on the same cores — images/s, the ratio to (S), the device's busy fraction, CPU-s per 1,000 images of the trainer and the gateway; every step's shapes and labels checked", Run: command(trainBenchmark())},
		{Name: "video", Synopsis: videoSynopsis, Summary: "a training node and a data node on a core each: PyAV decoding clips from whole MP4s and from ranged reads of their GOPs over boto3, against BrandDataset with the gateway decoding (clip=) — clips/s, trainer CPU a clip, store bytes a clip over the covering GOPs', the first step after a resume", Run: command(videoBenchmark())},
		{Name: "gops", Synopsis: gopsSynopsis, Summary: "the data node's CPU a LeRobot-shaped sample (three cameras at 480p, four frames each) and a strided 16-frame clip when it decodes each keyframe group once a decode horizon (the default order and gop_window=), against PyAV decoding each sample's frames in DataLoader workers, on the same cores — CPU a sample, samples/s a core, frames decoded a sample, /plan's GOPs and frames against /stats'", Run: command(gopsBenchmark())},
		{Name: "mix", Synopsis: mixSynopsis, Summary: "a two-dataset mixture against one dataset of the same size: samples/s side by side, store reads against the planner's optimum", Run: command(mixBenchmark())},
		{Name: "schedule", Synopsis: scheduleSynopsis, Summary: "a three-phase schedule over a cold cache: p99 and store stalls in the steps after each switch against the steady state; the gateway's memory and goroutines at 2, 10 and 100 sources", Run: command(scheduleBenchmark())},
		{Name: "formats", Synopsis: formatsSynopsis, Summary: "datasets served in place: brand index over 10,000 Parquet files (seconds, bytes read); an epoch from Hub-layout Parquet, MDS and tar, cold and warm, Go client and PyTorch; store bytes of a projected job", Run: command(formatsBenchmark())},
		{Name: "appends", Synopsis: appendsSynopsis, Summary: "Parquet files appended beside a dataset a job reads: brand index --append (seconds, bytes read), the reload, POST /jobs/{job}/append, and the seconds to the first batch holding a new row", Run: command(appendsBenchmark())},
		{Name: "resize", Synopsis: resizeSynopsis, Summary: "a job read while its cluster goes 3 → 5 → 4 nodes and loses one, beside a fixed cluster of 4: p99 during each change, store reads, bytes from peers", Run: command(resizeBenchmark())},
		{Name: "budget", Synopsis: budgetSynopsis, Summary: "a cluster of 4 nodes and 64 ranks over an S3 front that throttles past half the job's unpaced GET rate: paced under the store's budget beside per-request retries alone — throttled GETs, GETs answered a second ÷ the budget, the busiest second, errors at ranks, batch waits", Run: command(budgetBenchmark())},
		{Name: "tokens", Synopsis: tokensSynopsis, Summary: "token jobs (seq=) on a generated corpus: bestfit and concat fill, warm tokens per gateway core, a fresh gateway's first batch on a 2,000-prefix Megatron blend, the trainer's CPU per token against nanoGPT's memmap loader and Python packing", Run: command(tokensBenchmark())},
		{Name: "vision", Synopsis: visionSynopsis, Summary: "image-text sequences (seq= with vision=) over generated WebDataset shards indexed with --tokenizer: fill, vision tokens a rank max ÷ mean (plain cut, balance=), the trainer's CPU a sample of brand.Sequences(vision=) against a Python collator (PIL, sentencepiece, packing); tokens per gateway core-second, byte-level BPE against SentencePiece", Run: command(visionBenchmark())},
		{Name: "concurrency", Synopsis: concurrencySynopsis, Summary: "one gateway with a warm cache under 8, 64, 512 and 1,024 concurrent streams, the ranks of one job and as many jobs: batches/s, p50/p99/max latency, refusals and errors, the gateway's RSS, goroutines and CPU a batch; a cluster of three with one node killed", Run: command(concurrencyBenchmark())},
		{Name: "tasks", Synopsis: tasksSynopsis, Summary: "a task job (RL prompts leased to generators, scored answers grouped into steps) through a gateway in this process over HTTP, beside the same curriculum as an in-process Python sampler: leases/s, prompts/s, lease latency, log bytes a feedback row, CPU-s per 1,000 prompts of each", Run: command(tasksBenchmark())},
		{Name: "index", Synopsis: indexSynopsis, Summary: "the index a node holds: today's whole index against a partial one, for nodes of 1, 16 and 256", Run: command(indexBenchmark())},
		{Name: "limit", Synopsis: limitSynopsis, Summary: "serve one of the benchmark's limits; run starts these itself", Run: runLimit},
		{Name: "version", Synopsis: "version", Summary: "print the version", Run: func(_ context.Context, env *cli.Env, _ []string) error {
			fmt.Fprintln(env.Stdout, "brand-bench", version)
			return nil
		}},
	}}
}

// The synopses of the commands with flags, shown in the usage and in each
// command's help.
const (
	runSynopsis   = "[run] [--smoke | --small] [flags]"
	limitSynopsis = "limit --kind KIND --dataset s3://bucket/prefix [flags]"
)

func usage(w io.Writer, commands []cli.Command) {
	fmt.Fprintf(w, "brand-bench %s: benchmark Brand's gateway against the limits of any gateway and against per-object reads and WebDataset\n\nUsage:\n", version)
	for _, c := range commands {
		fmt.Fprintf(w, "  brand-bench %s\n        %s\n", c.Synopsis, c.Summary)
	}
	fmt.Fprintf(w, "  brand-bench help [command]\n        show this help, or a command's flags\n")
}

// run dispatches a command line and returns the process exit code.
func run(ctx context.Context, env *cli.Env, args []string) int {
	return program().Run(ctx, env, args)
}

// parseFlags parses a command's flags, none of which takes arguments.
func parseFlags(fs *flag.FlagSet, env *cli.Env, args []string, synopsis string) error {
	if err := cli.ParseFlags(fs, env, args, "brand-bench "+synopsis); err != nil {
		return err
	}
	return cli.NoArgs(fs)
}

func main() { program().Main() }
