package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/s3backend"
)

// The buckets benchmark (brand-bench buckets): issue 78's question — what
// a training node's cores pay for a text-to-image model's shape buckets —
// on one machine split in two with CPU affinity, a training node (the
// DataLoader and its workers, on TrainerCPU) and a data node (the
// gateway, on DataCPU). Photo-like JPEGs of many aspect ratios and sizes
// (internal/gen/photos), packed with their image sizes, are read each
// round by:
//
//	(1) pil    the usual way: a map-style Dataset over the JPEG files, a
//	           bucket batch sampler (each image's bucket from its header,
//	           read before the pass), PIL's decode, resize to cover and
//	           centre crop to uint8 tensors in the workers
//	(2) brand  brand.Buckets over the gateway, the same buckets and budget
//
// Both are python/bench/buckets.py, a process of its own under taskset;
// its CPU is its process tree's over the pass, from /proc. The gateway's
// is read from /proc around its pass.

// BucketsConfig describes a buckets benchmark run. Zero fields take
// DefaultBucketsConfig's values.
type BucketsConfig struct {
	Images int // photos in the dataset
	// MinSide and MaxSide bound a photo's longer side, in pixels.
	MinSide, MaxSide int
	Rounds           int
	Workers          int `zero:"kept"`
	// Side is the SDXL buckets' scale (1024, 768, 512), Budget the
	// pixels of a step.
	Side   int
	Budget int64
	// TrainerCPU and DataCPU are the cores of the training node and of
	// the data node.
	TrainerCPU, DataCPU int `zero:"kept"`
	// CheckWorld, if not 0, reads a whole epoch at that world size once
	// more and holds it to the files (python/bench/buckets.py check).
	CheckWorld int `zero:"kept"`
	// Clips, if not 0, adds the clip half (bucketclips.go): this many
	// short videos read as ClipBuckets (HxWxT) with ClipBudget pixels a
	// step; ClipsOnly skips the photos.
	Clips       int `zero:"kept"`
	ClipsOnly   bool
	ClipBuckets string
	ClipBudget  int64
	// Mix, if set, adds a bucketed mixture in two stages (mode
	// brand-mix, bucketmix.go): the photos split into two datasets by
	// class, read at 0.3/0.7 in the stage below Side's buckets and at
	// 0.5/0.5 in Side's from a third of the measured epoch on.
	Mix bool `zero:"kept"`
	// Baseline, if set, is another tree's python directory whose
	// brand.Buckets is read in each round too (mode brand-before): a
	// change of the client measured before and after in one run.
	Baseline string

	Interpreter, Script string
	Harness
}

// DefaultBucketsConfig: 400 photos of 24 aspect ratios, longer sides 1,100
// to 2,400 pixels, SDXL's buckets at 1024² and a budget of four of them a
// step, two rounds, 2 workers, the training node on core 0 and the data
// node on core 1.
func DefaultBucketsConfig() BucketsConfig {
	return BucketsConfig{Images: 400, MinSide: 1100, MaxSide: 2400, Rounds: 2, Workers: 2, Side: 1024, Budget: 4 << 20,
		TrainerCPU: 0, DataCPU: 1, ClipBuckets: DefaultClipBuckets, ClipBudget: 4 * 240 * 432 * 17}
}

// bucketsAspects are the photos' aspect ratios, width:height: 24 of them
// from 1:3 to 3:1.
var bucketsAspects = [][2]int{{1, 3}, {2, 5}, {1, 2}, {4, 7}, {3, 5}, {5, 8}, {2, 3}, {5, 7}, {3, 4}, {4, 5}, {5, 6}, {1, 1},
	{6, 5}, {5, 4}, {4, 3}, {7, 5}, {3, 2}, {8, 5}, {5, 3}, {7, 4}, {16, 9}, {2, 1}, {5, 2}, {3, 1}}

// BucketsReport is the benchmark's result: buckets.json.
type BucketsReport struct {
	Header
	Images     int                   `json:"images"`
	Aspects    int                   `json:"aspect_ratios"`
	Sides      [2]int                `json:"longer_side_px"`
	MeanBytes  int64                 `json:"mean_bytes"`
	Workers    int                   `json:"workers"`
	TrainerCPU int                   `json:"trainer_cpu"`
	DataCPU    int                   `json:"data_cpu"`
	Buckets    string                `json:"buckets"`
	Budget     int64                 `json:"budget_pixels"`
	Decoder    string                `json:"decoder"`
	Versions   string                `json:"versions"`
	Epoch      *api.BucketsInfo      `json:"epoch"` // /epoch/1's buckets: images, steps, batch sizes, fill
	Rows       []BucketsRow          `json:"rows"`
	Summary    map[string][3]float64 `json:"trainer_ms_per_image"` // per mode: median, min, max
	Targets    []Target              `json:"targets"`
	Check      *BucketsCheck         `json:"check,omitempty"`
	Mix        *BucketsMixReport     `json:"mix,omitempty"`
	Clips      *BucketsClipsReport   `json:"clips,omitempty"`
	Load       []float64             `json:"load_average"`
	Seconds    float64               `json:"seconds"`
}

// BucketsCheck is an epoch read at one world size held to the files: the
// buckets computed from each file's header by the script, with fractions.
type BucketsCheck struct {
	Files       int     `json:"files"`
	Fit         int     `json:"fit"` // of a bucket within the upscale limit
	Served      int     `json:"served"`
	Steps       int     `json:"steps"`
	World       int     `json:"world"`
	BucketsUsed int     `json:"buckets_used"`
	Mixed       int     `json:"mixed_steps"`  // steps whose ranks had two shapes
	Wrong       int     `json:"wrong_bucket"` // images in another bucket than the rule's
	ServedUnfit int     `json:"served_unfit"`
	MaxShareDev float64 `json:"max_share_deviation_steps"` // the most a bucket's count of steps was off its share
	MeanFill    float64 `json:"mean_fill"`
	Dropped     int     `json:"dropped"`
	TooSmall    int     `json:"too_small"`
}

// BucketsRow is one pass of a loader over an epoch.
type BucketsRow struct {
	Round             int     `json:"round"`
	Mode              string  `json:"mode"`
	Images            int     `json:"images"`
	Steps             int     `json:"steps"`
	Pixels            int64   `json:"pixels"` // of the tensors the trainer received
	Fill              float64 `json:"fill"`   // the mean share of a step's budget its pixels fill
	Seconds           float64 `json:"seconds"`
	ImagesPerSec      float64 `json:"images_per_s"`
	TrainerCPU        float64 `json:"trainer_cpu_s"`
	TrainerMsPerImage float64 `json:"trainer_ms_per_image"`
	TrainerMsPerMpx   float64 `json:"trainer_ms_per_megapixel"` // over the tensors' pixels
	// WarmupCPU is the trainer's CPU over the unmeasured pass before (the
	// persistent workers' start, their first epoch).
	WarmupCPU         float64 `json:"warmup_trainer_cpu_s"`
	GatewayCPU        float64 `json:"gateway_cpu_s"` // over both passes
	GatewayMsPerImage float64 `json:"gateway_ms_per_image"`
}

// RunBuckets runs the buckets benchmark.
func RunBuckets(ctx context.Context, cfg BucketsConfig) (*BucketsReport, error) {
	fillZero(&cfg, DefaultBucketsConfig())
	if cfg.GatewayBinary == "" {
		return nil, fmt.Errorf("bench: buckets needs the brand binary (--gateway-binary)")
	}
	if cfg.WorkDir == "" {
		return nil, fmt.Errorf("bench: buckets needs a work directory")
	}
	preset := map[int]string{1024: "sdxl", 768: "sdxl-768", 512: "sdxl-512"}[cfg.Side]
	if preset == "" || cfg.MinSide < 64 || cfg.MaxSide < cfg.MinSide || cfg.Images < 1 {
		return nil, fmt.Errorf("bench: buckets: side %d (1024, 768 or 512), longer sides %d..%d, %d images", cfg.Side, cfg.MinSide, cfg.MaxSide, cfg.Images)
	}
	py, err := newTrainerNode(ctx, "buckets", cfg.TrainerCPU, cfg.DataCPU, cfg.Script, cfg.Interpreter, "torch, PIL", "python3-torch python3-pil")
	if err != nil {
		return nil, err
	}
	started := time.Now()
	rep := &BucketsReport{Header: newHeader(started, cfg.Command), Images: cfg.Images, Aspects: len(bucketsAspects),
		Sides: [2]int{cfg.MinSide, cfg.MaxSide}, Workers: cfg.Workers, TrainerCPU: cfg.TrainerCPU, DataCPU: cfg.DataCPU,
		Buckets: preset, Budget: cfg.Budget,
		Versions: py.versions(ctx, "import torch, PIL; print('torch', torch.__version__, 'Pillow', PIL.__version__)")}
	py.env = []string{"OMP_NUM_THREADS=1"}
	if !cfg.ClipsOnly {
		if err := runBucketPhotos(ctx, cfg, py, rep); err != nil {
			return nil, err
		}
	}
	if cfg.Clips > 0 {
		rep.Load = append(rep.Load, loadAverage())
		if rep.Clips, err = runBucketClips(ctx, cfg, py); err != nil {
			return nil, err
		}
		rep.Targets = append(rep.Targets, Target{Name: "trainer CPU per clip, brand.Buckets ÷ PyAV + PIL bucketing in DataLoader workers (worst round; the issue's target is for 1024² images)",
			Want: "—", Ratio: rep.Clips.WorstRate, Status: NA})
	}
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

// runBucketPhotos runs the photo half: the JPEGs written and packed, a
// gateway serving them, the rounds of both loaders and the check.
func runBucketPhotos(ctx context.Context, cfg BucketsConfig, py trainerNode, rep *BucketsReport) error {
	preset := rep.Buckets
	src := filepath.Join(cfg.WorkDir, "buckets-src")
	var err error
	if rep.MeanBytes, err = writeBucketPhotos(src, cfg); err != nil {
		return err
	}
	storeDir := filepath.Join(cfg.WorkDir, "buckets-store")
	_ = os.RemoveAll(storeDir)
	store, err := s3backend.NewLocal(storeDir)
	if err != nil {
		return err
	}
	res, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: 32 << 20, Shuffle: true, Seed: 78, Parallel: 2, Name: "photos", Overwrite: true})
	if err != nil {
		return err
	}
	if _, err := dataset.WriteSizes(ctx, store, res.Index, 0, 2); err != nil {
		return err
	}
	logf(cfg.Log, "dataset: %d photos of %d aspect ratios, longer sides %d to %d px, mean %s, packed with their sizes",
		cfg.Images, len(bucketsAspects), cfg.MinSide, cfg.MaxSide, sizeString(rep.MeanBytes))

	datasets, bytes := []string{"--dataset", "photos=file://" + storeDir}, res.Index.TotalBytes()
	if cfg.Mix {
		rep.Mix = &BucketsMixReport{}
		flags, n, err := packBucketMix(ctx, src, filepath.Join(cfg.WorkDir, "buckets-mix"), rep.Mix)
		if err != nil {
			return err
		}
		datasets, bytes = append(datasets, flags...), bytes+n
	}
	args := append(append([]string{"-c", strconv.Itoa(cfg.DataCPU), cfg.GatewayBinary, "serve", "--listen", "127.0.0.1:0"}, datasets...),
		"--cache-size", strconv.FormatInt(2*bytes+(64<<20), 10), "--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s")
	g, err := startGateway(ctx, py.taskset, args, nil, filepath.Join(cfg.WorkDir, "gateway-buckets.log"))
	if err != nil {
		return err
	}
	defer g.kill()
	q := fmt.Sprintf("dataset=photos&seed=7&buckets=%s&budget=%d", preset, cfg.Budget)
	var info api.EpochInfo
	var b strings.Builder
	if code, err := g.get(ctx, "/epoch/1?"+q, &b); err != nil || code != 200 {
		return fmt.Errorf("bench: /epoch/1 of the bucket job: status %d, %v: %s", code, err, b.String())
	}
	if err := json.Unmarshal([]byte(b.String()), &info); err != nil {
		return err
	}
	rep.Epoch = info.Buckets
	if st, err := transformStats(ctx, g); err == nil {
		rep.Decoder = st.Decoder
	}
	if rep.Mix != nil {
		if err := bucketMixEpoch(ctx, cfg, g, preset, rep.Mix); err != nil {
			return err
		}
	}
	for round := range cfg.Rounds {
		rep.Load = append(rep.Load, loadAverage())
		modes := []string{"pil", "brand"}
		if cfg.Baseline != "" {
			modes = append(modes, "brand-before")
		}
		if rep.Mix != nil {
			modes = append(modes, "brand-mix")
		}
		for _, mode := range modes {
			args := []string{mode, "--side", strconv.Itoa(cfg.Side), "--budget", strconv.FormatInt(cfg.Budget, 10),
				"--workers", strconv.Itoa(cfg.Workers), "--epoch", strconv.Itoa(round + 1), "--seed", "7", "--warmup", "1"}
			node := py
			if mode == "pil" {
				args = append(args, "--dir", src)
			} else {
				args = append(args, "--url", g.base, "--dataset", "photos")
			}
			if mode == "brand-before" {
				node.env = append(slices.Clip(py.env), "BRAND_BENCH_PYTHONPATH="+cfg.Baseline)
			}
			if mode == "brand-mix" {
				args = append(args, bucketMixArgs(cfg, preset, rep.Mix, round)...)
			}
			row, err := bucketsPass(ctx, node, g, round, mode, args)
			if err != nil {
				return err
			}
			logf(cfg.Log, "round %d, %s: %d images in %d steps, %.1f images/s, trainer %.3f ms an image, gateway %.1f ms an image",
				round, mode, row.Images, row.Steps, row.ImagesPerSec, row.TrainerMsPerImage, row.GatewayMsPerImage)
			rep.Rows = append(rep.Rows, row)
		}
	}
	if cfg.CheckWorld > 0 {
		var c BucketsCheck
		if err := py.run(ctx, &c, "check", "--dir", src, "--url", g.base, "--dataset", "photos", "--side", strconv.Itoa(cfg.Side),
			"--budget", strconv.FormatInt(cfg.Budget, 10), "--world", strconv.Itoa(cfg.CheckWorld), "--seed", "7"); err != nil {
			return err
		}
		rep.Check = &c
		logf(cfg.Log, "check at world %d: %d of %d files served in %d steps of %d buckets; %d steps of two shapes, %d images in another bucket, share off by at most %.2f steps, fill %.3f",
			c.World, c.Served, c.Files, c.Steps, c.BucketsUsed, c.Mixed, c.Wrong, c.MaxShareDev, c.MeanFill)
	}
	if err := g.stop(10 * time.Second); err != nil {
		return err
	}
	rep.Summary = map[string][3]float64{}
	for _, mode := range []string{"pil", "brand", "brand-before", "brand-mix"} {
		if ms := trainerMs(rep.Rows, mode); len(ms) > 0 {
			rep.Summary[mode] = spread(ms)
		}
	}
	worst := worstRatio(rep.Rows, "brand", "pil")
	rep.Targets = []Target{atMost("trainer CPU per image, brand.Buckets ÷ PIL bucketing in DataLoader workers (worst round)", worst, 0.05)}
	if rep.Epoch != nil {
		rep.Targets = append(rep.Targets, atLeast("mean fill of the budget over the epoch's steps", rep.Epoch.Fill, 0.95))
	}
	if rep.Mix != nil {
		rep.Targets = append(rep.Targets,
			atMost("trainer CPU per image, the bucketed mixture in two stages (brand-mix) ÷ PIL bucketing at --side's buckets (worst round)", worstRatio(rep.Rows, "brand-mix", "pil"), 0.05),
			atMost("trainer CPU per megapixel of the tensors, brand-mix ÷ PIL (worst round)", worstMpxRatio(rep.Rows, "brand-mix", "pil"), 0.05),
			atLeast("mean fill of the budget over the mixture's measured steps (worst round)", worstFill(rep.Rows, "brand-mix"), 0.95))
	}
	if c := rep.Check; c != nil {
		rep.Targets = append(rep.Targets,
			atMost("steps whose ranks had two shapes", float64(c.Mixed), 0),
			atMost("images in another bucket than the files' rule", float64(c.Wrong+c.ServedUnfit), 0),
			atMost("a bucket's count of steps off its share, at any step (steps)", c.MaxShareDev, 1),
			atLeast("mean fill of the budget (the check's epoch)", c.MeanFill, 0.95))
	}
	return nil
}

// writeBucketPhotos writes cfg.Images photos under dir (a class-folder
// tree of 10 classes, a .cls each), photo i of aspect ratio
// bucketsAspects[i mod 24] and a longer side drawn between MinSide and
// MaxSide, and returns their mean size in bytes.
func writeBucketPhotos(dir string, cfg BucketsConfig) (int64, error) {
	_ = os.RemoveAll(dir)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var total int64
	errs := make([]error, runtime.NumCPU())
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < cfg.Images; i += len(errs) {
				a := bucketsAspects[i%len(bucketsAspects)]
				long := cfg.MinSide + (i*7919)%(cfg.MaxSide-cfg.MinSide+1)
				pw, ph := long, long*a[1]/a[0]
				if a[1] > a[0] {
					pw, ph = long*a[0]/a[1], long
				}
				p, err := photos.Sized(78, i, pw, ph, 85)
				key := filepath.Join(dir, fmt.Sprintf("c%d", i%10), fmt.Sprintf("photo_%05d", i))
				if err == nil {
					err = os.MkdirAll(filepath.Dir(key), 0o755)
				}
				if err == nil {
					err = os.WriteFile(key+".jpg", p.JPEG, 0o644)
				}
				if err == nil {
					err = os.WriteFile(key+".cls", []byte(strconv.Itoa(i%10)), 0o644)
				}
				if err != nil {
					errs[w] = err
					return
				}
				mu.Lock()
				total += int64(len(p.JPEG))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	return total / int64(cfg.Images), nil
}

// WriteJSON writes the report as JSON.
func (r *BucketsReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteText writes the report as markdown tables.
func (r *BucketsReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	if len(r.Rows) > 0 {
		fmt.Fprintf(&sb, "%d photo-like JPEGs of %d aspect ratios, longer sides %d–%d px, mean %s; buckets %s, a budget of %d pixels a step; training node: CPU %d (the DataLoader and %d workers); data node: CPU %d (brand serve, decoder %s); %s\n\n",
			r.Images, r.Aspects, r.Sides[0], r.Sides[1], sizeString(r.MeanBytes), r.Buckets, r.Budget, r.TrainerCPU, r.Workers, r.DataCPU, r.Decoder, r.Versions)
		sb.WriteString("| loader | trainer CPU ms per image, median (min–max) |\n| --- | --: |\n")
		for _, m := range []string{"pil", "brand", "brand-before", "brand-mix"} {
			if v, ok := r.Summary[m]; ok {
				fmt.Fprintf(&sb, "| %s | %s |\n", map[string]string{"pil": "(1) PIL bucketing in DataLoader workers", "brand": "(2) brand.Buckets",
					"brand-before": "(2′) brand.Buckets, the baseline tree's client (--baseline-python)",
					"brand-mix":    "(3) brand.Buckets, a bucketed mixture in two stages (--mix)"}[m], spreadString(v, 3))
			}
		}
		sb.WriteString("\nEvery pass:\n\n| round | loader | images | steps | fill | images/s | s | trainer CPU s | trainer ms an image | trainer ms a megapixel | the warm-up pass's trainer CPU s | gateway CPU s | gateway ms an image |\n| --: | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: | --: |\n")
		for _, row := range r.Rows {
			fmt.Fprintf(&sb, "| %d | %s | %d | %d | %.3f | %.1f | %.2f | %.2f | %.3f | %.3f | %.2f | %.2f | %.1f |\n", row.Round, row.Mode, row.Images, row.Steps, row.Fill, row.ImagesPerSec,
				row.Seconds, row.TrainerCPU, row.TrainerMsPerImage, row.TrainerMsPerMpx, row.WarmupCPU, row.GatewayCPU, row.GatewayMsPerImage)
		}
		if r.Mix != nil {
			r.Mix.writeText(&sb)
		}
		if e := r.Epoch; e != nil {
			fmt.Fprintf(&sb, "\nEpoch 1 of the bucket job (/epoch/1): mean fill of the budget %.3f, %d images too small, %d without an image.\n\n| bucket | images | steps | batch size | dropped | fill |\n| --- | --: | --: | --: | --: | --: |\n", e.Fill, e.TooSmall, e.NoImage)
			for _, b := range e.Buckets {
				if b.Samples > 0 {
					fmt.Fprintf(&sb, "| %s | %d | %d | %d | %d | %.3f |\n", b.Shape, b.Samples, b.Batches, b.BatchSize, b.Dropped, b.Fill)
				}
			}
		}
		if c := r.Check; c != nil {
			fmt.Fprintf(&sb, "\nAn epoch read at world %d held to the files (each file's bucket computed from its header with fractions by python/bench/buckets.py): %d files, %d fit a bucket, %d served once each in %d steps of %d buckets; %d steps of two shapes; %d images in another bucket; %d served unfit; a bucket's steps off its share by at most %.3f; mean fill %.3f; %d dropped, %d too small.\n",
				c.World, c.Files, c.Fit, c.Served, c.Steps, c.BucketsUsed, c.Mixed, c.Wrong, c.ServedUnfit, c.MaxShareDev, c.MeanFill, c.Dropped, c.TooSmall)
		}
	}
	if c := r.Clips; c != nil {
		c.writeText(&sb)
	}
	fmt.Fprintf(&sb, "\nEach loader reads the epoch once unmeasured (its persistent workers started) and once measured; the trainer's CPU is its process tree's over the measured pass (its live workers' included), the gateway's over the same pass, from /proc. Load average before each round: %s. %d CPUs.\n\nTargets:\n", joinFloats(r.Load, 1), r.Machine.CPUs)
	for _, t := range r.Targets {
		fmt.Fprintf(&sb, "  %-4s %s: %.3f (want %s)\n", t.Status, t.Name, t.Ratio, t.Want)
	}
	fmt.Fprintf(&sb, "\n%s; %.0f s\n", r.Command, r.Seconds)
	_, err := io.WriteString(w, sb.String())
	return err
}
