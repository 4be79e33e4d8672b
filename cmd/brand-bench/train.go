package main

import (
	"flag"
	"strings"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
)

const trainSynopsis = "train [--small] [flags]"

// trainBenchmark is the training benchmark (bench.RunTrain): a torchvision
// ResNet trained on synthetic tensors on the device (S), fed by
// ImageFolder and a DataLoader (P), fed by BrandDataset with the
// gateway's transform (B), and fed by brand.GPUTensors, the gateway's cut
// JPEGs decoded on the trainer's device (G), on the same cores.
func trainBenchmark() benchmark[bench.TrainConfig, *bench.TrainReport] {
	return benchmark[bench.TrainConfig, *bench.TrainReport]{
		name: "train", synopsis: trainSynopsis, config: bench.DefaultTrainConfig, timeout: 60 * time.Minute,
		small:    bench.SmokeTrainConfig,
		smallDoc: "a smoke run on the CPU, as CI runs it: ResNet-18, 48 photos of at most 64 px in 4 classes, batch 8, 1 + 2 steps, on two cores",
		run:      bench.RunTrain,
		flags: func(fs *flag.FlagSet, cfg *bench.TrainConfig) func() error {
			fs.Var((*wordList)(&cfg.Models), "models", "torchvision models, comma-separated (resnet18, resnet50, ...)")
			fs.Var((*wordList)(&cfg.Feeds), "feeds", "feeds, comma-separated: "+strings.Join(bench.TrainFeeds, ", "))
			fs.IntVar(&cfg.Images, "images", cfg.Images, "photos in the dataset (internal/gen/photos.ClassTree)")
			fs.IntVar(&cfg.Classes, "classes", cfg.Classes, "classes (folders), at most 1,000; a photo's class is in its colour, checked on every step")
			fs.IntVar(&cfg.Side, "side", cfg.Side, "photos' sides between side/2 and side pixels, for a smoke run (0: ImageNet's sizes)")
			fs.IntVar(&cfg.Steps, "steps", cfg.Steps, "measured steps of each model and feed")
			fs.IntVar(&cfg.Warmup, "warmup", cfg.Warmup, "steps before the measured ones")
			fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "images per step")
			fs.IntVar(&cfg.Cores, "cores", cfg.Cores, "cores every feed has, 0 to cores-1 (0: every core)")
			fs.IntVar(&cfg.GatewayCores, "gateway-cores", cfg.GatewayCores, "(B), (G): the gateway's cores, the last of --cores (0: cores-2 from 4 cores up, else 1)")
			fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "(P): DataLoader workers (0: one a core)")
			fs.IntVar(&cfg.BrandWorkers, "brand-workers", cfg.BrandWorkers, "(B), (G): the Brand loader's workers, on the trainer's cores (0: the trainer's process reads)")
			fs.StringVar(&cfg.Device, "device", cfg.Device, "cuda, cpu, or auto (cuda where there is one)")
			fs.StringVar(&cfg.AMP, "amp", cfg.AMP, "bf16 autocast: bf16, off, or auto (CUDA with bf16; a CPU with AMX or AVX-512 BF16)")
			fs.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "seed of the photos, the shuffles and the model")
			fs.StringVar(&cfg.Interpreter, "python", "", "Python with torch, torchvision and PIL (default: $BRAND_BENCH_PYTHON, python3, /usr/bin/python3)")
			fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure (default: brand beside this executable, else on $PATH); scripts/bench.sh builds it with libjpeg-turbo when it can")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where the photos, their pack and the gateway's log go (default: a temporary directory, removed)")
			return nil
		},
	}
}
