package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cmd/brand-bench/internal/chart"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// The tensors benchmark (brand-bench tensors): issue 34's question — what
// a training node's cores buy when the data node decodes and augments the
// images — on one machine split in two with CPU affinity, a training node
// (the DataLoader and its workers, on TrainerCPU) and a data node (the
// gateway and MinIO, on DataCPU). Photo-like JPEGs of ImageNet-like sizes
// (internal/gen/photos) are packed into chunks in MinIO, and stored there as
// objects of their own too. Each round runs, one after another:
//
//	(1) s3-pil         a DataLoader over a map-style Dataset doing a boto3
//	                   GET per image, with torchvision's standard training
//	                   transform (decode, RandomResizedCrop(224),
//	                   RandomHorizontalFlip, ToTensor) in its workers
//	(2) brand-pil      the same DataLoader and transform over
//	                   BrandDataset's bytes
//	(3) brand-tensors  BrandDataset with the gateway's imagenet-train; the
//	                   trainer only collates (brand.torch.collate_tensors)
//	(3′) the same with num_workers=0 (ZeroWorkers)
//
// and Pillow alone on the training node's core, over the same JPEGs: the
// CPU per image of the gateway's work (to a uint8 tensor) and of (1)'s.
// Every loader is python/bench/tensors.py, a process of its own started
// under taskset; its CPU is its process tree's (the workers, reaped,
// included) over the pass, from /proc. The gateway's and MinIO's CPU is
// read from /proc around each pass.

// TensorsConfig describes a tensors benchmark run. Zero fields take
// DefaultTensorsConfig's values.
type TensorsConfig struct {
	Images    int // photos in the dataset; every pass reads them all
	Rounds    int // alternations of the configurations
	Workers   int `zero:"kept"` // DataLoader workers of (1), (2) and (3)
	BatchSize int
	// ZeroWorkers adds (3′): (3) with num_workers=0.
	ZeroWorkers bool `zero:"kept"`
	// TrainerCPU and DataCPU are the cores of the training node (the
	// loaders) and of the data node (the gateway and MinIO).
	TrainerCPU, DataCPU int    `zero:"kept"`
	Pipeline            string // the gateway's pipeline of (3)

	Interpreter, Script string // tensors.py and a Python with torch, torchvision, boto3 and PIL; found when empty
	Harness
}

// DefaultTensorsConfig: 3,000 photos, three rounds, 2 workers, batch 64,
// the training node on core 0 and the data node on core 1.
func DefaultTensorsConfig() TensorsConfig {
	return TensorsConfig{Images: 3000, Rounds: 3, Workers: 2, BatchSize: 64, ZeroWorkers: true, TrainerCPU: 0, DataCPU: 1,
		Pipeline: "imagenet-train"}
}

// The configurations of a round.
const (
	tensorsS3       = "s3-pil"
	tensorsBytes    = "brand-pil"
	tensorsTensors  = "brand-tensors"
	tensorsTensors0 = "brand-tensors-0"
)

// tensorsShort are the chart's labels.
var tensorsShort = map[string]string{
	tensorsS3:       "(1) boto3 GET + torchvision",
	tensorsBytes:    "(2) BrandDataset bytes + torchvision",
	tensorsTensors:  "(3) transform=imagenet-train",
	tensorsTensors0: "(3′) the same, 0 workers",
}

var tensorsLabels = map[string]string{
	tensorsS3:       "(1) DataLoader, boto3 GET per image, torchvision transform",
	tensorsBytes:    "(2) BrandDataset bytes, torchvision transform",
	tensorsTensors:  "(3) BrandDataset, transform=imagenet-train, collate only",
	tensorsTensors0: "(3′) the same, num_workers=0",
}

// TensorsReport is the benchmark's result: tensors.json.
type TensorsReport struct {
	Header
	Images     int            `json:"images"`
	MeanBytes  int64          `json:"mean_bytes"`
	Bytes      int64          `json:"dataset_bytes"`
	Chunks     int            `json:"chunks"`
	Workers    int            `json:"workers"`
	BatchSize  int            `json:"batch_size"`
	TrainerCPU int            `json:"trainer_cpu"`
	DataCPU    int            `json:"data_cpu"`
	Pipeline   string         `json:"pipeline"`
	Decoder    string         `json:"decoder"` // the gateway's JPEG decoder (/stats)
	Python     string         `json:"python"`
	Versions   string         `json:"versions"` // torch, torchvision, Pillow, boto3
	Rows       []TensorsRow   `json:"rows"`
	PIL        []TensorsPIL   `json:"pil"`
	Targets    []Target       `json:"targets"`
	Load       []float64      `json:"load_average"` // the machine's 1-minute load average before each round
	Seconds    float64        `json:"seconds"`
	Summary    []TensorsTotal `json:"summary"`
}

// TensorsRow is one pass of a loader over every image.
type TensorsRow struct {
	Round        int     `json:"round"`
	Config       string  `json:"config"`
	Workers      int     `json:"workers"`
	Images       int     `json:"images"`
	Seconds      float64 `json:"seconds"`
	ImagesPerSec float64 `json:"images_per_s"`
	// TrainerCPU is the loader's process tree's user and system CPU over
	// the pass; TrainerMsPerImage that per image, and
	// ImagesPerTrainerCoreSec its inverse: what a training node's core
	// buys.
	TrainerCPU              float64 `json:"trainer_cpu_s"`
	TrainerMsPerImage       float64 `json:"trainer_ms_per_image"`
	ImagesPerTrainerCoreSec float64 `json:"images_per_trainer_core_s"`
	GatewayCPU              float64 `json:"gateway_cpu_s"`
	GatewayMsPerImage       float64 `json:"gateway_ms_per_image"`
	// TransformMsPerImage is the gateway's transform stage alone (its
	// /stats figures over the pass): decoding, resampling, the tensor.
	TransformMsPerImage float64 `json:"transform_ms_per_image,omitempty"`
	StoreCPU            float64 `json:"minio_cpu_s"`
}

// TensorsPIL is Pillow's CPU per image in a round, on the training node's
// core: to a uint8 CHW tensor (the gateway's work) and to a float tensor
// (ToTensor: (1)'s and (2)'s transform).
type TensorsPIL struct {
	Round       int     `json:"round"`
	Images      int     `json:"images"`
	Uint8Ms     float64 `json:"uint8_ms_per_image"`
	FloatMs     float64 `json:"float_ms_per_image"`
	GatewayMs   float64 `json:"gateway_ms_per_image"` // (3)'s in the same round
	GatewayRate float64 `json:"gateway_over_pil"`
}

// TensorsTotal is one configuration over the rounds: medians, and the
// range.
type TensorsTotal struct {
	Config                  string     `json:"config"`
	ImagesPerSec            [3]float64 `json:"images_per_s"` // median, min, max
	TrainerMsPerImage       [3]float64 `json:"trainer_ms_per_image"`
	ImagesPerTrainerCoreSec [3]float64 `json:"images_per_trainer_core_s"`
	GatewayMsPerImage       [3]float64 `json:"gateway_ms_per_image"`
}

// findTensorsPython returns a Python that runs tensors.py, and the script.
func (c *TensorsConfig) findTensorsPython(ctx context.Context) (interp, script string, err error) {
	return findScript(ctx, "tensors.py", c.Script, c.Interpreter, tensorsModules, tensorsPackages)
}

// What tensors.py imports, and the Debian packages that hold it.
const (
	tensorsModules  = "torch, torchvision, boto3, PIL, numpy"
	tensorsPackages = "python3-torchvision python3-boto3 python3-pil"
)

// findAbove returns rel under the working directory or the nearest of its
// parents that has it.
func findAbove(rel string) (string, error) {
	dir, _ := os.Getwd()
	for dir != "" {
		p := filepath.Join(dir, rel)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return "", fmt.Errorf("%s not found above the working directory (run from the repository)", rel)
}

// RunTensors runs the tensors benchmark.
func RunTensors(ctx context.Context, cfg TensorsConfig) (*TensorsReport, error) {
	fillZero(&cfg, DefaultTensorsConfig())
	if err := cfg.check(); err != nil {
		return nil, err
	}
	py, err := newTrainerNode(ctx, "tensors", cfg.TrainerCPU, cfg.DataCPU, cfg.Script, cfg.Interpreter, tensorsModules, tensorsPackages)
	if err != nil {
		return nil, err
	}
	started := time.Now()
	rep := &TensorsReport{Header: newHeader(started, cfg.Command),
		Images: cfg.Images, Workers: cfg.Workers, BatchSize: cfg.BatchSize, TrainerCPU: cfg.TrainerCPU, DataCPU: cfg.DataCPU,
		Pipeline: cfg.Pipeline, Python: py.interp,
		Versions: py.versions(ctx, "import torch, torchvision, PIL, boto3; print('torch', torch.__version__, 'torchvision', torchvision.__version__, 'Pillow', PIL.__version__, 'boto3', boto3.__version__)")}

	srv, err := miniotest.Start(ctx, filepath.Join(cfg.WorkDir, "tensors-minio"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	if err := pinProcess(srv.Pid(), cfg.DataCPU); err != nil {
		return nil, err
	}
	const bucket = "tensors"
	if err := srv.MakeBucket(ctx, bucket); err != nil {
		return nil, err
	}
	src := filepath.Join(cfg.WorkDir, "tensors-src")
	keys, err := writePhotos(src, cfg.Images)
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(src)
	store, err := s3backend.Open(ctx, "s3://"+bucket+"/packed", srv.Config())
	if err != nil {
		return nil, err
	}
	res, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: 16 << 20, Shuffle: true, Seed: 34, Parallel: 2, Name: "photos", Overwrite: true})
	if err != nil {
		return nil, err
	}
	rep.Bytes, rep.Chunks = res.Index.TotalBytes(), res.Index.NumChunks()
	objects, err := s3backend.Open(ctx, "s3://"+bucket+"/objects", srv.Config())
	if err != nil {
		return nil, err
	}
	var keyList strings.Builder
	var jpegBytes int64
	for _, k := range keys {
		b, err := os.ReadFile(filepath.Join(src, k+".jpg"))
		if err != nil {
			return nil, err
		}
		jpegBytes += int64(len(b))
		if _, err := objects.Put(ctx, k+".jpg", bytes.NewReader(b), int64(len(b))); err != nil {
			return nil, err
		}
		keyList.WriteString("objects/" + k + ".jpg\n")
	}
	rep.MeanBytes = jpegBytes / int64(len(keys))
	keysFile := filepath.Join(cfg.WorkDir, "tensors-keys.txt")
	if err := os.WriteFile(keysFile, []byte(keyList.String()), 0o644); err != nil {
		return nil, err
	}
	logf(cfg.Log, "dataset: %d photos of mean %s (%s in %d chunks), and as %d objects", len(keys), sizeString(rep.MeanBytes), sizeString(rep.Bytes), rep.Chunks, len(keys))

	args := []string{"-c", strconv.Itoa(cfg.DataCPU), cfg.GatewayBinary, "serve", "--listen", "127.0.0.1:0", "--dataset", "photos=s3://" + bucket + "/packed",
		"--s3-endpoint", srv.URL(), "--s3-region", "us-east-1", "--cache-size", strconv.FormatInt(2*rep.Bytes, 10),
		"--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s"}
	g, err := startGateway(ctx, py.taskset, args, gatewayEnv(srv.AccessKey, srv.SecretKey), filepath.Join(cfg.WorkDir, "gateway-tensors.log"))
	if err != nil {
		return nil, err
	}
	defer g.kill()
	// The data node's cache holds the dataset before anything is timed.
	for m := range (cfg.Images + 255) / 256 {
		if code, err := g.get(ctx, fmt.Sprintf("/epoch/0/batch/%d?batch_size=256", m), io.Discard); err != nil || code != 200 {
			return nil, fmt.Errorf("bench: warming the gateway's cache, batch %d: status %d, %v", m, code, err)
		}
	}
	if st, err := transformStats(ctx, g); err == nil {
		rep.Decoder = st.Decoder
	}
	logf(cfg.Log, "gateway: decoder %s, on CPU %d with MinIO; loaders on CPU %d", rep.Decoder, cfg.DataCPU, cfg.TrainerCPU)

	py.env = append(gatewayEnv(srv.AccessKey, srv.SecretKey), "OMP_NUM_THREADS=1")
	passes := tensorsPasses{trainerNode: py, cfg: cfg}
	configs := []string{tensorsS3, tensorsBytes, tensorsTensors}
	if cfg.ZeroWorkers {
		configs = append(configs, tensorsTensors0)
	}
	for round := range cfg.Rounds {
		rep.Load = append(rep.Load, loadAverage())
		var pil struct {
			Images int     `json:"images"`
			Uint8  float64 `json:"uint8_cpu_ms_per_image"`
			Float  float64 `json:"float_cpu_ms_per_image"`
		}
		if err := py.run(ctx, &pil, "pil", "--dir", src, "--seed", strconv.Itoa(round)); err != nil {
			return nil, err
		}
		prow := TensorsPIL{Round: round, Images: pil.Images, Uint8Ms: pil.Uint8, FloatMs: pil.Float}
		logf(cfg.Log, "round %d, Pillow: %.2f ms per image to uint8, %.2f to float", round, pil.Uint8, pil.Float)
		for _, config := range configs {
			row, err := passes.pass(ctx, g, srv.Pid(), config, round, keysFile, bucket, srv.URL())
			if err != nil {
				return nil, err
			}
			logf(cfg.Log, "round %d, %s: %.0f images/s, trainer %.3f ms per image, gateway %.2f ms per image", round, config, row.ImagesPerSec, row.TrainerMsPerImage, row.GatewayMsPerImage)
			rep.Rows = append(rep.Rows, row)
			if config == tensorsTensors {
				prow.GatewayMs = row.GatewayMsPerImage
				prow.GatewayRate = ratio(row.GatewayMsPerImage, pil.Uint8)
			}
		}
		rep.PIL = append(rep.PIL, prow)
	}
	if err := g.stop(10 * time.Second); err != nil {
		return nil, err
	}
	rep.Summary = rep.summary(configs)
	rep.Targets = rep.targets()
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

// writePhotos writes n photos (internal/gen/photos, seed 1) under dir as a
// class-folder tree of 100 classes, each JPEG with a .cls label, and
// returns their keys in order.
func writePhotos(dir string, n int) ([]string, error) {
	_ = os.RemoveAll(dir)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("c%02d/photo_%05d", i%100, i)
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(keys[i])), 0o755); err != nil {
			return nil, err
		}
	}
	var wg sync.WaitGroup
	errs := make([]error, runtime.NumCPU())
	for w := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += len(errs) {
				p, err := photos.One(1, i)
				if err == nil {
					err = os.WriteFile(filepath.Join(dir, keys[i]+".jpg"), p.JPEG, 0o644)
				}
				if err == nil {
					err = os.WriteFile(filepath.Join(dir, keys[i]+".cls"), []byte(strconv.Itoa(i%100)), 0o644)
				}
				if err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	return keys, errors.Join(errs...)
}

func transformStats(ctx context.Context, g *gatewayProc) (api.TransformStats, error) {
	var b strings.Builder
	code, err := g.get(ctx, "/stats", &b)
	if err == nil && code != 200 {
		err = fmt.Errorf("status %d", code)
	}
	var st struct {
		Transform api.TransformStats `json:"transform"`
	}
	if err == nil {
		err = json.Unmarshal([]byte(b.String()), &st)
	}
	if err != nil {
		return api.TransformStats{}, fmt.Errorf("bench: gateway /stats: %w", err)
	}
	return st.Transform, nil
}

// pipelineCPU is a pipeline's images and CPU seconds in st.
func pipelineCPU(st api.TransformStats, name string) (uint64, float64) {
	for _, p := range st.Pipelines {
		if p.Name == name {
			return p.Images, p.CPUSeconds
		}
	}
	return 0, 0
}

// loadAverage is the machine's 1-minute load average, 0 if unknown.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}

// tensorsPasses runs tensors.py's passes on the training node.
type tensorsPasses struct {
	trainerNode
	cfg TensorsConfig
}

// pass runs one configuration over every image and measures the gateway
// and MinIO around it.
func (py tensorsPasses) pass(ctx context.Context, g *gatewayProc, storePid int, config string, round int, keysFile, bucket, endpoint string) (TensorsRow, error) {
	cfg := py.cfg
	workers := cfg.Workers
	mode := config
	if config == tensorsTensors0 {
		workers, mode = 0, tensorsTensors
	}
	args := []string{mode, "--batch-size", strconv.Itoa(cfg.BatchSize), "--workers", strconv.Itoa(workers),
		"--epoch", strconv.Itoa(round + 1), "--seed", "7"}
	switch mode {
	case tensorsS3:
		args = append(args, "--endpoint", endpoint, "--bucket", bucket, "--keys-file", keysFile)
	default:
		args = append(args, "--url", g.base, "--dataset", "photos", "--transform", cfg.Pipeline)
	}
	st0, err := transformStats(ctx, g)
	if err != nil {
		return TensorsRow{}, err
	}
	gw0, store0 := processCPU(g.cmd.Process.Pid), processCPU(storePid)
	var out struct {
		Images     int     `json:"images"`
		Seconds    float64 `json:"seconds"`
		CPUSeconds float64 `json:"cpu_seconds"`
	}
	if err := py.run(ctx, &out, args...); err != nil {
		return TensorsRow{}, err
	}
	gw, store := (processCPU(g.cmd.Process.Pid) - gw0).Seconds(), (processCPU(storePid) - store0).Seconds()
	st1, err := transformStats(ctx, g)
	if err != nil {
		return TensorsRow{}, err
	}
	if out.Images != cfg.Images {
		return TensorsRow{}, fmt.Errorf("bench: %s read %d images of %d", config, out.Images, cfg.Images)
	}
	n := float64(out.Images)
	row := TensorsRow{Round: round, Config: config, Workers: workers, Images: out.Images, Seconds: out.Seconds,
		ImagesPerSec: n / out.Seconds, TrainerCPU: out.CPUSeconds, TrainerMsPerImage: 1e3 * out.CPUSeconds / n,
		ImagesPerTrainerCoreSec: ratio(n, out.CPUSeconds), StoreCPU: store}
	if mode != tensorsS3 {
		row.GatewayCPU, row.GatewayMsPerImage = gw, 1e3*gw/n
	}
	i0, c0 := pipelineCPU(st0, cfg.Pipeline)
	i1, c1 := pipelineCPU(st1, cfg.Pipeline)
	if i1 > i0 {
		row.TransformMsPerImage = 1e3 * (c1 - c0) / float64(i1-i0)
	}
	return row, nil
}

// summary is each configuration's medians and ranges over the rounds.
func (r *TensorsReport) summary(configs []string) []TensorsTotal {
	var out []TensorsTotal
	for _, c := range configs {
		var ips, ms, core, gw []float64
		for _, row := range r.Rows {
			if row.Config == c {
				ips, ms, core, gw = append(ips, row.ImagesPerSec), append(ms, row.TrainerMsPerImage),
					append(core, row.ImagesPerTrainerCoreSec), append(gw, row.GatewayMsPerImage)
			}
		}
		out = append(out, TensorsTotal{Config: c, ImagesPerSec: spread(ips), TrainerMsPerImage: spread(ms),
			ImagesPerTrainerCoreSec: spread(core), GatewayMsPerImage: spread(gw)})
	}
	return out
}

// spread is the median, minimum and maximum of v.
func spread(v []float64) [3]float64 {
	if len(v) == 0 {
		return [3]float64{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return [3]float64{med, s[0], s[len(s)-1]}
}

// targets are issue 34's, each the worst round's: the trainer's CPU per
// image with the gateway's transform over that with its own, the
// gateway's CPU per transformed image over Pillow's per image, and (3)'s
// images/s over (2)'s.
func (r *TensorsReport) targets() []Target {
	var cpu, rate []float64
	for _, row := range r.Rows {
		if row.Config != tensorsTensors {
			continue
		}
		for _, b := range r.Rows {
			if b.Round == row.Round && b.Config == tensorsBytes {
				cpu = append(cpu, ratio(row.TrainerMsPerImage, b.TrainerMsPerImage))
				rate = append(rate, ratio(row.ImagesPerSec, b.ImagesPerSec))
			}
		}
	}
	var gw []float64
	for _, p := range r.PIL {
		gw = append(gw, p.GatewayRate)
	}
	note := func(v []float64) string { return "rounds: " + joinFloats(v, 3) }
	ts := []Target{
		atMost("trainer CPU per image, (3) ÷ (2)", slices.Max(append(cpu, 0)), 0.10),
		atMost("gateway CPU per transformed image ÷ Pillow's per image (uint8 out)", slices.Max(append(gw, 0)), 1.00),
		atLeast("images/s, (3) ÷ (2)", minOrZero(rate), 1.00),
	}
	ts[0].Note, ts[1].Note, ts[2].Note = note(cpu), note(gw), note(rate)
	return ts
}

func minOrZero(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	return slices.Min(v)
}

// WriteJSON writes the report as JSON.
func (r *TensorsReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteText writes the report as markdown tables.
func (r *TensorsReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d photo-like JPEGs of mean %s (%s in %d chunks); training node: CPU %d (the DataLoader and its workers, batch %d); data node: CPU %d (brand serve, decoder %s, and MinIO); %s\n\n",
		r.Images, sizeString(r.MeanBytes), sizeString(r.Bytes), r.Chunks, r.TrainerCPU, r.BatchSize, r.DataCPU, r.Decoder, r.Versions)
	sb.WriteString("| configuration | workers | images/s | trainer CPU ms per image | images per trainer-core-second | gateway CPU ms per image |\n")
	sb.WriteString("| --- | --: | --: | --: | --: | --: |\n")
	for _, t := range r.Summary {
		workers := r.Workers
		if t.Config == tensorsTensors0 {
			workers = 0
		}
		gw := "—"
		if t.Config != tensorsS3 {
			gw = spreadString(t.GatewayMsPerImage, 2)
		}
		fmt.Fprintf(&sb, "| %s | %d | %s | %s | %s | %s |\n", tensorsLabels[t.Config], workers, spreadString(t.ImagesPerSec, 0),
			spreadString(t.TrainerMsPerImage, 3), spreadString(t.ImagesPerTrainerCoreSec, 0), gw)
	}
	sb.WriteString("\nMedian (min–max) over the rounds.\n\nPillow on the training node's core, per image, beside the gateway's CPU per transformed image in (3):\n\n")
	sb.WriteString("| round | Pillow: decode, RandomResizedCrop(224), flip, to uint8 CHW | the same to float (ToTensor) | gateway, (3) | of which the transform | gateway ÷ Pillow (uint8) |\n| --: | --: | --: | --: | --: | --: |\n")
	for _, p := range r.PIL {
		tr := 0.0
		for _, row := range r.Rows {
			if row.Round == p.Round && row.Config == tensorsTensors {
				tr = row.TransformMsPerImage
			}
		}
		fmt.Fprintf(&sb, "| %d | %.2f ms | %.2f ms | %.2f ms | %.2f ms | %.2f |\n", p.Round, p.Uint8Ms, p.FloatMs, p.GatewayMs, tr, p.GatewayRate)
	}
	sb.WriteString("\nEvery pass:\n\n| round | configuration | images/s | s | trainer CPU s | gateway CPU s | MinIO CPU s |\n| --: | --- | --: | --: | --: | --: | --: |\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&sb, "| %d | %s | %.0f | %.2f | %.2f | %.2f | %.2f |\n", row.Round, row.Config, row.ImagesPerSec, row.Seconds, row.TrainerCPU, row.GatewayCPU, row.StoreCPU)
	}
	fmt.Fprintf(&sb, "\nThe trainer's CPU is its process tree's (the workers, reaped, included) over the pass; the gateway's and MinIO's over the same pass, from /proc. Load average before each round: %s. %d CPUs.\n\nTargets:\n", joinFloats(r.Load, 1), r.Machine.CPUs)
	for _, t := range r.Targets {
		fmt.Fprintf(&sb, "  %-4s %s: %.3f (want %s; %s)\n", t.Status, t.Name, t.Ratio, t.Want, t.Note)
	}
	fmt.Fprintf(&sb, "\n%s; %.0f s\n", r.Command, r.Seconds)
	_, err := io.WriteString(w, sb.String())
	return err
}

// Chart is images per trainer-core-second per configuration (the median
// over the rounds) as a bar chart, images/s in the labels.
func (r *TensorsReport) Chart() (*chart.Chart, error) {
	if len(r.Summary) == 0 {
		return nil, chart.ErrEmpty
	}
	n := len(r.Summary)
	c := &chart.Chart{
		Title:      fmt.Sprintf("What a training node's core buys (%d JPEGs of mean %s, batch %d, one core each)", r.Images, sizeString(r.MeanBytes), r.BatchSize),
		Width:      10 * 72,
		Height:     float64(n)*22 + 1.5*72,
		X:          chart.Axis{Label: "images per trainer-core-second (higher is better); labels: images/s", CommaTicks: true},
		Categories: make([]string, n),
		Horizontal: true,
	}
	vals := make([]float64, n)
	top := 0.0
	for i, t := range r.Summary {
		y := n - 1 - i
		c.Categories[y] = tensorsShort[t.Config]
		vals[y] = t.ImagesPerTrainerCoreSec[0]
		c.Labels = append(c.Labels, chart.Label{X: vals[y], Y: float64(y),
			Text: fmt.Sprintf(" %s per core-s; %s images/s", humanize.Commaf(math.Round(vals[y])), humanize.Commaf(math.Round(t.ImagesPerSec[0])))})
		top = max(top, vals[y])
	}
	c.Bars = []chart.Bars{{Color: colorBlue, Width: 14, Values: vals}}
	c.X.Min, c.X.Max = chart.Bound(0), chart.Bound(1.6*top)
	return c, nil
}

func spreadString(v [3]float64, prec int) string {
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', prec, 64) }
	return fmt.Sprintf("%s (%s–%s)", f(v[0]), f(v[1]), f(v[2]))
}
