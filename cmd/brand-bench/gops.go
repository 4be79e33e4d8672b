package main

import (
	"flag"
	"time"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

const gopsSynopsis = "gops [flags]"

// gopsBenchmark is the GOP benchmark (bench.RunGOPs): the data node's CPU
// a LeRobot sample and a strided clip when it decodes each keyframe group
// once a decode horizon, against PyAV decoding each sample's frames in
// DataLoader workers, on the same cores.
func gopsBenchmark() benchmark[bench.GOPsConfig, *bench.GOPsReport] {
	return benchmark[bench.GOPsConfig, *bench.GOPsReport]{
		name: "gops", synopsis: gopsSynopsis, config: bench.DefaultGOPsConfig, timeout: 60 * time.Minute,
		run: bench.RunGOPs,
		flags: func(fs *flag.FlagSet, cfg *bench.GOPsConfig) func() error {
			fs.IntVar(&cfg.Episodes, "episodes", cfg.Episodes, "the LeRobot dataset's episodes (three cameras at 640×480, 30 fps, H.264, a keyframe every 2 s)")
			fs.IntVar(&cfg.Seconds, "seconds", cfg.Seconds, "each episode's and each plain video's length")
			fs.StringVar(&cfg.Deltas, "frames", cfg.Deltas, "a LeRobot sample's frames of each camera around its row (frames=)")
			fs.IntVar(&cfg.Videos, "videos", cfg.Videos, "the plain clip job's videos (640×480, 30 fps, H.264 with B-frames, a keyframe a second)")
			fs.IntVar(&cfg.Clip, "clip", cfg.Clip, "frames a clip of the plain job (clip=)")
			fs.IntVar(&cfg.Stride, "stride", cfg.Stride, "frames between a clip's frames (stride=)")
			fs.IntVar(&cfg.Window, "window", cfg.Window, "window= of every job (episodes; the tree's chunks)")
			fs.IntVar(&cfg.GOPWindow, "gop-window", cfg.GOPWindow, "gop_window= of the GOP-then-sample configuration")
			fs.IntVar(&cfg.BatchSize, "batch-size", cfg.BatchSize, "samples a batch, Brand's and PyAV's")
			fs.Var((*cli.ByteSize)(&cfg.GOPCacheBytes), "gop-cache-bytes", "the gateway's --gop-cache-bytes")
			fs.IntVar(&cfg.Baseline, "baseline", cfg.Baseline, "samples (and clips) of each epoch PyAV decodes a round, spread evenly over it")
			fs.IntVar(&cfg.Rounds, "rounds", cfg.Rounds, "rounds, each an epoch of every configuration")
			fs.IntVar(&cfg.Workers, "workers", cfg.Workers, "the DataLoader's workers and the gateway's --transform-workers")
			fs.StringVar(&cfg.CPUs, "cpus", cfg.CPUs, "the cores every configuration runs on (taskset's list)")
			fs.StringVar(&cfg.Interpreter, "python", "", "Python with torch, av and numpy (default: $BRAND_BENCH_PYTHON, python3, /usr/bin/python3)")
			fs.StringVar(&cfg.GatewayBinary, "gateway-binary", "", "brand binary to measure, built with -tags brand_libav (default: brand beside this executable, else on $PATH)")
			fs.StringVar(&cfg.WorkDir, "work-dir", "", "where the videos, the indexes and the logs go (default: a temporary directory, removed)")
			return nil
		},
	}
}
