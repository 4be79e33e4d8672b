package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/transform"
)

// transformFlags are serve's flags of the transform stage: the pipelines
// a job may name (transform=), and its bounds.
type transformFlags struct {
	configFile string
	maxPixels  int64
	workers    int
	onBadImage string
	ahead      cli.ByteSize
	aheadSet   bool
	gopCache   cli.ByteSize
	gopSet     bool
}

// transformWorkerBytes is what --memory-limit auto's decodes part holds
// at least for each transform worker (gateway.TransformWorkerBytes).
const transformWorkerBytes = gateway.TransformWorkerBytes

func (f *transformFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.configFile, "transform-config", "", "JSON file of transform pipelines a job may name (transform=NAME) beside the built-in imagenet-train and imagenet-eval (and imagenet-train-gpu in a build with -tags brand_turbojpeg; docs/transform.md §2)")
	fs.Int64Var(&f.maxPixels, "max-image-pixels", transform.DefaultMaxPixels, "largest image a pipeline decodes, in pixels as its header claims (width × height); a larger one is refused before any allocation")
	fs.IntVar(&f.workers, "transform-workers", 0, "images transformed at once on this node (default the node's cores)")
	fs.StringVar(&f.onBadImage, "on-bad-image", gateway.OnDamagedFail, "an image a job's pipeline cannot transform (undecodable, truncated, over --max-image-pixels): fail (422 naming it) or skip (serve the batch without its sample, named in Brand-Missing-* headers)")
	fs.Func("transform-ahead-bytes", "memory for batches transformed ahead of their requests, part of --copy-bytes; 0: none (default a quarter of --copy-bytes)", func(v string) error {
		f.aheadSet = true
		return f.ahead.Set(v)
	})
	fs.Func("gop-cache-bytes", "memory for a clip job's decoded frames kept for the later batches of its decode horizon, part of the decodes' share of --memory-limit, so that each keyframe group is decoded once (docs/transform.md §12.9); 0: none (default half the decodes)", func(v string) error {
		f.gopSet = true
		return f.gopCache.Set(v)
	})
}

// gopCacheBytes is the gateway's GOPCacheBytes: 0 for its default,
// negative for none.
func (f *transformFlags) gopCacheBytes() int64 {
	switch {
	case !f.gopSet:
		return 0
	case f.gopCache == 0:
		return -1
	}
	return int64(f.gopCache)
}

// workerCount is --transform-workers, or the node's cores.
func (f *transformFlags) workerCount() int {
	if f.workers > 0 {
		return f.workers
	}
	return runtime.NumCPU()
}

// aheadBytes is the gateway's TransformAheadBytes: 0 for its default,
// negative for none.
func (f *transformFlags) aheadBytes() int64 {
	switch {
	case !f.aheadSet:
		return 0
	case f.ahead == 0:
		return -1
	}
	return int64(f.ahead)
}

// config reads --transform-config.
func (f *transformFlags) config() (transform.Config, error) {
	if f.workers < 0 {
		return transform.Config{}, fmt.Errorf("--transform-workers %d: want at least 1, or 0 for the node's cores", f.workers)
	}
	if f.maxPixels < 1 {
		return transform.Config{}, fmt.Errorf("--max-image-pixels %d: want at least 1", f.maxPixels)
	}
	if f.configFile == "" {
		return transform.Config{}, nil
	}
	b, err := os.ReadFile(f.configFile)
	if err != nil {
		return transform.Config{}, fmt.Errorf("--transform-config: %w", err)
	}
	c, err := transform.ParseConfig(b)
	if err != nil {
		return transform.Config{}, fmt.Errorf("--transform-config %s: %w", f.configFile, err)
	}
	return c, nil
}

// planTransform are plan's flags of a pipeline: which, at what rate, and
// the node's workers; its cost is calibrated here, on generated photos.
type planTransform struct {
	name         string
	imagesPerSec float64
	photos       int
	flags        transformFlags
}

func (p *planTransform) register(fs *flag.FlagSet) {
	fs.StringVar(&p.name, "transform", "", "plan a pipeline too (transform=NAME): the cores a node needs for --images-per-sec and whether caching decoded images would pay, from a calibration on generated photos")
	fs.Float64Var(&p.imagesPerSec, "images-per-sec", 0, "with --transform: the images a second the trainers want")
	fs.IntVar(&p.photos, "calibration-photos", calibrationPhotos, "with --transform: how many generated photos the pipeline's cost is measured on (fewer answer sooner, with a noisier figure)")
	fs.StringVar(&p.flags.configFile, "transform-config", "", "with --transform: serve's --transform-config, if the pipeline is defined there")
	fs.IntVar(&p.flags.workers, "transform-workers", 0, "with --transform: a node's transform workers (default this machine's cores)")
	p.flags.maxPixels = transform.DefaultMaxPixels
}

// input calibrates the pipeline; ok is false without --transform.
func (p *planTransform) input() (planner.TransformInput, bool, error) {
	if p.name == "" {
		if p.imagesPerSec != 0 {
			return planner.TransformInput{}, false, fmt.Errorf("--images-per-sec applies only with --transform")
		}
		return planner.TransformInput{}, false, nil
	}
	if p.imagesPerSec < 0 {
		return planner.TransformInput{}, false, fmt.Errorf("--images-per-sec %v: want a rate above 0", p.imagesPerSec)
	}
	if p.photos < 1 || p.photos > maxCalibrationPhotos {
		return planner.TransformInput{}, false, fmt.Errorf("--calibration-photos %d: want 1 to %d", p.photos, maxCalibrationPhotos)
	}
	cfg, err := p.flags.config()
	if err != nil {
		return planner.TransformInput{}, false, err
	}
	set, err := transform.NewSet(cfg, transform.Options{})
	if err != nil {
		return planner.TransformInput{}, false, err
	}
	pl, err := set.Get(p.name)
	if err != nil {
		return planner.TransformInput{}, false, fmt.Errorf("--transform: %w", err)
	}
	cal, err := tensorize.Calibrate(pl, p.photos)
	if err != nil {
		return planner.TransformInput{}, false, err
	}
	return planner.TransformInput{Pipeline: p.name, ImagesPerSec: p.imagesPerSec, PerImage: cal.PerImage,
		DecodePerImage: cal.DecodePerImage, DecodedFactor: cal.DecodedFactor, Workers: p.flags.workerCount()}, true, nil
}

// pureGoDecoderNote is what a build with the pure-Go JPEG decoder says of
// it — once at start, and in `brand version` — what it costs and how to
// get the fast one; "" in the libjpeg-turbo build. The figures are
// docs/transform.md §7's.
func pureGoDecoderNote() string {
	if transform.DefaultJPEGDecoder().Name() != (transform.StdJPEG{}).Name() {
		return ""
	}
	return "this build decodes JPEGs for transform= with Go's image/jpeg: about 2.6× the CPU per image of the libjpeg-turbo build " +
		"(imagenet-train: 4.5 ms against 1.7 ms, docs/transform.md §7), with pixels within 3 levels of torchvision's " +
		"where libjpeg-turbo's are identical. The container image has libjpeg-turbo; " +
		"or build with scripts/install-turbojpeg.sh && go build -tags brand_turbojpeg ./cmd/brand"
}

// calibrationPhotos is how many generated photos `brand plan` calibrates
// a pipeline on by default (the gateway's /plan uses its own count), and
// maxCalibrationPhotos the most --calibration-photos takes (each is
// generated, encoded and decoded in memory, about 10 ms apiece).
const (
	calibrationPhotos    = 100
	maxCalibrationPhotos = 10000
)
