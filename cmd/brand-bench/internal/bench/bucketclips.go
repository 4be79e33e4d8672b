package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brandgw/brand/api"
)

// The clip half of the buckets benchmark (--clips N): a tree of short
// MP4s of several aspect ratios and lengths (ffmpeg's testsrc2, H.264
// with B-frames, as the video benchmark writes them), indexed in place
// and served by a gateway built with -tags brand_libav, read each round
// as a text-to-video model's clip buckets (HxWxT) by:
//
//	(1) pyav         the usual way: a map-style Dataset over the files, a
//	                 bucket batch sampler (each video's bucket from its
//	                 size and length, read with PyAV before the pass),
//	                 PyAV's decode of the clip's frames and PIL's resize to
//	                 cover and centre crop in the workers
//	(2) brand-clips  brand.Buckets over the gateway, the same buckets and
//	                 budget
//
// Both read a clip from each video's first frame (clip_start=first), so
// that the two decode the same frames.

// bucketClipSizes are the videos' sizes, width×height: the default
// buckets' five aspect ratios (16:9, 9:16, 4:3, 3:4, 1:1) and three
// between them.
var bucketClipSizes = [][2]int{{432, 240}, {240, 432}, {320, 240}, {240, 320}, {288, 288}, {400, 240}, {256, 320}, {352, 240}}

// bucketClipFrames are the videos' lengths in frames at 25 fps: the
// shortest holds only the default buckets' 9-frame clips.
var bucketClipFrames = []int{12, 25, 50}

// DefaultClipBuckets are the clip half's buckets: five aspect ratios at
// 17 and at 9 frames, about a quarter of video-480's sides, so that a
// data node's core decodes an epoch in minutes.
const DefaultClipBuckets = "240x432x17,432x240x17,240x320x17,320x240x17,288x288x17,240x432x9,432x240x9,240x320x9,320x240x9,288x288x9"

// bucketClipVideo is video i of the tree: its size and frames.
func bucketClipVideo(i int) (w, h, frames int) {
	s := bucketClipSizes[i%len(bucketClipSizes)]
	return s[0], s[1], bucketClipFrames[(i/len(bucketClipSizes))%len(bucketClipFrames)]
}

// BucketsClipsReport is the clip half of the report.
type BucketsClipsReport struct {
	Videos    int                   `json:"videos"`
	Sizes     [][2]int              `json:"sizes_wh"`
	Frames    []int                 `json:"frames"`
	Bytes     int64                 `json:"bytes"`
	Buckets   string                `json:"buckets"`
	Budget    int64                 `json:"budget_pixels"`
	Epoch     *api.BucketsInfo      `json:"epoch"`
	Rows      []BucketsRow          `json:"rows"` // Images counts clips
	Summary   map[string][3]float64 `json:"trainer_ms_per_clip"`
	Gateway   [3]float64            `json:"gateway_ms_per_clip"`
	WorstRate float64               `json:"trainer_ratio_worst_round"` // brand-clips ÷ pyav
}

// runBucketClips runs the clip half on py's core and the data node's.
func runBucketClips(ctx context.Context, cfg BucketsConfig, py trainerNode) (*BucketsClipsReport, error) {
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		return nil, fmt.Errorf("bench: buckets --clips writes its videos with ffmpeg (scripts/ensure-ffmpeg.sh): %w", err)
	}
	rep := &BucketsClipsReport{Videos: cfg.Clips, Sizes: bucketClipSizes, Frames: bucketClipFrames, Buckets: cfg.ClipBuckets, Budget: cfg.ClipBudget}
	src := filepath.Join(cfg.WorkDir, "clips-src")
	if rep.Bytes, err = writeBucketClips(ctx, ffmpeg, src, cfg.Clips); err != nil {
		return nil, err
	}
	store := filepath.Join(cfg.WorkDir, "clips-index")
	_ = os.RemoveAll(store)
	if out, err := exec.CommandContext(ctx, cfg.GatewayBinary, "index", "--src", src, "--dst", store, "--chunk-size", "4KiB").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bench: brand index of the clips: %w\n%s", err, lastLines(string(out), 20))
	}
	logf(cfg.Log, "clips: %d videos of %d sizes and %d lengths (%s), indexed in place", cfg.Clips, len(bucketClipSizes), len(bucketClipFrames), sizeString(rep.Bytes))
	args := []string{"-c", strconv.Itoa(cfg.DataCPU), cfg.GatewayBinary, "serve", "--listen", "127.0.0.1:0", "--dataset", "clips=" + store,
		"--cache-size", strconv.FormatInt(4*rep.Bytes+(64<<20), 10), "--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s"}
	g, err := startGateway(ctx, py.taskset, args, nil, filepath.Join(cfg.WorkDir, "gateway-clips.log"))
	if err != nil {
		return nil, err
	}
	defer g.kill()
	q := fmt.Sprintf("dataset=clips&seed=7&buckets=%s&budget=%d&clip_start=first", cfg.ClipBuckets, cfg.ClipBudget)
	var info api.EpochInfo
	var b strings.Builder
	if code, err := g.get(ctx, "/epoch/1?"+q, &b); err != nil || code != 200 {
		return nil, fmt.Errorf("bench: /epoch/1 of the clip bucket job: status %d, %v: %s (a gateway built without -tags brand_libav decodes no video)", code, err, b.String())
	}
	if err := json.Unmarshal([]byte(b.String()), &info); err != nil {
		return nil, err
	}
	rep.Epoch = info.Buckets
	var gwms []float64
	for round := range cfg.Rounds {
		for _, mode := range []string{"pyav", "brand-clips"} {
			args := []string{mode, "--clip-buckets", cfg.ClipBuckets, "--budget", strconv.FormatInt(cfg.ClipBudget, 10),
				"--workers", strconv.Itoa(cfg.Workers), "--epoch", strconv.Itoa(round + 1), "--seed", "7", "--warmup", "1"}
			if mode == "pyav" {
				args = append(args, "--dir", src)
			} else {
				args = append(args, "--url", g.base, "--dataset", "clips")
			}
			row, err := bucketsPass(ctx, py, g, round, mode, args)
			if err != nil {
				return nil, err
			}
			logf(cfg.Log, "round %d, %s: %d clips in %d steps, %.1f clips/s, trainer %.3f ms a clip, gateway %.1f ms a clip",
				round, mode, row.Images, row.Steps, row.ImagesPerSec, row.TrainerMsPerImage, row.GatewayMsPerImage)
			if mode != "pyav" {
				gwms = append(gwms, row.GatewayMsPerImage)
			}
			rep.Rows = append(rep.Rows, row)
		}
	}
	if err := g.stop(10 * time.Second); err != nil {
		return nil, err
	}
	rep.Summary = map[string][3]float64{}
	for _, mode := range []string{"pyav", "brand-clips"} {
		rep.Summary[mode] = spread(trainerMs(rep.Rows, mode))
	}
	rep.Gateway = spread(gwms)
	rep.WorstRate = worstRatio(rep.Rows, "brand-clips", "pyav")
	return rep, nil
}

// bucketsPass runs one pass of python/bench/buckets.py's mode with args
// and measures the gateway's CPU around it.
func bucketsPass(ctx context.Context, py trainerNode, g *gatewayProc, round int, mode string, args []string) (BucketsRow, error) {
	gw0 := processCPU(g.cmd.Process.Pid)
	var out struct {
		Images     int     `json:"images"`
		Steps      int     `json:"steps"`
		Pixels     int64   `json:"pixels"`
		Fill       float64 `json:"fill"`
		Seconds    float64 `json:"seconds"`
		CPUSeconds float64 `json:"cpu_seconds"`
		Warmup     float64 `json:"warmup_cpu_seconds"`
	}
	if err := py.run(ctx, &out, args...); err != nil {
		return BucketsRow{}, err
	}
	gw := (processCPU(g.cmd.Process.Pid) - gw0).Seconds()
	if out.Images == 0 {
		return BucketsRow{}, fmt.Errorf("bench: %s read no sample", mode)
	}
	n := float64(out.Images)
	row := BucketsRow{Round: round, Mode: mode, Images: out.Images, Steps: out.Steps, Pixels: out.Pixels, Fill: out.Fill, Seconds: out.Seconds,
		ImagesPerSec: n / out.Seconds, TrainerCPU: out.CPUSeconds, TrainerMsPerImage: 1e3 * out.CPUSeconds / n,
		TrainerMsPerMpx: 1e9 * out.CPUSeconds / float64(max(out.Pixels, 1)), WarmupCPU: out.Warmup}
	if mode != "pil" && mode != "pyav" {
		// The gateway served the epoch twice: the warm-up pass and the
		// measured one.
		row.GatewayCPU, row.GatewayMsPerImage = gw, 1e3*gw/(2*n)
	}
	return row, nil
}

// trainerMs is the trainer's ms a sample of mode's rows.
func trainerMs(rows []BucketsRow, mode string) []float64 {
	var ms []float64
	for _, r := range rows {
		if r.Mode == mode {
			ms = append(ms, r.TrainerMsPerImage)
		}
	}
	return ms
}

// worstRatio is the largest, over the rounds, of mode's trainer ms a
// sample over base's in the same round.
func worstRatio(rows []BucketsRow, mode, base string) float64 {
	var worst float64
	for _, r := range rows {
		if r.Mode != mode {
			continue
		}
		for _, p := range rows {
			if p.Round == r.Round && p.Mode == base {
				worst = max(worst, ratio(r.TrainerMsPerImage, p.TrainerMsPerImage))
			}
		}
	}
	return worst
}

// worstMpxRatio is worstRatio a megapixel of the tensors.
func worstMpxRatio(rows []BucketsRow, mode, base string) float64 {
	var worst float64
	for _, r := range rows {
		for _, p := range rows {
			if r.Mode == mode && p.Round == r.Round && p.Mode == base {
				worst = max(worst, ratio(r.TrainerMsPerMpx, p.TrainerMsPerMpx))
			}
		}
	}
	return worst
}

// worstFill is the least mean fill of mode's passes.
func worstFill(rows []BucketsRow, mode string) float64 {
	worst := -1.0
	for _, r := range rows {
		if r.Mode == mode && (worst < 0 || r.Fill < worst) {
			worst = r.Fill
		}
	}
	return max(worst, 0)
}

// writeBucketClips writes n videos under dir in class folders (bucketClipVideo's
// sizes and lengths, testsrc2 from a different start each, so that they
// differ) and returns their bytes.
func writeBucketClips(ctx context.Context, ffmpeg, dir string, n int) (int64, error) {
	_ = os.RemoveAll(dir)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int64
		first error
	)
	next := make(chan int)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				w, h, frames := bucketClipVideo(i)
				path := filepath.Join(dir, fmt.Sprintf("c%d", i%4), fmt.Sprintf("v%04d.mp4", i))
				err := os.MkdirAll(filepath.Dir(path), 0o755)
				if err == nil {
					cmd := exec.CommandContext(ctx, ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi", "-i",
						fmt.Sprintf("testsrc2=size=%dx%d:rate=25", w, h), "-vf", fmt.Sprintf("trim=start_frame=%d:end_frame=%d,setpts=PTS-STARTPTS", 7*i, 7*i+frames),
						"-c:v", "libx264", "-preset", "veryfast", "-bf", "2", "-g", "25", "-keyint_min", "25", "-sc_threshold", "0", "-pix_fmt", "yuv420p",
						"-threads", "1", "-map_metadata", "-1", "-fflags", "+bitexact", path)
					if out, e := cmd.CombinedOutput(); e != nil {
						err = fmt.Errorf("bench: ffmpeg: %w\n%s", e, out)
					}
				}
				var st os.FileInfo
				if err == nil {
					st, err = os.Stat(path)
				}
				mu.Lock()
				if err != nil && first == nil {
					first = err
				} else if err == nil {
					total += st.Size()
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return total, first
}

// writeText writes the clip half as markdown tables.
func (c *BucketsClipsReport) writeText(sb *strings.Builder) {
	fmt.Fprintf(sb, "\nClips: %d H.264 videos (%d sizes from %dx%d to %dx%d, %v frames at 25 fps; %s in all), buckets %s, a budget of %d pixels a step, clip_start=first.\n\n",
		c.Videos, len(c.Sizes), c.Sizes[0][0], c.Sizes[0][1], c.Sizes[1][0], c.Sizes[1][1], c.Frames, sizeString(c.Bytes), c.Buckets, c.Budget)
	sb.WriteString("| loader | trainer CPU ms per clip, median (min–max) |\n| --- | --: |\n")
	for _, m := range []string{"pyav", "brand-clips"} {
		fmt.Fprintf(sb, "| %s | %s |\n", map[string]string{"pyav": "(1) PyAV + PIL bucketing in DataLoader workers", "brand-clips": "(2) brand.Buckets (clip buckets)"}[m], spreadString(c.Summary[m], 3))
	}
	fmt.Fprintf(sb, "\nThe trainer's CPU a clip, brand.Buckets ÷ PyAV + PIL: %.4f (worst round); the gateway's CPU a clip %s ms.\n", c.WorstRate, spreadString(c.Gateway, 1))
	sb.WriteString("\n| round | loader | clips | steps | clips/s | s | trainer CPU s | trainer ms a clip | the warm-up pass's trainer CPU s | gateway CPU s | gateway ms a clip |\n| --: | --- | --: | --: | --: | --: | --: | --: | --: | --: | --: |\n")
	for _, row := range c.Rows {
		fmt.Fprintf(sb, "| %d | %s | %d | %d | %.1f | %.2f | %.2f | %.3f | %.2f | %.2f | %.1f |\n", row.Round, row.Mode, row.Images, row.Steps, row.ImagesPerSec,
			row.Seconds, row.TrainerCPU, row.TrainerMsPerImage, row.WarmupCPU, row.GatewayCPU, row.GatewayMsPerImage)
	}
	if e := c.Epoch; e != nil {
		fmt.Fprintf(sb, "\nEpoch 1 of the clip bucket job (/epoch/1): mean fill of the budget %.3f, %d videos too small, %d too short.\n\n| bucket | clips | steps | batch size | dropped | fill |\n| --- | --: | --: | --: | --: | --: |\n", e.Fill, e.TooSmall, e.TooShort)
		for _, b := range e.Buckets {
			if b.Samples > 0 {
				fmt.Fprintf(sb, "| %s | %d | %d | %d | %d | %.3f |\n", b.Shape, b.Samples, b.Batches, b.BatchSize, b.Dropped, b.Fill)
			}
		}
	}
}
