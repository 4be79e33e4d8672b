package main

import (
	"context"
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const tensorsSynopsis = "tensors [flags]"

type tensorsOptions struct {
	cfg     bench.TensorsConfig
	out     string
	timeout time.Duration
}

func (o *tensorsOptions) flagSet() *flag.FlagSet {
	cfg := &o.cfg
	fs := flag.NewFlagSet("tensors", flag.ContinueOnError)
	fs.IntVar(&cfg.Images, "images", cfg.Images, "photo-like JPEGs in the dataset (internal/gen/photos); every pass reads them all")
	fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "alternations of the configurations")
	fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "DataLoader workers of (1), (2) and (3), on the training node's core")
	fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "images per step")
	fs.BoolVar(&cfg.ZeroWorkers, "zero-workers", cfg.ZeroWorkers, "also run (3) with num_workers=0")
	fs.IntVar(&cfg.TrainerCPU, "trainer-cpu", cfg.TrainerCPU, "the training node's core: the loaders and their workers")
	fs.IntVar(&cfg.DataCPU, "data-cpu", cfg.DataCPU, "the data node's core: the gateway and MinIO")
	fs.StringVar(&cfg.Pipeline, "pipeline", cfg.Pipeline, "the gateway's pipeline of (3)")
	fs.StringVar(&cfg.Interpreter, "python", "", "Python with torch, torchvision, boto3 and PIL (default: $BRAND_BENCH_PYTHON, python3, /usr/bin/python3)")
	fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH); scripts/bench.sh builds it with libjpeg-turbo when it can")
	fs.StringVar(&cfg.WorkDir, "work-dir", "", "where MinIO's data, the photos and the logs go (default: a temporary directory, removed)")
	fs.StringVar(&o.out, "out", o.out, "directory for tensors.txt, tensors.json, tensors.chart.json and tensors.png (drawn by brand-chart)")
	fs.DurationVar(&o.timeout, "timeout", o.timeout, "bound on the whole run")
	return fs
}

// runTensorsBench runs the tensors benchmark (bench.RunTensors): a
// training node and a data node on one core each, the trainer decoding
// with torchvision over S3 and over Brand's bytes, and Brand's gateway
// decoding (transform=).
func runTensorsBench(ctx context.Context, env *cli.Env, args []string) error {
	o := &tensorsOptions{cfg: bench.DefaultTensorsConfig(), out: "bench-results", timeout: 30 * time.Minute}
	if err := parseFlags(o.flagSet(), env, args, tensorsSynopsis); err != nil {
		return err
	}
	cfg := o.cfg
	if err := defaultBrand(&cfg.GatewayBinary); err != nil {
		return err
	}
	cleanup, err := workAndOut(&cfg.WorkDir, o.out, "tensors")
	defer cleanup()
	if err != nil {
		return err
	}
	cfg.Command = commandLine("brand-bench tensors", args)
	cfg.Log = env.Stderr
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	rep, err := bench.RunTensors(ctx, cfg)
	if err != nil {
		return err
	}
	if err := rep.WriteText(env.Stdout); err != nil {
		return err
	}
	return writeReports(env.Stderr, o.out, report{"tensors.txt", rep.WriteText}, report{"tensors.json", rep.WriteJSON},
		chartReport("tensors", rep))
}
