package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/s3backend"
)

// The train benchmark (brand-bench train): issue 68's question — does
// Brand keep a training job's device busy, and what does it save against
// the DataLoader a user runs today — answered by training. One loop
// (python/bench/train.py: a torchvision ResNet, channels-last, bf16
// autocast where the device has it, SGD) is fed three ways on the same
// machine and the same cores:
//
//	(S) synthetic  one batch made on the device once: the model's ceiling
//	(P) folder     torchvision's ImageFolder and a DataLoader with
//	               RandomResizedCrop(224), RandomHorizontalFlip and
//	               PILToTensor in Workers workers, on all Cores cores
//	(B) brand      BrandDataset with the gateway's transform=imagenet-train,
//	               the trainer on the first Cores − GatewayCores cores and
//	               the gateway on the other GatewayCores
//	(G) gpu        brand.GPUTensors with transform=imagenet-train-gpu: the
//	               gateway cuts each JPEG to its crop, the trainer's device
//	               decodes and finishes it (on a CPU, torchvision's
//	               decoder), cores split as (B)'s; only with a gateway
//	               built with libjpeg-turbo (its decoder "turbojpeg"),
//	               skipped and said so otherwise
//
// The dataset is a class-folder tree of JPEGs sized and weighted like
// ImageNet's (photos.ClassTree), on the local disk for (P) and packed
// beside it for the gateway (a file store: no object store's process
// shares the data node's cores, as none shares (P)'s), whose cache holds
// it before anything is timed: both feeds read bytes at rest in memory.
// Every photo carries its class in its colour, so train.py checks every
// image's label against its pixels, and every step's shapes, in all three
// feeds; a wrong label fails the run.
//
// Each run reports images/s over its measured steps, the ratio to (S),
// the device's busy fraction, and the CPU seconds per 1,000 images of the
// trainer's process tree and of the gateway, from /proc.

// The feeds.
const (
	FeedSynthetic = "synthetic"
	FeedFolder    = "folder"
	FeedBrand     = "brand"
	FeedGPU       = "gpu"
)

// TrainFeeds are the feeds in the order a model runs them.
var TrainFeeds = []string{FeedSynthetic, FeedFolder, FeedBrand, FeedGPU}

var trainLabels = map[string]string{
	FeedSynthetic: "(S) synthetic, on the device",
	FeedFolder:    "(P) ImageFolder + DataLoader",
	FeedBrand:     "(B) BrandDataset, transform=imagenet-train",
	FeedGPU:       "(G) brand.GPUTensors, transform=imagenet-train-gpu",
}

// gatewayFeed reports whether a feed reads from the gateway.
func gatewayFeed(feed string) bool { return feed == FeedBrand || feed == FeedGPU }

// TrainConfig describes a train benchmark run. Zero fields take
// DefaultTrainConfig's values.
type TrainConfig struct {
	Models  []string // torchvision.models constructors
	Feeds   []string // of TrainFeeds
	Images  int      // photos in the dataset
	Classes int
	// Side is 0 for ImageNet's sizes; a smoke run's small photos have
	// sides between Side/2 and Side.
	Side      int `zero:"kept"`
	Steps     int // measured steps of each run
	Warmup    int `zero:"kept"` // steps before them
	BatchSize int
	// Cores is how many cores every feed has (0 to Cores−1): all of
	// them the trainer's in (S) and (P), split in (B). 0: every core.
	Cores int `zero:"kept"`
	// GatewayCores are (B)'s data node's, the last of Cores. 0: Cores − 2
	// from 4 cores up, else 1.
	GatewayCores int `zero:"kept"`
	// Workers are (P)'s DataLoader workers (0: one a core), BrandWorkers
	// (B)'s loader's (0: the trainer's process reads, on the client's
	// threads).
	Workers      int    `zero:"kept"`
	BrandWorkers int    `zero:"kept"`
	Device       string // cuda, cpu, or auto: cuda where there is one
	AMP          string // bf16, off, or auto: bf16 where the device has it cheaply
	Seed         uint64

	Interpreter, Script string // train.py and a Python with torch, torchvision and PIL; found when empty
	Harness
}

// DefaultTrainConfig: ResNet-18 and ResNet-50, 10,000 ImageNet-sized
// photos in 100 classes, batch 256, 20 steps then 100 measured, on every
// core.
func DefaultTrainConfig() TrainConfig {
	return TrainConfig{Models: []string{"resnet18", "resnet50"}, Feeds: TrainFeeds, Images: 10000, Classes: 100,
		Steps: 100, Warmup: 20, BatchSize: 256, BrandWorkers: 2, Device: "auto", AMP: "auto", Seed: 1}
}

// SmokeTrainConfig is a run small enough for a CPU in CI: ResNet-18, 48
// photos of at most 64 pixels a side in 4 classes, batch 8, one step
// then 2 measured, on two cores.
func SmokeTrainConfig() TrainConfig {
	c := DefaultTrainConfig()
	c.Models, c.Images, c.Classes, c.Side, c.Steps, c.Warmup, c.BatchSize, c.Cores = []string{"resnet18"}, 48, 4, 64, 2, 1, 8, 2
	c.Device = "cpu"
	return c
}

// TrainReport is the benchmark's result: train.json.
type TrainReport struct {
	Header
	Images       int        `json:"images"`
	Classes      int        `json:"classes"`
	Side         int        `json:"side,omitempty"` // 0: ImageNet's sizes
	MeanBytes    int64      `json:"mean_bytes"`
	Bytes        int64      `json:"dataset_bytes"`
	Chunks       int        `json:"chunks,omitempty"`
	BatchSize    int        `json:"batch_size"`
	Steps        int        `json:"steps"`
	Warmup       int        `json:"warmup"`
	Cores        int        `json:"cores"`
	TrainerCores string     `json:"brand_trainer_cores"` // (B)'s
	GatewayCores string     `json:"brand_gateway_cores"`
	Device       string     `json:"device"`
	DeviceName   string     `json:"device_name,omitempty"`
	AMP          string     `json:"amp"`
	Decoder      string     `json:"decoder,omitempty"` // the gateway's JPEG decoder (/stats)
	Python       string     `json:"python"`
	Versions     string     `json:"versions"`
	Rows         []TrainRow `json:"rows"`
	Targets      []Target   `json:"targets"`
	Load         []float64  `json:"load_average"` // the machine's 1-minute load average before each model
	Seconds      float64    `json:"seconds"`
	// Skipped says why a feed asked for did not run: (G) with a gateway
	// that cannot cut JPEGs.
	Skipped []string `json:"skipped,omitempty"`
}

// TrainRow is one model fed one way.
type TrainRow struct {
	Model        string  `json:"model"`
	Feed         string  `json:"feed"`
	Cores        string  `json:"trainer_cores"`
	GatewayCores string  `json:"gateway_cores,omitempty"`
	Workers      int     `json:"workers"`
	AMP          string  `json:"amp"`
	Images       int     `json:"images"`
	Seconds      float64 `json:"seconds"`
	ImagesPerSec float64 `json:"images_per_s"`
	// OfSynthetic is ImagesPerSec over (S)'s for the same model.
	OfSynthetic float64 `json:"of_synthetic"`
	// Busy is the fraction of the measured time the device computed:
	// CUDA events around each step's compute, or on a CPU that span
	// timed (the rest is the wait for data).
	Busy        float64 `json:"device_busy"`
	WaitSeconds float64 `json:"wait_s"`
	// TrainerCPU is the trainer's process tree's CPU seconds (its
	// DataLoader workers, live or reaped, included) over the measured
	// steps; GatewayCPU the gateway's ((B) only). Both per 1,000 images
	// too.
	TrainerCPU        float64 `json:"trainer_cpu_s"`
	GatewayCPU        float64 `json:"gateway_cpu_s"`
	TrainerCPUPer1000 float64 `json:"trainer_cpu_s_per_1000"`
	GatewayCPUPer1000 float64 `json:"gateway_cpu_s_per_1000"`
	// StepsChecked are the steps whose shapes and labels were checked
	// (every step, warm-up included), ImagesChecked their images, and
	// LabelErrors the images whose label was not the class their pixels
	// carry (a run with any fails).
	StepsChecked  int     `json:"steps_checked"`
	ImagesChecked int     `json:"images_checked"`
	LabelErrors   int     `json:"label_errors"`
	Loss          float64 `json:"final_loss"`
}

// trainResult is what train.py prints.
type trainResult struct {
	Device        string  `json:"device"`
	DeviceName    string  `json:"device_name"`
	AMP           string  `json:"amp"`
	Workers       int     `json:"workers"`
	Images        int     `json:"images"`
	Seconds       float64 `json:"seconds"`
	ImagesPerSec  float64 `json:"images_per_s"`
	Busy          float64 `json:"busy"`
	WaitSeconds   float64 `json:"wait_s"`
	TrainerCPU    float64 `json:"trainer_cpu_s"`
	GatewayCPU    float64 `json:"gateway_cpu_s"`
	StepsChecked  int     `json:"steps_checked"`
	ImagesChecked int     `json:"images_checked"`
	LabelErrors   int     `json:"label_errors"`
	Loss          float64 `json:"loss"`
}

// What train.py imports, and the Debian packages that hold it.
const (
	trainModules  = "torch, torchvision, PIL"
	trainPackages = "python3-torch python3-torchvision python3-pil"
)

// cpuList is taskset's list of the cores from first to last.
func cpuList(first, last int) string {
	if first == last {
		return strconv.Itoa(first)
	}
	return fmt.Sprintf("%d-%d", first, last)
}

// maxTrainClasses is the most classes the photos' colours tell apart
// (photos.ClassChroma's cells 1.9 levels wide; TestClassTreeColourCarriesClass).
const maxTrainClasses = 1000

// split fills the cores of each side and checks them.
func (c *TrainConfig) split() error {
	if c.Cores == 0 {
		c.Cores = runtime.NumCPU()
	}
	if c.GatewayCores == 0 {
		c.GatewayCores = 1
		if c.Cores >= 4 {
			c.GatewayCores = c.Cores - 2
		}
	}
	if c.Workers == 0 {
		c.Workers = c.Cores
	}
	switch {
	case c.Cores < 2 || c.Cores > runtime.NumCPU():
		return fmt.Errorf("%w: %d cores; 2 to the machine's %d", ErrConfig, c.Cores, runtime.NumCPU())
	case c.GatewayCores < 1 || c.GatewayCores >= c.Cores:
		return fmt.Errorf("%w: %d gateway cores of %d; the trainer needs one", ErrConfig, c.GatewayCores, c.Cores)
	case c.Images < c.BatchSize:
		return fmt.Errorf("%w: %d images, fewer than a batch of %d", ErrConfig, c.Images, c.BatchSize)
	case c.Classes < 1 || c.Classes > maxTrainClasses:
		return fmt.Errorf("%w: %d classes; 1 to %d, as many as a photo's colour tells apart", ErrConfig, c.Classes, maxTrainClasses)
	case c.Side != 0 && c.Side < 8:
		return fmt.Errorf("%w: side %d; 8 pixels at least", ErrConfig, c.Side)
	case c.Steps < 1 || c.Warmup < 0:
		return fmt.Errorf("%w: %d steps after %d", ErrConfig, c.Steps, c.Warmup)
	}
	for _, f := range c.Feeds {
		if !slices.Contains(TrainFeeds, f) {
			return fmt.Errorf("%w: feed %q (want some of %s)", ErrConfig, f, strings.Join(TrainFeeds, ", "))
		}
	}
	return nil
}

// RunTrain runs the train benchmark.
func RunTrain(ctx context.Context, cfg TrainConfig) (*TrainReport, error) {
	fillZero(&cfg, DefaultTrainConfig())
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if err := cfg.split(); err != nil {
		return nil, err
	}
	py, err := newTrainerNode(ctx, "train", 0, cfg.Cores-1, cfg.Script, cfg.Interpreter, trainModules, trainPackages)
	if err != nil {
		return nil, err
	}
	py.env = os.Environ()
	trainerCores := cpuList(0, cfg.Cores-cfg.GatewayCores-1)
	gatewayCores := cpuList(cfg.Cores-cfg.GatewayCores, cfg.Cores-1)
	started := time.Now()
	rep := &TrainReport{Header: newHeader(started, cfg.Command),
		Images: cfg.Images, Classes: cfg.Classes, Side: cfg.Side, BatchSize: cfg.BatchSize, Steps: cfg.Steps, Warmup: cfg.Warmup,
		Cores: cfg.Cores, TrainerCores: trainerCores, GatewayCores: gatewayCores, Python: py.interp,
		Versions: py.versions(ctx, "import torch, torchvision, PIL; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'Pillow', PIL.__version__)")}

	src := filepath.Join(cfg.WorkDir, "train-src")
	_ = os.RemoveAll(src)
	defer os.RemoveAll(src)
	tree := photos.ClassTree{Samples: cfg.Images, Classes: cfg.Classes, Side: cfg.Side, Seed: cfg.Seed}
	total, err := tree.Write(ctx, src)
	if err != nil {
		return nil, err
	}
	rep.MeanBytes = total / int64(cfg.Images)
	logf(cfg.Log, "dataset: %d photos in %d classes, mean %s", cfg.Images, cfg.Classes, sizeString(rep.MeanBytes))

	var g *gatewayProc
	feeds := slices.Clone(cfg.Feeds)
	if slices.ContainsFunc(feeds, gatewayFeed) {
		if g, err = trainGateway(ctx, cfg, py.taskset, src, gatewayCores, rep); err != nil {
			return nil, err
		}
		defer g.kill()
		if slices.Contains(feeds, FeedGPU) && rep.Decoder != "turbojpeg" {
			// Only libjpeg-turbo cuts a JPEG (transform.ErrNeedsTurboJPEG).
			why := fmt.Sprintf("(G) skipped: the gateway's decoder is %q, not a build with -tags brand_turbojpeg, which alone serves transform=imagenet-train-gpu", rep.Decoder)
			rep.Skipped = append(rep.Skipped, why)
			logf(cfg.Log, "%s", why)
			feeds = slices.DeleteFunc(feeds, func(f string) bool { return f == FeedGPU })
		}
	}

	synthetic := map[string]float64{}
	for _, model := range cfg.Models {
		rep.Load = append(rep.Load, loadAverage())
		for _, feed := range TrainFeeds {
			if !slices.Contains(feeds, feed) {
				continue
			}
			row, err := trainRun(ctx, cfg, py, g, model, feed, src, trainerCores, gatewayCores, rep)
			if err != nil {
				return nil, err
			}
			if feed == FeedSynthetic {
				synthetic[model] = row.ImagesPerSec
			}
			row.OfSynthetic = ratio(row.ImagesPerSec, synthetic[model])
			logf(cfg.Log, "%s, %s: %.1f images/s (%.2f of (S)), device busy %.2f, trainer %.2f CPU-s per 1,000 images, gateway %.2f",
				model, feed, row.ImagesPerSec, row.OfSynthetic, row.Busy, row.TrainerCPUPer1000, row.GatewayCPUPer1000)
			rep.Rows = append(rep.Rows, row)
		}
	}
	if g != nil {
		if err := g.stop(10 * time.Second); err != nil {
			return nil, err
		}
	}
	rep.Targets = rep.targets()
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

// trainGateway packs the tree beside it, starts a gateway on its cores
// over the pack, and fills its cache with the dataset.
func trainGateway(ctx context.Context, cfg TrainConfig, taskset, src, cores string, rep *TrainReport) (*gatewayProc, error) {
	packed := filepath.Join(cfg.WorkDir, "train-packed")
	store, err := s3backend.Open(ctx, packed, s3backend.Config{})
	if err != nil {
		return nil, err
	}
	res, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: 16 << 20, Shuffle: true, Seed: 68, Parallel: 2, Name: "photos", Overwrite: true})
	if err != nil {
		return nil, err
	}
	rep.Bytes, rep.Chunks = res.Index.TotalBytes(), res.Index.NumChunks()
	args := []string{"-c", cores, cfg.GatewayBinary, "serve", "--listen", "127.0.0.1:0", "--dataset", "photos=file://" + packed,
		"--cache-size", strconv.FormatInt(2*rep.Bytes+64<<20, 10),
		"--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s"}
	g, err := startGateway(ctx, taskset, args, gatewayEnv("", ""), filepath.Join(cfg.WorkDir, "gateway-train.log"))
	if err != nil {
		return nil, err
	}
	for m := range (cfg.Images + 255) / 256 {
		if code, err := g.get(ctx, fmt.Sprintf("/epoch/0/batch/%d?batch_size=256", m), io.Discard); err != nil || code != 200 {
			g.kill()
			return nil, fmt.Errorf("bench: warming the gateway's cache, batch %d: status %d, %v", m, code, err)
		}
	}
	if st, err := transformStats(ctx, g); err == nil {
		rep.Decoder = st.Decoder
	}
	logf(cfg.Log, "gateway: %s in %d chunks cached, decoder %s, on cores %s", sizeString(rep.Bytes), rep.Chunks, rep.Decoder, cores)
	return g, nil
}

// trainRun trains model fed by feed and checks what train.py says it
// checked.
func trainRun(ctx context.Context, cfg TrainConfig, py trainerNode, g *gatewayProc, model, feed, src, trainerCores, gatewayCores string, rep *TrainReport) (TrainRow, error) {
	args := []string{feed, "--model", model, "--device", cfg.Device, "--amp", cfg.AMP,
		"--batch-size", strconv.Itoa(cfg.BatchSize), "--steps", strconv.Itoa(cfg.Steps), "--warmup", strconv.Itoa(cfg.Warmup),
		"--classes", strconv.Itoa(cfg.Classes), "--seed", strconv.FormatUint(cfg.Seed, 10)}
	row := TrainRow{Model: model, Feed: feed, Cores: cpuList(0, cfg.Cores-1)}
	switch feed {
	case FeedFolder:
		args = append(args, "--dir", src, "--workers", strconv.Itoa(cfg.Workers))
	case FeedBrand, FeedGPU:
		args = append(args, "--url", g.base, "--dataset", "photos", "--workers", strconv.Itoa(cfg.BrandWorkers),
			"--gateway-pid", strconv.Itoa(g.cmd.Process.Pid))
		py.cpus, row.Cores, row.GatewayCores = trainerCores, trainerCores, gatewayCores
	}
	if !gatewayFeed(feed) {
		py.cpus = row.Cores
	}
	var out trainResult
	if err := py.run(ctx, &out, args...); err != nil {
		return TrainRow{}, err
	}
	steps := cfg.Warmup + cfg.Steps
	switch {
	case out.LabelErrors != 0:
		return TrainRow{}, fmt.Errorf("bench: %s fed by %s: %d of %d images came with a label not their class", model, feed, out.LabelErrors, out.ImagesChecked)
	case out.StepsChecked != steps || out.ImagesChecked != steps*cfg.BatchSize || out.Images != cfg.Steps*cfg.BatchSize:
		return TrainRow{}, fmt.Errorf("bench: %s fed by %s: %d steps (%d images) checked, %d images measured; want %d steps of %d", model, feed, out.StepsChecked, out.ImagesChecked, out.Images, steps, cfg.BatchSize)
	}
	rep.Device, rep.DeviceName, rep.AMP = out.Device, out.DeviceName, out.AMP
	n := float64(out.Images)
	row.Workers, row.AMP, row.Images, row.Seconds, row.ImagesPerSec = out.Workers, out.AMP, out.Images, out.Seconds, out.ImagesPerSec
	row.Busy, row.WaitSeconds, row.TrainerCPU, row.GatewayCPU = out.Busy, out.WaitSeconds, out.TrainerCPU, out.GatewayCPU
	row.TrainerCPUPer1000, row.GatewayCPUPer1000 = 1e3*out.TrainerCPU/n, 1e3*out.GatewayCPU/n
	row.StepsChecked, row.ImagesChecked, row.LabelErrors, row.Loss = out.StepsChecked, out.ImagesChecked, out.LabelErrors, out.Loss
	return row, nil
}

// targets are issue 68's, for a machine with a GPU: (B) within 5 % of
// (S) for ResNet-50, and at least twice (P) for ResNet-18; and issue
// 82's: (G)'s trainer CPU at most 0.05 ms an image for ResNet-50.
// Elsewhere they are N/A: a CPU is the model's bottleneck, not the
// data's, and decodes (G)'s images itself.
func (r *TrainReport) targets() []Target {
	find := func(model, feed string) *TrainRow {
		for i := range r.Rows {
			if r.Rows[i].Model == model && r.Rows[i].Feed == feed {
				return &r.Rows[i]
			}
		}
		return nil
	}
	var ts []Target
	if b, s := find("resnet50", FeedBrand), find("resnet50", FeedSynthetic); b != nil && s != nil {
		ts = append(ts, atLeast("ResNet-50 images/s, (B) ÷ (S)", ratio(b.ImagesPerSec, s.ImagesPerSec), 0.95))
	}
	if b, p := find("resnet18", FeedBrand), find("resnet18", FeedFolder); b != nil && p != nil {
		ts = append(ts, atLeast("ResNet-18 images/s, (B) ÷ (P)", ratio(b.ImagesPerSec, p.ImagesPerSec), 2.0))
	}
	if g := find("resnet50", FeedGPU); g != nil {
		ts = append(ts, atMost("ResNet-50 (G): the trainer's CPU, ms an image", g.TrainerCPUPer1000, 0.05))
	}
	if !strings.HasPrefix(r.Device, "cuda") {
		for i := range ts {
			ts[i].Status, ts[i].Note = NA, "a goal for a GPU machine; this ran on "+r.Device
		}
	}
	return ts
}

// WriteJSON writes the report as JSON.
func (r *TrainReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteText writes the report as a markdown table.
func (r *TrainReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	sizes := "ImageNet's sizes"
	if r.Side != 0 {
		sizes = fmt.Sprintf("sides of %d to %d px", r.Side/2, r.Side)
	}
	device := r.Device
	if r.DeviceName != "" {
		device += " (" + r.DeviceName + ")"
	}
	fmt.Fprintf(&sb, "%d photo-like JPEGs in %d classes, %s, mean %s; %s, autocast %s, batch %d, %d steps measured after %d; %d cores: (S) and (P) the trainer's, (B) the trainer on %s and the gateway (decoder %s) on %s; %s\n\n",
		r.Images, r.Classes, sizes, sizeString(r.MeanBytes), device, r.AMP, r.BatchSize, r.Steps, r.Warmup, r.Cores,
		r.TrainerCores, orDash(r.Decoder), r.GatewayCores, r.Versions)
	sb.WriteString("| model | feed | trainer cores | gateway cores | workers | images/s | ÷ (S) | device busy | trainer CPU-s per 1,000 images | gateway CPU-s per 1,000 images | steps checked | label errors |\n")
	sb.WriteString("| --- | --- | --- | --- | --: | --: | --: | --: | --: | --: | --: | --: |\n")
	for _, row := range r.Rows {
		gw, gwCPU, ofS := "—", "—", "—"
		if gatewayFeed(row.Feed) {
			gw, gwCPU = row.GatewayCores, fmt.Sprintf("%.2f", row.GatewayCPUPer1000)
		}
		if row.OfSynthetic > 0 {
			ofS = fmt.Sprintf("%.2f", row.OfSynthetic)
		}
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %d | %.1f | %s | %.2f | %.2f | %s | %d | %d |\n", row.Model, trainLabels[row.Feed], row.Cores, gw,
			row.Workers, row.ImagesPerSec, ofS, row.Busy, row.TrainerCPUPer1000, gwCPU, row.StepsChecked, row.LabelErrors)
	}
	for _, why := range r.Skipped {
		fmt.Fprintf(&sb, "\n%s\n", why)
	}
	fmt.Fprintf(&sb, "\nEvery step's shapes and every image's label (against the class its pixels carry) checked, warm-up included. Device busy: the fraction of the measured time the device computed (CUDA events around each step's compute; on a CPU that span timed). CPU from /proc: the trainer's process tree (its DataLoader workers included) and the gateway's process. Load average before each model: %s. %d CPUs.\n\nTargets:\n", joinFloats(r.Load, 1), r.Machine.CPUs)
	for _, t := range r.Targets {
		note := ""
		if t.Note != "" {
			note = "; " + t.Note
		}
		fmt.Fprintf(&sb, "  %-4s %s: %.3f (want %s%s)\n", t.Status, t.Name, t.Ratio, t.Want, note)
	}
	fmt.Fprintf(&sb, "\n%s; %.0f s\n", r.Command, r.Seconds)
	_, err := io.WriteString(w, sb.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "—"
	}
	return s
}
