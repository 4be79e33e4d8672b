package bench

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video/mp4"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
	tvideo "github.com/brandgw/brand/transform/video"
)

// The video benchmark (brand-bench video): issue 55's question — what a
// training node's core buys when the data node reads only the GOPs a
// clip needs and decodes them — on one machine split in two with CPU
// affinity, as the tensors benchmark splits it: a training node (the
// DataLoader and its workers, on TrainerCPU) and a data node (the gateway
// and MinIO, on DataCPU). Videos written by ffmpeg (H.264 with B-frames, a
// keyframe a second) are put in MinIO and indexed in place with a chunk a
// GOP. Each round reads one epoch of the clip job's clips (clip=,
// stride=: the same clips in every configuration, as the gateway draws
// them), one configuration after another:
//
//	(1) pyav-whole   a DataLoader doing a boto3 GET of the whole MP4 per
//	                 clip, PyAV seeking to the keyframe and decoding to rgb24
//	(2) pyav-ranges  the same reading only the covering GOPs' bytes (ranged
//	                 GETs from its own keyframe index), decoding their packets
//	(3) brand-clips  BrandDataset with the clip job; the gateway, started
//	                 afresh (a cold cache), reads the GOPs and decodes
//
// and, once, the first step of (3) resumed mid-epoch from a state, on a
// gateway started afresh. Every loader is python/bench/video.py, a process
// of its own under taskset; its CPU is its process tree's from /proc,
// and a clip's is that less what starting the pass's DataLoader workers
// took (reported beside it: a fixed cost a pass of few steps cannot
// amortize, which made (3)'s small runs look several times dearer). The gateway's and MinIO's CPU is read from /proc around each pass, the
// store bytes and requests of (1) and (2) counted by their workers and
// of (3) by the gateway (/stats).

// VideoConfig describes a video benchmark run. Zero fields take
// DefaultVideoConfig's values.
type VideoConfig struct {
	Videos, Seconds int    // videos in the dataset, and each one's length
	Size            string // their frames' size, WxH
	Clip, Stride    int    // the clip job
	Rounds          int
	Workers         int `zero:"kept"` // DataLoader workers of every configuration
	BatchSize       int
	// BrandPasses is how many times (3)'s loader reads the epoch, the
	// last pass measured (its trainer CPU; the gateway's is the mean of
	// the passes, the first cold); BrandPersistent keeps its workers
	// across them (persistent_workers=True).
	BrandPasses     int
	BrandPersistent bool
	// TrainerCPU and DataCPU are the cores of the training node and of
	// the data node.
	TrainerCPU, DataCPU int `zero:"kept"`

	Interpreter, Script string // video.py and a Python with torch, av, boto3 and numpy; found when empty
	Harness
}

// DefaultVideoConfig: 24 videos of 10 s at 320×240, clips of 16 frames 2
// apart, two rounds, 2 workers, batch 8, the training node on core 0 and
// the data node on core 1.
func DefaultVideoConfig() VideoConfig {
	return VideoConfig{Videos: 24, Seconds: 10, Size: "320x240", Clip: 16, Stride: 2, Rounds: 2, Workers: 2, BatchSize: 8,
		BrandPasses: 1, TrainerCPU: 0, DataCPU: 1}
}

// The configurations of a round.
const (
	videoWhole  = "pyav-whole"
	videoRanges = "pyav-ranges"
	videoBrand  = "brand-clips"
)

var videoLabels = map[string]string{
	videoWhole:  "(1) DataLoader, boto3 GET of the whole MP4, PyAV seek and decode",
	videoRanges: "(2) DataLoader, ranged GETs of the covering GOPs, PyAV decode",
	videoBrand:  "(3) BrandDataset, clip job, the gateway decodes",
}

// VideoReport is the benchmark's result: video.json.
type VideoReport struct {
	Header
	Videos    int    `json:"videos"`
	Seconds   int    `json:"video_seconds"`
	Size      string `json:"size"`
	Bytes     int64  `json:"dataset_bytes"`
	GOPs      int    `json:"gops"`
	Clip      int    `json:"clip"`
	Stride    int    `json:"stride"`
	Clips     int    `json:"clips_per_epoch"`
	Workers   int    `json:"workers"`
	BatchSize int    `json:"batch_size"`
	// BrandPasses and BrandPersistent: VideoConfig's.
	BrandPasses     int        `json:"brand_passes"`
	BrandPersistent bool       `json:"brand_persistent_workers"`
	TrainerCPU      int        `json:"trainer_cpu"`
	DataCPU         int        `json:"data_cpu"`
	Decoder         string     `json:"decoder"` // the gateway's video decoder
	Python          string     `json:"python"`
	Versions        string     `json:"versions"`
	Rows            []VideoRow `json:"rows"`
	// FirstStepAfterResume is the seconds from a new BrandDataset's
	// load_state_dict (mid-epoch) to its first step, on a gateway started
	// afresh.
	FirstStepAfterResume float64 `json:"first_step_after_resume_s"`
	// ResumeState is the part of it until load_state_dict returned.
	ResumeState float64      `json:"resume_state_s"`
	Targets     []Target     `json:"targets"`
	Load        []float64    `json:"load_average"`
	Total       float64      `json:"seconds"`
	Summary     []VideoTotal `json:"summary"`
}

// VideoRow is one pass of a loader over an epoch's clips.
type VideoRow struct {
	Round       int     `json:"round"`
	Config      string  `json:"config"`
	Clips       int     `json:"clips"`
	Seconds     float64 `json:"seconds"`
	ClipsPerSec float64 `json:"clips_per_s"`
	// TrainerMsPerClip is the loader's process tree's CPU a clip, less
	// what starting its workers took (video.py's startup_cpu_seconds: a
	// fixed cost of a pass, which a small run's few steps cannot
	// amortize); TrainerStartMs is that cost, and TrainerMsPerClipWithStart
	// the CPU a clip with it. GatewayMsPerClip is the gateway's (3).
	TrainerMsPerClip          float64 `json:"trainer_ms_per_clip"`
	TrainerMsPerClipWithStart float64 `json:"trainer_ms_per_clip_with_start"`
	TrainerStartMs            float64 `json:"trainer_start_ms"`
	GatewayMsPerClip          float64 `json:"gateway_ms_per_clip,omitempty"`
	// StoreBytesPerClip are the bytes read from the store a clip, and
	// OverCovering those over the bytes of the GOPs the clips need;
	// RequestsPerClip the store's GETs a clip.
	StoreBytesPerClip float64 `json:"store_bytes_per_clip"`
	OverCovering      float64 `json:"store_over_covering"`
	RequestsPerClip   float64 `json:"requests_per_clip"`
	StoreCPU          float64 `json:"minio_cpu_s"`
}

// VideoTotal is one configuration over the rounds: medians.
type VideoTotal struct {
	Config            string  `json:"config"`
	ClipsPerSec       float64 `json:"clips_per_s"`
	TrainerMsPerClip  float64 `json:"trainer_ms_per_clip"`
	TrainerWithStart  float64 `json:"trainer_ms_per_clip_with_start"`
	GatewayMsPerClip  float64 `json:"gateway_ms_per_clip"`
	StoreBytesPerClip float64 `json:"store_bytes_per_clip"`
	OverCovering      float64 `json:"store_over_covering"`
	RequestsPerClip   float64 `json:"requests_per_clip"`
}

// videoSource is one video of the dataset: its key and its index.
type videoSource struct {
	key   string
	label int
	track mp4.Track
}

// RunVideo runs the video benchmark.
func RunVideo(ctx context.Context, cfg VideoConfig) (*VideoReport, error) {
	fillZero(&cfg, DefaultVideoConfig())
	if err := cfg.check(); err != nil {
		return nil, err
	}
	py, err := newTrainerNode(ctx, "video", cfg.TrainerCPU, cfg.DataCPU, cfg.Script, cfg.Interpreter, "torch, av, boto3, numpy", "python3-torch python3-av python3-boto3 python3-numpy")
	if err != nil {
		return nil, err
	}
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		return nil, fmt.Errorf("bench: video writes its videos with ffmpeg (scripts/ensure-ffmpeg.sh): %w", err)
	}
	version, err := exec.CommandContext(ctx, cfg.GatewayBinary, "version").Output()
	_, decoder, _ := strings.Cut(string(version), "Video decoder: ")
	decoder, _, _ = strings.Cut(decoder, "\n")
	if err != nil || !strings.HasPrefix(decoder, "libavcodec") {
		return nil, fmt.Errorf("bench: %s decodes no video (%v): build it with scripts/install-libav.sh && go build -tags brand_libav ./cmd/brand (scripts/bench.sh video does)", cfg.GatewayBinary, err)
	}
	started := time.Now()
	rep := &VideoReport{Header: newHeader(started, cfg.Command), Videos: cfg.Videos,
		Seconds: cfg.Seconds, Size: cfg.Size, Clip: cfg.Clip, Stride: cfg.Stride, Workers: cfg.Workers, BatchSize: cfg.BatchSize,
		BrandPasses: cfg.BrandPasses, BrandPersistent: cfg.BrandPersistent, TrainerCPU: cfg.TrainerCPU, DataCPU: cfg.DataCPU, Python: py.interp, Decoder: decoder,
		Versions: py.versions(ctx, "import torch, av, boto3, numpy; print('torch', torch.__version__, 'PyAV', av.__version__, 'boto3', boto3.__version__, 'numpy', numpy.__version__)")}

	srv, err := miniotest.Start(ctx, filepath.Join(cfg.WorkDir, "video-minio"))
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	if err := pinProcess(srv.Pid(), cfg.DataCPU); err != nil {
		return nil, err
	}
	const bucket = "video"
	if err := srv.MakeBucket(ctx, bucket); err != nil {
		return nil, err
	}
	store, err := s3backend.Open(ctx, "s3://"+bucket+"/videos", srv.Config())
	if err != nil {
		return nil, err
	}
	videos, err := writeVideos(ctx, ffmpeg, filepath.Join(cfg.WorkDir, "video-src"), store, cfg, rep)
	if err != nil {
		return nil, err
	}
	env := gatewayEnv(srv.AccessKey, srv.SecretKey)
	idx := exec.CommandContext(ctx, cfg.GatewayBinary, "index", "--src", "s3://"+bucket+"/videos", "--dst", "s3://"+bucket+"/index",
		"--s3-endpoint", srv.URL(), "--s3-region", "us-east-1", "--chunk-size", "4KiB")
	idx.Env = env
	if out, err := idx.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("bench: brand index: %w\n%s", err, lastLines(string(out), 20))
	}
	logf(cfg.Log, "dataset: %d videos of %d s at %s (%s, %d GOPs), indexed in place a GOP a chunk", cfg.Videos, cfg.Seconds, cfg.Size, sizeString(rep.Bytes), rep.GOPs)

	serve := func(name string) (*gatewayProc, error) {
		args := []string{"-c", strconv.Itoa(cfg.DataCPU), cfg.GatewayBinary, "serve", "--listen", "127.0.0.1:0", "--dataset", "vid=s3://" + bucket + "/index",
			"--s3-endpoint", srv.URL(), "--s3-region", "us-east-1", "--cache-size", strconv.FormatInt(4*rep.Bytes+64<<20, 10),
			"--transform-workers", "1", "--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s"}
		return startGateway(ctx, py.taskset, args, env, filepath.Join(cfg.WorkDir, "gateway-video-"+name+".log"))
	}
	job := fmt.Sprintf("dataset=vid&clip=%d&stride=%d&seed=7", cfg.Clip, cfg.Stride)
	py.env = append(env, "OMP_NUM_THREADS=1")
	passes := videoPasses{trainerNode: py, cfg: cfg}
	for round := range cfg.Rounds {
		epoch := round + 1
		rep.Load = append(rep.Load, loadAverage())
		// The epoch's clips, as the gateway draws them: read once from a
		// gateway that is then stopped, so that (3) starts cold.
		g, err := serve(fmt.Sprintf("clips-%d", round))
		if err != nil {
			return nil, err
		}
		clips, covering, err := epochClips(ctx, g, job, epoch, videos)
		g.kill()
		if err != nil {
			return nil, err
		}
		rep.Clips = len(clips)
		clipsFile := filepath.Join(cfg.WorkDir, fmt.Sprintf("video-clips-%d.jsonl", round))
		if err := writeClips(clipsFile, clips); err != nil {
			return nil, err
		}
		for _, config := range []string{videoWhole, videoRanges, videoBrand} {
			var g *gatewayProc
			if config == videoBrand {
				if g, err = serve(fmt.Sprintf("%d", round)); err != nil {
					return nil, err
				}
			}
			row, err := passes.pass(ctx, g, srv.Pid(), config, round, epoch, clipsFile, bucket, srv.URL())
			if g != nil {
				g.kill()
			}
			if err != nil {
				return nil, err
			}
			if row.Clips != len(clips) {
				return nil, fmt.Errorf("bench: %s read %d clips of %d", config, row.Clips, len(clips))
			}
			row.OverCovering = ratio(row.StoreBytesPerClip*float64(row.Clips), float64(covering))
			logf(cfg.Log, "round %d, %s: %.1f clips/s, trainer %.2f ms a clip, gateway %.2f ms a clip, %s from the store a clip (%.2f× the covering GOPs), %.2f requests a clip",
				round, config, row.ClipsPerSec, row.TrainerMsPerClip, row.GatewayMsPerClip, sizeString(int64(row.StoreBytesPerClip)), row.OverCovering, row.RequestsPerClip)
			rep.Rows = append(rep.Rows, row)
		}
	}
	// A resume mid-epoch, on a gateway started afresh.
	g, err := serve("resume")
	if err != nil {
		return nil, err
	}
	var res struct {
		Seconds float64 `json:"seconds"`
		State   float64 `json:"state_seconds"`
		Clips   int     `json:"clips"`
	}
	err = py.run(ctx, &res, "brand-resume", "--url", g.base, "--dataset", "vid", "--clip", strconv.Itoa(cfg.Clip), "--stride", strconv.Itoa(cfg.Stride),
		"--batch-size", strconv.Itoa(cfg.BatchSize), "--workers", strconv.Itoa(cfg.Workers), "--seed", "7", "--epoch", "1", "--position", strconv.Itoa(rep.Clips/2))
	g.kill()
	if err != nil {
		return nil, err
	}
	rep.FirstStepAfterResume, rep.ResumeState = res.Seconds, res.State
	logf(cfg.Log, "resume: the first step of %d clips in %.2f s (the state loaded at %.2f s)", res.Clips, res.Seconds, res.State)
	rep.Summary = rep.summary()
	rep.Targets = rep.targets()
	rep.Total = time.Since(started).Seconds()
	return rep, nil
}

// writeVideos writes the videos with ffmpeg (testsrc2 from a different
// start each, so that they differ), puts them in store under class
// folders, and indexes each as the gateway will.
func writeVideos(ctx context.Context, ffmpeg, dir string, store s3backend.Store, cfg VideoConfig, rep *VideoReport) ([]videoSource, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	var out []videoSource
	for i := range cfg.Videos {
		key := fmt.Sprintf("c%d/v%03d.mp4", i%4, i)
		path := filepath.Join(dir, fmt.Sprintf("v%03d.mp4", i))
		frames := 25 * cfg.Seconds
		cmd := exec.CommandContext(ctx, ffmpeg, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", "-f", "lavfi", "-i",
			"testsrc2=size="+cfg.Size+":rate=25", "-vf", fmt.Sprintf("trim=start_frame=%d:end_frame=%d,setpts=PTS-STARTPTS", 37*i, 37*i+frames),
			"-c:v", "libx264", "-preset", "veryfast", "-bf", "2", "-g", "25", "-keyint_min", "25", "-sc_threshold", "0", "-pix_fmt", "yuv420p",
			"-map_metadata", "-1", "-fflags", "+bitexact", path)
		if b, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("bench: ffmpeg: %w\n%s", err, b)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if _, err := store.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			return nil, err
		}
		f, err := mp4.Index(ctx, mp4.Bytes(b), int64(len(b)), mp4.Limits{})
		if err != nil {
			return nil, fmt.Errorf("bench: %s: %w", key, err)
		}
		rep.Bytes += int64(len(b))
		rep.GOPs += len(f.Video.GOPs)
		out = append(out, videoSource{key: key, label: i % 4, track: f.Video})
	}
	return out, nil
}

// videoClip is one clip as video.py reads it.
type videoClip struct {
	Object    string     `json:"object"`
	Label     int        `json:"label"`
	PTS       []int64    `json:"pts"`
	Codec     string     `json:"codec"`
	Extradata string     `json:"extradata"`
	Ranges    [][2]int64 `json:"ranges"`
	Runs      [][][5]any `json:"runs"`
}

// epochClips reads epoch epoch of the clip job from g and returns its
// clips, as video.py reads them, and the bytes of the GOPs they need
// (each once an epoch).
func epochClips(ctx context.Context, g *gatewayProc, job string, epoch int, videos []videoSource) ([]videoClip, int64, error) {
	byKey := map[string]int{}
	for i, v := range videos {
		byKey[v.key] = i
	}
	var out []videoClip
	seen := map[[2]int]bool{}
	var covering int64
	for m := 0; ; m++ {
		var b bytes.Buffer
		code, err := g.get(ctx, fmt.Sprintf("/epoch/%d/batch/%d?%s&batch_size=64", epoch, m, job), &b)
		if err != nil {
			return nil, 0, err
		}
		if code == 404 {
			break
		}
		if code != 200 {
			return nil, 0, fmt.Errorf("bench: the clips of epoch %d, batch %d: status %d: %s", epoch, m, code, b.String())
		}
		samples, err := client.DecodeTar(b.Bytes())
		if err != nil {
			return nil, 0, err
		}
		for _, s := range samples {
			var js struct {
				Video string
				Label int
				PTS   []int64
			}
			if err := json.Unmarshal(s.Files["json"], &js); err != nil {
				return nil, 0, err
			}
			vi, ok := byKey[js.Video]
			if !ok {
				return nil, 0, fmt.Errorf("bench: a clip of %q, no video of the dataset", js.Video)
			}
			c, gops, err := planClip(videos[vi], js.PTS)
			if err != nil {
				return nil, 0, err
			}
			c.Label = js.Label
			for _, gp := range gops {
				if k := [2]int{vi, gp}; !seen[k] {
					seen[k] = true
					covering += videos[vi].track.GOPs[gp].Bytes
				}
			}
			out = append(out, c)
		}
	}
	return out, covering, nil
}

// planClip is what a loader with its own keyframe index reads and
// decodes for a clip: the GOPs its frames need (transform/video.Cover's
// runs), their bytes as ranges, and each run's packets.
func planClip(v videoSource, pts []int64) (videoClip, []int, error) {
	t := &v.track
	infos := make([]tvideo.PacketInfo, len(t.Samples))
	for i, s := range t.Samples {
		infos[i] = tvideo.PacketInfo{PTS: s.PTS, DTS: s.DTS, Key: s.Key}
	}
	want := slices.Compact(slices.Sorted(slices.Values(pts)))
	spans, err := tvideo.Cover(infos, want)
	if err != nil {
		return videoClip{}, nil, fmt.Errorf("bench: %s: %w", v.key, err)
	}
	c := videoClip{Object: "videos/" + v.key, PTS: pts, Codec: t.Codec, Extradata: hex.EncodeToString(t.Extradata)}
	var gops []int
	var ranges []format.Range
	for _, sp := range spans {
		var run [][5]any
		for i := sp.Start; i < sp.End; i++ {
			s := t.Samples[i]
			run = append(run, [5]any{s.Off, s.Size, s.PTS, s.DTS, s.Key})
			g := gopOfSample(t, i)
			if len(gops) == 0 || gops[len(gops)-1] != g {
				gops = append(gops, g)
				ranges = append(ranges, t.GOPs[g].Ranges...)
			}
		}
		c.Runs = append(c.Runs, run)
	}
	for _, r := range format.Merge(ranges) {
		c.Ranges = append(c.Ranges, [2]int64{r.Off, r.Len})
	}
	return c, gops, nil
}

func gopOfSample(t *mp4.Track, i int) int {
	g, _ := slices.BinarySearchFunc(t.GOPs, i, func(gop mp4.GOP, i int) int {
		switch {
		case int(gop.End) <= i:
			return -1
		case int(gop.First) > i:
			return 1
		}
		return 0
	})
	return g
}

// writeClips writes the clips as video.py reads them, one JSON object a
// line.
func writeClips(path string, clips []videoClip) error {
	var b bytes.Buffer
	for _, c := range clips {
		js, err := json.Marshal(c)
		if err != nil {
			return err
		}
		b.Write(append(js, '\n'))
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}

// videoPasses runs video.py's passes on the training node.
type videoPasses struct {
	trainerNode
	cfg VideoConfig
}

// videoStats is the part of /stats a pass reads: the job's store bytes
// and loads.
func videoStats(ctx context.Context, g *gatewayProc) (bytes, loads int64, err error) {
	var b strings.Builder
	code, err := g.get(ctx, "/stats", &b)
	if err == nil && code != 200 {
		err = fmt.Errorf("status %d", code)
	}
	var st struct {
		Jobs []api.JobStat `json:"jobs"`
	}
	if err == nil {
		err = json.Unmarshal([]byte(b.String()), &st)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("bench: gateway /stats: %w", err)
	}
	for _, j := range st.Jobs {
		bytes += j.BackendBytes
		loads += j.Loads
	}
	return bytes, loads, nil
}

// pass runs one configuration over the epoch's clips.
func (py videoPasses) pass(ctx context.Context, g *gatewayProc, storePid int, config string, round, epoch int, clipsFile, bucket, endpoint string) (VideoRow, error) {
	cfg := py.cfg
	args := []string{config, "--batch-size", strconv.Itoa(cfg.BatchSize), "--workers", strconv.Itoa(cfg.Workers),
		"--epoch", strconv.Itoa(epoch), "--seed", "7"}
	passes := 1
	if config == videoBrand {
		passes = max(cfg.BrandPasses, 1)
		args = append(args, "--url", g.base, "--dataset", "vid", "--clip", strconv.Itoa(cfg.Clip), "--stride", strconv.Itoa(cfg.Stride),
			"--passes", strconv.Itoa(passes))
		if cfg.BrandPersistent {
			args = append(args, "--persistent-workers")
		}
	} else {
		args = append(args, "--clips-file", clipsFile, "--endpoint", endpoint, "--bucket", bucket)
	}
	var gw0 time.Duration
	if g != nil {
		gw0 = processCPU(g.cmd.Process.Pid)
	}
	store0 := processCPU(storePid)
	var out struct {
		Clips      int     `json:"clips"`
		Seconds    float64 `json:"seconds"`
		CPUSeconds float64 `json:"cpu_seconds"`
		StartupCPU float64 `json:"startup_cpu_seconds"`
		StoreBytes int64   `json:"store_bytes"`
		Requests   int64   `json:"requests"`
	}
	if err := py.run(ctx, &out, args...); err != nil {
		return VideoRow{}, err
	}
	n := float64(max(out.Clips, 1))
	row := VideoRow{Round: round, Config: config, Clips: out.Clips, Seconds: out.Seconds, ClipsPerSec: ratio(float64(out.Clips), out.Seconds),
		TrainerMsPerClip: 1e3 * (out.CPUSeconds - out.StartupCPU) / n, TrainerMsPerClipWithStart: 1e3 * out.CPUSeconds / n,
		TrainerStartMs: 1e3 * out.StartupCPU, StoreCPU: (processCPU(storePid) - store0).Seconds(),
		StoreBytesPerClip: float64(out.StoreBytes) / n, RequestsPerClip: float64(out.Requests) / n}
	if g != nil {
		// Over every pass; the store bytes are the first's (the cache
		// holds the dataset), over one pass's clips.
		row.GatewayMsPerClip = 1e3 * (processCPU(g.cmd.Process.Pid) - gw0).Seconds() / (n * float64(passes))
		b, loads, err := videoStats(ctx, g)
		if err != nil {
			return VideoRow{}, err
		}
		row.StoreBytesPerClip, row.RequestsPerClip = float64(b)/n, float64(loads)/n
	}
	return row, nil
}

// summary is each configuration's medians over the rounds.
func (r *VideoReport) summary() []VideoTotal {
	var out []VideoTotal
	for _, config := range []string{videoWhole, videoRanges, videoBrand} {
		var t [7][]float64
		for _, row := range r.Rows {
			if row.Config == config {
				for i, v := range []float64{row.ClipsPerSec, row.TrainerMsPerClip, row.GatewayMsPerClip, row.StoreBytesPerClip, row.OverCovering, row.RequestsPerClip, row.TrainerMsPerClipWithStart} {
					t[i] = append(t[i], v)
				}
			}
		}
		if len(t[0]) == 0 {
			continue
		}
		out = append(out, VideoTotal{Config: config, ClipsPerSec: medianOf(t[0]), TrainerMsPerClip: medianOf(t[1]), GatewayMsPerClip: medianOf(t[2]),
			StoreBytesPerClip: medianOf(t[3]), OverCovering: medianOf(t[4]), RequestsPerClip: medianOf(t[5]), TrainerWithStart: medianOf(t[6])})
	}
	return out
}

func (r *VideoReport) total(config string) VideoTotal {
	for _, t := range r.Summary {
		if t.Config == config {
			return t
		}
	}
	return VideoTotal{}
}

// targets are issue 55's: the trainer's CPU a clip of (3) against (1)'s,
// the store bytes of (3) against the covering GOPs', the gateway's CPU a
// clip against PyAV's on the trainer for the same clips ((2), which
// decodes no more than the clips' GOPs), the first step after a resume.
func (r *VideoReport) targets() []Target {
	whole, ranges, b := r.total(videoWhole), r.total(videoRanges), r.total(videoBrand)
	ts := []Target{
		atMost("trainer CPU a clip, (3) ÷ (1)", ratio(b.TrainerMsPerClip, whole.TrainerMsPerClip), 0.05),
		atMost("store bytes a clip ÷ the covering GOPs' bytes, (3)", b.OverCovering, 1.30),
		atMost("gateway CPU a clip, (3) ÷ PyAV's on the trainer, (2)", ratio(b.GatewayMsPerClip, ranges.TrainerMsPerClip), 1.00),
		atMost("first step after a resume, seconds", r.FirstStepAfterResume, 1.00),
	}
	ts[0].Note = fmt.Sprintf("the workers' start included: %.3f", ratio(b.TrainerWithStart, whole.TrainerWithStart))
	ts[1].Note = fmt.Sprintf("(1) reads %.2f×, (2) %.2f×", whole.OverCovering, ranges.OverCovering)
	ts[3].Note = fmt.Sprintf("the state loaded at %.2f s", r.ResumeState)
	return ts
}

// WriteJSON writes the report as JSON.
func (r *VideoReport) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// WriteText writes the report as markdown tables.
func (r *VideoReport) WriteText(w io.Writer) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "%d videos of %d s at %s (H.264, B-frames, a keyframe a second; %s, %d GOPs, a GOP a chunk), clips of %d frames %d apart, %d an epoch; training node: CPU %d (the DataLoader and %d workers, batch %d); data node: CPU %d (brand serve, %s, and MinIO); %s\n\n",
		r.Videos, r.Seconds, r.Size, sizeString(r.Bytes), r.GOPs, r.Clip, r.Stride, r.Clips, r.TrainerCPU, r.Workers, r.BatchSize, r.DataCPU, r.Decoder, r.Versions)
	sb.WriteString("| configuration | clips/s | trainer CPU ms/clip | the same, the workers' start included | gateway CPU ms/clip | store bytes/clip | ÷ covering GOPs | requests/clip |\n")
	sb.WriteString("| --- | --: | --: | --: | --: | --: | --: | --: |\n")
	for _, t := range r.Summary {
		fmt.Fprintf(&sb, "| %s | %.1f | %.2f | %.2f | %.2f | %s | %.2f | %.2f |\n", videoLabels[t.Config], t.ClipsPerSec, t.TrainerMsPerClip,
			t.TrainerWithStart, t.GatewayMsPerClip, sizeString(int64(t.StoreBytesPerClip)), t.OverCovering, t.RequestsPerClip)
	}
	if r.BrandPasses > 1 || r.BrandPersistent {
		fmt.Fprintf(&sb, "\n(3): the last of %d passes of one loader (persistent workers: %v); its gateway CPU the mean of the passes, the first cold.\n",
			max(r.BrandPasses, 1), r.BrandPersistent)
	}
	fmt.Fprintf(&sb, "\nFirst step after a resume mid-epoch (a gateway started afresh): %.2f s. Medians of %d rounds; load average before each round: %s.\n\n",
		r.FirstStepAfterResume, len(r.Load), joinFloats(r.Load, 1))
	sb.WriteString("| target | want | measured | status | note |\n| --- | --- | --: | --- | --- |\n")
	for _, t := range r.Targets {
		fmt.Fprintf(&sb, "| %s | %s | %.3f | %s | %s |\n", t.Name, t.Want, t.Ratio, t.Status, t.Note)
	}
	_, err := io.WriteString(w, sb.String())
	return err
}
