package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
)

const tensorsSynopsis = "tensors [flags]"

// tensorsBenchmark is the tensors benchmark (bench.RunTensors): a
// training node and a data node on one core each, the trainer decoding
// with torchvision over S3 and over Brand's bytes, and Brand's gateway
// decoding (transform=).
func tensorsBenchmark() benchmark[bench.TensorsConfig, *bench.TensorsReport] {
	return benchmark[bench.TensorsConfig, *bench.TensorsReport]{
		name: "tensors", synopsis: tensorsSynopsis, config: bench.DefaultTensorsConfig, timeout: 30 * time.Minute,
		run: bench.RunTensors,
		flags: func(fs *flag.FlagSet, cfg *bench.TensorsConfig) func() error {
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
			return nil
		},
	}
}
