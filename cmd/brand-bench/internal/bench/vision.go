package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/tokenize"
)

// The vision benchmark (brand-bench vision): issue 70's figures for
// image-text sequences (seq= with vision=) and the gateway's tokenizers,
// side by side in one run on one machine.
//
//   - The data: visionSet's WebDataset shards of image-text samples
//     (visiondata.go), put in MinIO and indexed with `brand index
//     --tokenizer MODEL` as a user does, MODEL a SentencePiece model
//     (package tokenize's committed golden-bpe.model, 1,000 pieces).
//   - Fill. One `brand serve` reads the vision job's whole epoch at
//     World ranks: every sequence decoded, its pad (pad= an ID past the
//     rule's) counted, its image spans checked against its placeholder
//     IDs; fill is non-pad tokens ÷ tokens as read, beside /epoch/0's.
//   - Vision tokens per rank: in each global batch, each rank's vision
//     tokens (Σ of its sequences' image spans), the busiest over the
//     mean; averaged over the epoch's full global batches and the worst,
//     for the plain cut and, where Balance is given, for balance= — the
//     same epoch, same gateway.
//   - The trainer's CPU per sample (python/bench/vision.py, a process of
//     its own, num_workers=0 so that all of it is the process's
//     time.process_time): brand.Sequences(vision=) over an epoch, against
//     a collator doing the same work on the trainer from the same shards
//     on local disk — decode with PIL, resize to the rule's size
//     (Qwen2-VL's smart resize, bilinear), tokenize with the same model
//     (python3-sentencepiece), expand each placeholder to its image's
//     vision tokens, pack greedily (best fit over a buffer). Its tokens
//     are checked equal to the gateway's.
//   - Tokens per gateway core-second: one Parquet text corpus indexed
//     twice, `--text text --tokenizer` a byte-level BPE tokenizer.json
//     (package tokenize's hf-golden-tokenizer.json, Llama-3-style, 682
//     IDs with its added tokens) and the SentencePiece model; each round
//     a fresh gateway serving both reads one cold epoch of a seq= job of
//     each (every chunk decoded and tokenized once: the cache keeps
//     decoded chunks, so a warm epoch would not tokenize), the order
//     alternating between rounds, its CPU from /proc over each.
//
// Everything shares the machine's cores: the load average is recorded.

// VisionConfig describes a vision benchmark run; zero fields take
// DefaultVisionConfig's values.
type VisionConfig struct {
	Samples   int // image-text samples
	Shards    int // tar shards they are written in
	MinSide   int // an image's shorter side at least, pixels
	MaxSide   int // and its side at most (before the aspect)
	Seq       int // tokens a sequence
	MinPixels int // the rule's min: and max: (Qwen2-VL's smart resize)
	MaxPixels int
	Patch     int
	Merge     int
	MaxImages int `zero:"kept"` // images: a sequence, 0 none
	World     int // ranks of the vision job
	BatchSize int // sequences a rank a step
	Window    int // shuffle window, chunks (shards)
	// Balance is the vision job's balance= for the balanced figure;
	// empty measures the plain cut alone.
	Balance    string `zero:"kept"`
	PackBuffer int    // samples in the Python collator's buffer
	TextDocs   int    // documents of the tokenizers' corpus
	TextRounds int    // fresh gateways each reading both tokenizers' epochs
	Seed       uint64 `zero:"kept"`

	Interpreter string // Python with torch, numpy, PIL and sentencepiece; found when empty
	Harness
}

// DefaultVisionConfig: 4,000 samples in 16 shards, images of 64 to 640
// pixels a side, seq 4,096, Qwen2-VL's rule with at most 256 tokens an
// image and no cap of images a sequence, world 4 × 4 sequences,
// balance=vision beside the plain cut;
// 40,000 documents of text, 3 rounds.
func DefaultVisionConfig() VisionConfig {
	return VisionConfig{Samples: 4000, Shards: 16, MinSide: 64, MaxSide: 640, Seq: 4096, MinPixels: 3136, MaxPixels: 200704,
		Patch: 14, Merge: 2, World: 4, BatchSize: 4, Window: 4, PackBuffer: 1000,
		Balance: "vision", TextDocs: 40000, TextRounds: 3, Seed: 70}
}

// SmallVisionConfig is a run of a few minutes on two shared cores: 1,200
// samples of images up to 448 pixels a side, seq 2,048, 12,000 documents
// of text, 2 rounds.
func SmallVisionConfig() VisionConfig {
	c := DefaultVisionConfig()
	c.Samples, c.Shards, c.MaxSide, c.Seq, c.TextDocs, c.TextRounds = 1200, 8, 448, 2048, 12000, 2
	return c
}

func (c VisionConfig) check() error {
	if err := c.Harness.check(); err != nil {
		return err
	}
	switch {
	case c.Samples < 1 || c.Shards < 1 || c.Shards > c.Samples:
		return fmt.Errorf("%w: %d samples in %d shards", ErrConfig, c.Samples, c.Shards)
	case c.MinSide < c.Patch*c.Merge || c.MaxSide < c.MinSide:
		return fmt.Errorf("%w: image sides %d to %d: at least patch × merge (%d), min ≤ max", ErrConfig, c.MinSide, c.MaxSide, c.Patch*c.Merge)
	case c.World < 1 || c.BatchSize < 1 || c.Seq < 64 || c.TextRounds < 1 || c.TextDocs < 1 || c.PackBuffer < 1:
		return fmt.Errorf("%w: world, batch size, rounds, documents and the buffer at least 1, seq at least 64", ErrConfig)
	}
	return nil
}

// The trainer-side loaders.
const (
	visLoaderBrand   = "brand-sequences"
	visLoaderCollate = "python-collator"
)

var visionLoaderLabels = map[string]string{
	visLoaderBrand:   "Brand: brand.Sequences(vision=) steps, num_workers=0",
	visLoaderCollate: "Python collator on the trainer: tar → PIL decode, resize → sentencepiece → expand → best-fit pack",
}

// Tokenizer kinds.
const (
	tokBPE = "bpe"
	tokSP  = "sentencepiece"
)

// RunVision runs the vision benchmark.
func RunVision(ctx context.Context, cfg VisionConfig) (*VisionReport, error) {
	fillZero(&cfg, DefaultVisionConfig())
	if err := cfg.check(); err != nil {
		return nil, err
	}
	started := time.Now()
	interp, err := findInterpreter(ctx, cfg.Interpreter, "numpy, torch, PIL, sentencepiece", "python3-numpy python3-torch python3-pil python3-sentencepiece")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	script, err := findAbove(filepath.Join("python", "bench", "vision.py"))
	if err != nil {
		return nil, err
	}
	pyDir := filepath.Dir(filepath.Dir(script))
	spModel, err := findAbove(filepath.Join("tokenize", "testdata", "golden-bpe.model"))
	if err != nil {
		return nil, err
	}
	bpeFile, err := findAbove(filepath.Join("tokenize", "testdata", "hf-golden-tokenizer.json"))
	if err != nil {
		return nil, err
	}
	vocab := map[string]int{}
	for kind, path := range map[string]string{tokSP: spModel, tokBPE: bpeFile} {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		m, err := tokenize.Load(b)
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", path, err)
		}
		vocab[kind] = m.VocabSize()
	}
	// The placeholder, start, end and pad: IDs past the model's.
	v := vocab[tokSP]
	rule := fmt.Sprintf("min:%d,max:%d,patch:%d,merge:%d,image:%d,start:%d,end:%d", cfg.MinPixels, cfg.MaxPixels, cfg.Patch, cfg.Merge, v, v+1, v+2)
	if cfg.MaxImages > 0 {
		rule += fmt.Sprintf(",images:%d", cfg.MaxImages)
	}
	rep := &VisionReport{Header: newHeader(started, cfg.Command), Samples: cfg.Samples, Shards: cfg.Shards, Rule: rule, Pad: v + 3,
		Seq: cfg.Seq, World: cfg.World, BatchSize: cfg.BatchSize, TextDocs: cfg.TextDocs,
		Tokenizer: fmt.Sprintf("%s (SentencePiece BPE, %d pieces)", filepath.Base(spModel), v)}
	rep.Load = append(rep.Load, loadAverage())

	srv, err := miniotest.Start(ctx, filepath.Join(cfg.WorkDir, "vision-minio"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	env := gatewayEnv(srv.AccessKey, srv.SecretKey)
	s3flags := []string{"--s3-endpoint", srv.URL(), "--s3-region", "us-east-1"}

	// The image-text shards: written locally (the collator reads them
	// there) and put in MinIO, then indexed with their facts.
	shardDir := filepath.Join(cfg.WorkDir, "vision-shards")
	if err := visionShards(ctx, cfg, srv, shardDir, rep); err != nil {
		return nil, err
	}
	t0 := time.Now()
	out, err := runBrandCmd(ctx, cfg.GatewayBinary, env, append([]string{"index", "--src", "s3://vision/pairs", "--tokenizer", spModel}, s3flags...)...)
	if err != nil {
		return nil, err
	}
	rep.IndexSeconds = time.Since(t0).Seconds()
	logf(cfg.Log, "brand index --tokenizer: %.1f s: %s", rep.IndexSeconds, strings.TrimSpace(lastLines(out, 2)))

	g, err := startGateway(ctx, cfg.GatewayBinary, append([]string{"serve", "--listen", "127.0.0.1:0", "--dataset", "pairs=s3://vision/pairs",
		"--cache-size", strconv.FormatInt(2*(rep.ImageBytes+rep.TextBytes)+(256<<20), 10), "--log-format", "json", "--log-level", "info",
		"--shutdown-timeout", "10s", "--index-poll", "0"}, s3flags...), env, filepath.Join(cfg.WorkDir, "gateway-vision.log"))
	if err != nil {
		return nil, err
	}
	defer g.kill()
	balances := []string{""}
	if cfg.Balance != "" {
		balances = append(balances, cfg.Balance)
	}
	for _, b := range balances {
		rep.Load = append(rep.Load, loadAverage())
		job, err := visionJob(ctx, cfg, g, rule, rep.Pad, b)
		if err != nil {
			return nil, err
		}
		logf(cfg.Log, "vision job%s: %d sequences of %d samples, fill %.4f (gateway %.4f), spans aligned %v; vision tokens a rank, max ÷ mean %.3f (worst %.3f), /plan exact %v; gateway %.0f µs CPU a sample",
			balanceWords(b), job.Sequences, job.Documents, job.Fill, job.GatewayFill, job.SpansAligned, job.RankMaxOverMean, job.RankMaxOverMeanWorst, job.PlanExact, job.GatewayUsPer)
		rep.Jobs = append(rep.Jobs, job)
	}

	rep.Load = append(rep.Load, loadAverage())
	if err := visionTrainers(ctx, cfg, rep, g, interp, pyDir, script, shardDir, spModel); err != nil {
		return nil, err
	}
	if err := g.stop(10 * time.Second); err != nil {
		return nil, err
	}

	rep.Load = append(rep.Load, loadAverage())
	if err := visionTokenizers(ctx, cfg, rep, srv, env, s3flags, map[string]string{tokSP: spModel, tokBPE: bpeFile}, vocab); err != nil {
		return nil, err
	}
	rep.Load = append(rep.Load, loadAverage())
	rep.Targets = rep.targets()
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

func balanceWords(b string) string {
	if b == "" {
		return " (plain cut)"
	}
	return " (balance=" + b + ")"
}

// visionShards writes the shards into dir and MinIO's bucket vision
// (prefix pairs/), two at a time, and counts what they hold.
func visionShards(ctx context.Context, cfg VisionConfig, srv *miniotest.Server, dir string, rep *VisionReport) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := srv.MakeBucket(ctx, "vision"); err != nil {
		return err
	}
	store, err := s3backend.Open(ctx, "s3://vision/pairs", srv.Config())
	if err != nil {
		return err
	}
	set := visionSet{Samples: cfg.Samples, Shards: cfg.Shards, MinSide: cfg.MinSide, MaxSide: cfg.MaxSide, Seed: cfg.Seed}
	var mu sync.Mutex
	var total visionShardStats
	eg, ectx := errgroup.WithContext(ctx)
	eg.SetLimit(2)
	for k := range cfg.Shards {
		eg.Go(func() error {
			b, st, err := set.shard(k)
			if err != nil {
				return err
			}
			name := fmt.Sprintf("%05d.tar", k)
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				return err
			}
			if _, err := store.Put(ectx, name, bytes.NewReader(b), int64(len(b))); err != nil {
				return err
			}
			mu.Lock()
			total.add(st)
			mu.Unlock()
			return nil
		})
	}
	if err := eg.Wait(); err != nil {
		return err
	}
	rep.Kinds, rep.Images, rep.ImageBytes, rep.TextBytes = total.Kinds, total.Images, total.ImageBytes, total.TextBytes
	rep.MeanPixels = ratio(float64(total.Pixels), float64(total.Images))
	logf(cfg.Log, "vision shards: %d samples in %d shards, %d images (mean %.0f pixels, %s), %s of text; kinds %v",
		total.Samples, cfg.Shards, total.Images, rep.MeanPixels, sizeString(total.ImageBytes), sizeString(total.TextBytes), total.Kinds)
	return nil
}

// visionQuery is the vision job's query, without rank.
func visionQuery(cfg VisionConfig, rule string, pad int, balance string) string {
	q := fmt.Sprintf("dataset=pairs&seed=7&window=%d&batch_size=%d&world=%d&seq=%d&pad=%d&vision=%s",
		cfg.Window, cfg.BatchSize, cfg.World, cfg.Seq, pad, rule)
	if balance != "" {
		q += "&balance=" + balance
	}
	return q
}

// visionJob reads a vision job's epoch 0 at every rank and measures it.
func visionJob(ctx context.Context, cfg VisionConfig, g *gatewayProc, rule string, pad int, balance string) (VisionJob, error) {
	q := visionQuery(cfg, rule, pad, balance)
	job := VisionJob{Balance: balance}
	var info struct {
		Samples, Batches int
		Tokens           struct {
			Documents int
			Fill      float64
		}
	}
	if _, err := gatewayJSON(ctx, g, "/epoch/0?"+q, &info); err != nil {
		return job, err
	}
	job.Batches, job.Documents, job.GatewayFill = info.Batches, info.Tokens.Documents, info.Tokens.Fill
	r, err := parseVisionIDs(rule)
	if err != nil {
		return job, err
	}
	chk := visionCheck{image: r.image, start: r.start, end: r.end, pad: int32(pad), aligned: true}
	// Each global batch's ranks read together, World readers at once.
	gw0, t0 := processCPU(g.cmd.Process.Pid), time.Now()
	perRank := make([][]int64, info.Batches)
	for m := range info.Batches {
		perRank[m] = make([]int64, cfg.World)
		var wg sync.WaitGroup
		errs := make([]error, cfg.World)
		samples := make([][]client.Sample, cfg.World)
		for rank := range cfg.World {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var buf strings.Builder
				code, err := g.get(ctx, fmt.Sprintf("/epoch/0/batch/%d?%s&rank=%d", m, q, rank), &buf)
				if err == nil && code != http.StatusOK {
					err = fmt.Errorf("status %d: %s", code, lastLines(buf.String(), 3))
				}
				if err == nil {
					samples[rank], err = client.DecodeTar([]byte(buf.String()))
				}
				errs[rank] = err
			}()
		}
		wg.Wait()
		for rank, err := range errs {
			if err != nil {
				return job, fmt.Errorf("bench: vision batch %d rank %d: %w", m, rank, err)
			}
			for _, s := range samples[rank] {
				n, err := chk.add(s.Files)
				if err != nil {
					return job, fmt.Errorf("bench: vision batch %d rank %d, %s: %w", m, rank, s.Key, err)
				}
				perRank[m][rank] += n
			}
		}
		if m%max(1, info.Batches/4) == 0 {
			logf(cfg.Log, "vision job%s: batch %d of %d", balanceWords(balance), m, info.Batches)
		}
	}
	job.Seconds = time.Since(t0).Seconds()
	job.GatewayCPU = (processCPU(g.cmd.Process.Pid) - gw0).Seconds()
	job.Sequences, job.Images, job.NonPad, job.SpansAligned = chk.sequences, chk.images, chk.nonpad, chk.aligned
	job.Fill = ratio(float64(chk.nonpad), float64(chk.total))
	job.GatewayUsPer = 1e6 * ratio(job.GatewayCPU, float64(job.Documents))
	job.SamplesPerSec = ratio(float64(job.Documents), job.Seconds)
	if job.Sequences != info.Samples {
		return job, fmt.Errorf("bench: the vision epoch read %d sequences; /epoch/0 counts %d", job.Sequences, info.Samples)
	}
	full := info.Samples / (cfg.World * cfg.BatchSize)
	job.RankMaxOverMean, job.RankMaxOverMeanWorst = maxOverMean(perRank[:min(full, len(perRank))])
	job.FullBatches = full

	// /plan's prediction of the same epoch (the first of the planner's
	// two at least), held to what was read.
	var plan struct{ Tokens api.TokenPlan }
	if _, err := gatewayJSON(ctx, g, "/plan?"+q+"&epochs=2", &plan); err != nil {
		return job, err
	}
	if len(plan.Tokens.Epochs) == 0 || plan.Tokens.Epochs[0].Epoch != 0 || plan.Tokens.Epochs[0].Vision == nil {
		return job, fmt.Errorf("bench: /plan of the vision job: %+v, not epoch 0 with its vision figures", plan.Tokens)
	}
	job.Plan = plan.Tokens.Epochs[0]
	pv, near := job.Plan.Vision, func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*max(1, math.Abs(b)) }
	job.PlanExact = job.Plan.Sequences == job.Sequences && job.Plan.Batches == job.Batches && near(job.Plan.Fill, job.Fill) &&
		int64(pv.Images) == job.Images && near(pv.MaxOverMean, job.RankMaxOverMean) && near(pv.MaxOverMeanWorst, job.RankMaxOverMeanWorst)
	return job, nil
}

// maxOverMean is, over batches of per-rank loads, the busiest rank's
// over the ranks' mean: averaged, and the worst. A batch of no load
// counts 1.
func maxOverMean(batches [][]int64) (mean, worst float64) {
	if len(batches) == 0 {
		return 0, 0
	}
	var sum float64
	for _, ranks := range batches {
		var tot, top int64
		for _, n := range ranks {
			tot += n
			top = max(top, n)
		}
		r := 1.0
		if tot > 0 {
			r = float64(top) * float64(len(ranks)) / float64(tot)
		}
		sum += r
		worst = max(worst, r)
	}
	return sum / float64(len(batches)), worst
}

// visionIDs are a rule's placeholder IDs.
type visionIDs struct{ image, start, end int32 }

var ruleIDPattern = regexp.MustCompile(`(?:^|,)(image|start|end):(\d+)`)

// parseVisionIDs reads the image, start and end IDs of a vision= rule
// (start and end -1 where it has none).
func parseVisionIDs(rule string) (visionIDs, error) {
	ids := visionIDs{-1, -1, -1}
	for _, m := range ruleIDPattern.FindAllStringSubmatch(rule, -1) {
		n, err := strconv.ParseInt(m[2], 10, 32)
		if err != nil {
			return ids, err
		}
		*map[string]*int32{"image": &ids.image, "start": &ids.start, "end": &ids.end}[m[1]] = int32(n)
	}
	if ids.image < 0 {
		return ids, fmt.Errorf("bench: vision rule %q names no image ID", rule)
	}
	return ids, nil
}

// visionCheck reads a vision epoch's sequences: their pad, their image
// spans against their placeholder IDs.
type visionCheck struct {
	image, start, end, pad int32
	sequences              int
	images                 int64
	nonpad, total          int64
	aligned                bool
}

// add reads one sequence's members and returns its vision tokens (the
// sum of its image spans).
func (c *visionCheck) add(files map[string][]byte) (int64, error) {
	ids, err := client.Int32s(files[client.InputIDs])
	if err != nil {
		return 0, err
	}
	sp, err := client.ParseNPY(files["image_spans.npy"])
	if err != nil {
		return 0, err
	}
	if sp.DType != "<i4" || len(sp.Shape) != 2 || sp.Shape[1] != 2 || len(sp.Data) != 8*sp.Shape[0] {
		return 0, fmt.Errorf("image_spans.npy of dtype %q and shape %v, not int32 [n, 2]", sp.DType, sp.Shape)
	}
	c.sequences++
	c.total += int64(len(ids))
	n := len(ids)
	for n > 0 && ids[n-1] == c.pad {
		n--
	}
	c.nonpad += int64(n)
	var vision, placeholders int64
	for _, id := range ids[:n] {
		if id == c.image {
			placeholders++
		}
	}
	for k := range sp.Shape[0] {
		start := int(int32(binary.LittleEndian.Uint32(sp.Data[8*k:])))
		l := int(int32(binary.LittleEndian.Uint32(sp.Data[8*k+4:])))
		c.images++
		vision += int64(l)
		if start < 1 || l < 1 || start+l >= n || ids[start-1] != c.start || ids[start+l] != c.end {
			c.aligned = false
			continue
		}
		for _, id := range ids[start : start+l] {
			if id != c.image {
				c.aligned = false
				break
			}
		}
	}
	if vision != placeholders {
		c.aligned = false
	}
	return vision, nil
}

// visionTrainers measures brand.Sequences(vision=) and the Python
// collator, each an epoch's samples, in python/bench/vision.py.
func visionTrainers(ctx context.Context, cfg VisionConfig, rep *VisionReport, g *gatewayProc, interp, pyDir, script, shardDir, spModel string) error {
	want := rep.Jobs[0]
	ids, err := parseVisionIDs(rep.Rule)
	if err != nil {
		return err
	}
	common := []string{"--seq", strconv.Itoa(cfg.Seq), "--batch-size", strconv.Itoa(cfg.BatchSize)}
	runs := []struct {
		loader string
		args   []string
	}{
		{visLoaderBrand, []string{"brand", "--url", g.base, "--dataset", "pairs", "--rule", rep.Rule, "--pad", strconv.Itoa(rep.Pad),
			"--window", strconv.Itoa(cfg.Window), "--epoch", "1"}},
		{visLoaderCollate, []string{"collate", "--shards", shardDir, "--model", spModel,
			"--min-pixels", strconv.Itoa(cfg.MinPixels), "--max-pixels", strconv.Itoa(cfg.MaxPixels),
			"--patch", strconv.Itoa(cfg.Patch), "--merge", strconv.Itoa(cfg.Merge), "--images", strconv.Itoa(cfg.MaxImages),
			"--image-id", strconv.Itoa(int(ids.image)), "--start-id", strconv.Itoa(int(ids.start)), "--end-id", strconv.Itoa(int(ids.end)),
			"--pad", strconv.Itoa(rep.Pad), "--buffer", strconv.Itoa(cfg.PackBuffer)}},
	}
	for _, r := range runs {
		var o struct {
			Samples    int     `json:"samples"`
			Sequences  int     `json:"sequences"`
			Images     int     `json:"images"`
			Tokens     int64   `json:"nonpad_tokens"`
			Seconds    float64 `json:"seconds"`
			CPUSeconds float64 `json:"cpu_seconds"`
		}
		if err := runPyJSON(ctx, interp, pyDir, script, append(r.args, common...), &o); err != nil {
			return err
		}
		if r.loader == visLoaderBrand {
			// The epoch's sequences hold every sample the gateway counted.
			o.Samples = want.Documents
		}
		t := VisionTrainer{Loader: r.loader, Samples: o.Samples, Sequences: o.Sequences, Images: o.Images, Tokens: o.Tokens,
			Seconds: o.Seconds, CPUSeconds: o.CPUSeconds, UsPer: 1e6 * ratio(o.CPUSeconds, float64(o.Samples)),
			Fill:        ratio(float64(o.Tokens), float64(o.Sequences)*float64(cfg.Seq)),
			TokensEqual: o.Tokens == want.NonPad && int64(o.Images) == want.Images}
		rep.Trainer = append(rep.Trainer, t)
		logf(cfg.Log, "trainer %s: %d samples in %d sequences, %.0f µs CPU a sample, fill %.4f, tokens equal to the gateway's %v",
			r.loader, t.Samples, t.Sequences, t.UsPer, t.Fill, t.TokensEqual)
	}
	return nil
}
