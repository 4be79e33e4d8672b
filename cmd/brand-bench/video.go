package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
)

const videoSynopsis = "video [flags]"

// videoBenchmark is the video benchmark (bench.RunVideo): a training node
// and a data node on one core each, PyAV decoding clips on the trainer
// from whole MP4s and from ranged reads of their GOPs, against Brand's
// gateway reading the GOPs and decoding (clip=).
func videoBenchmark() benchmark[bench.VideoConfig, *bench.VideoReport] {
	return benchmark[bench.VideoConfig, *bench.VideoReport]{
		name: "video", synopsis: videoSynopsis, config: bench.DefaultVideoConfig, timeout: 30 * time.Minute,
		run: bench.RunVideo,
		flags: func(fs *flag.FlagSet, cfg *bench.VideoConfig) func() error {
			fs.IntVar(&cfg.Videos, "videos", cfg.Videos, "videos in the dataset (ffmpeg's testsrc2, H.264 with B-frames, a keyframe a second)")
			fs.IntVar(&cfg.Seconds, "seconds", cfg.Seconds, "each video's length")
			fs.StringVar(&cfg.Size, "size", cfg.Size, "the videos' frames, WxH")
			fs.IntVar(&cfg.Clip, "clip", cfg.Clip, "frames a clip (clip=)")
			fs.IntVar(&cfg.Stride, "stride", cfg.Stride, "frames between a clip's frames (stride=)")
			fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds, each an epoch of every configuration")
			fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "DataLoader workers of every configuration, on the training node's core")
			fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "clips per step")
			fs.IntVar(&cfg.BrandPasses, "brand-passes", cfg.BrandPasses, "passes of (3)'s one loader over the epoch, the last measured (the gateway's CPU: their mean)")
			fs.BoolVar(&cfg.BrandPersistent, "persistent-workers", cfg.BrandPersistent, "(3)'s loader keeps its workers across passes (persistent_workers=True)")
			fs.IntVar(&cfg.TrainerCPU, "trainer-cpu", cfg.TrainerCPU, "the training node's core: the loaders and their workers")
			fs.IntVar(&cfg.DataCPU, "data-cpu", cfg.DataCPU, "the data node's core: the gateway and MinIO")
			fs.StringVar(&cfg.Interpreter, "python", "", "Python with torch, av, boto3 and numpy (default: $BRAND_BENCH_PYTHON, python3, /usr/bin/python3)")
			fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure, built with -tags brand_libav (default: brand beside this executable, else on $PATH); scripts/bench.sh video builds it")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where MinIO's data, the videos and the logs go (default: a temporary directory, removed)")
			return nil
		},
	}
}
