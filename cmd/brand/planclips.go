package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/dustin/go-humanize"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
)

// clipParams are the job parameters --clip takes: a clip job's, as a
// batch request gives them (docs/http-api.md, *Video clips*).
var clipParams = []string{api.ParamClip, api.ParamStride, api.ParamFPS, api.ParamStep, api.ParamClipStart,
	api.ParamClipLayout, api.ParamDeltaTimestamps, api.ParamFrames, api.ParamGOPWindow}

// clipPlanJob is what `brand plan --clip` plans besides the clip
// parameters: the job's shuffle, the epochs and the cache.
type clipPlanJob struct {
	seed                 uint64
	batch, window, world int
	epochs, first, nodes int
	dropLast             bool
	cacheBytes           int64
	// gopCache is the node's decoded-GOP cache (gateway.Config.GOPCacheBytes:
	// 0 serve's default, negative none).
	gopCache int64
}

// gopCacheOf is --gop-cache-bytes as gateway.Config.GOPCacheBytes: 0
// when not given (serve's default), negative for 0 (none).
func gopCacheOf(set bool, v cli.ByteSize) int64 {
	switch {
	case !set:
		return 0
	case v == 0:
		return -1
	}
	return int64(v)
}

// notWithClip are `brand plan`'s flags a clip job's plan does not take:
// each plans another kind of job, or a cache tier or resize a clip plan
// does not model (GET /plan?clip= refuses nodes_after= too).
var notWithClip = []string{"mix", "mix-schedule", "mix-block", "mix-samples", "shared-job", "nodes-after", "peer-bandwidth",
	"snapshot", "job", "importance", "hot", "columns", "disk-cache-size", "transform", "images-per-sec", "calibration-photos",
	"transform-config", "transform-workers", "bandwidth", "consume", "prefetch-windows"}

// planClip checks `brand plan --clip`'s flags and plans the clip job
// (planClipJob); the world is --world, or --nodes × --ranks-per-node.
func planClip(ctx context.Context, env *cli.Env, fs *flag.FlagSet, params string, srcs []string, cfg s3backend.Config, job clipPlanJob, cl planCluster, asJSON bool) error {
	var refused []string
	fs.Visit(func(f *flag.Flag) {
		if slices.Contains(notWithClip, f.Name) {
			refused = append(refused, "--"+f.Name)
		}
	})
	switch {
	case len(refused) > 0:
		return fmt.Errorf("--clip plans a clip job's GOP reads and decode through the cache; %s plan(s) another kind of job or tier: not with --clip", strings.Join(refused, ", "))
	case len(srcs) != 1:
		return fmt.Errorf("--clip plans a job of one dataset: --src given %d times", len(srcs))
	}
	world, err := cl.world(fs, job.world)
	if err != nil {
		return err
	}
	job.world, job.nodes = world, cl.nodes
	return planClipJob(ctx, env, srcs[0], cfg, params, job, asJSON)
}

// planClipJob plans a clip job over the video or LeRobot dataset at src
// as a gateway serving it plans one (GET /plan?clip=…): the dataset is
// loaded as `brand serve` loads it, in this process, and asked for the
// plan of the job. A clip job's demand is its clips' GOPs, drawn per
// global batch as the gateway draws them, which only the gateway's layout
// knows; asking it keeps one rule, not a copy (docs/planner.md, *Clip
// jobs*).
func planClipJob(ctx context.Context, env *cli.Env, src string, cfg s3backend.Config, params string, job clipPlanJob, asJSON bool) error {
	q, err := clipQuery(params)
	if err != nil {
		return err
	}
	for k, v := range map[string]string{
		api.ParamSeed: strconv.FormatUint(job.seed, 10), api.ParamBatchSize: strconv.Itoa(job.batch),
		api.ParamWindow: strconv.Itoa(job.window), api.ParamWorld: strconv.Itoa(job.world),
		api.ParamDropLast: strconv.FormatBool(job.dropLast), api.ParamEpochs: strconv.Itoa(job.epochs),
		api.ParamFirstEpoch: strconv.Itoa(job.first), api.ParamCacheSize: strconv.FormatInt(job.cacheBytes, 10),
	} {
		q.Set(k, v)
	}
	if job.nodes > 0 {
		q.Set(api.ParamNodes, strconv.Itoa(job.nodes))
	}
	g, err := gateway.New(gateway.Config{
		Datasets:            []gateway.DatasetSpec{{Name: "plan", URL: src, Formats: formats()}},
		Backend:             cfg,
		CacheSize:           job.cacheBytes,
		GOPCacheBytes:       job.gopCache,
		PrefetchConcurrency: -1, // it serves no batch
		Planner:             planner.ForGateway{},
		ClipsWithoutDecoder: true, // it plans for a gateway that decodes, decoding nothing itself
	})
	if err != nil {
		return err
	}
	defer g.Close()
	if err := g.Load(ctx); err != nil {
		return err
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodGet, "/plan?"+q.Encode(), nil)
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return fmt.Errorf("--clip %s: %s", params, strings.TrimSpace(rec.Body.String()))
	}
	var plan struct {
		Clips      api.ClipPlan `json:"clips"`
		CacheBytes int64        `json:"cache_bytes"`
		Nodes      int          `json:"nodes"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &plan); err != nil {
		return fmt.Errorf("the gateway's plan of the clip job: %w", err)
	}
	if asJSON {
		_, err := env.Stdout.Write(rec.Body.Bytes())
		return err
	}
	return writeClipPlan(env.Stdout, params, plan.Clips, plan.CacheBytes, plan.Nodes)
}

// clipQuery parses --clip: a query string of clip parameters only (the
// job's others are this command's flags).
func clipQuery(params string) (url.Values, error) {
	q, err := url.ParseQuery(params)
	if err != nil {
		return nil, fmt.Errorf("--clip %q: %w", params, err)
	}
	if !q.Has(api.ParamClip) && !q.Has(api.ParamDeltaTimestamps) {
		return nil, fmt.Errorf("--clip %q: give clip=T (a tree of videos) or delta_timestamps= (a LeRobot dataset)", params)
	}
	for k := range q {
		if !slices.Contains(clipParams, k) {
			return nil, fmt.Errorf("--clip %q: %s is not a clip parameter (%s); the job's seed, batch size, window and world are this command's flags",
				params, k, strings.Join(clipParams, ", "))
		}
	}
	return q, nil
}

// writeClipPlan prints a clip job's plan: per epoch its clips and the
// GOPs they cover, the store bytes against the covering bytes, and the
// decode it takes.
func writeClipPlan(w io.Writer, params string, p api.ClipPlan, cacheBytes int64, nodes int) error {
	measured := "not measured: the documented cost scaled by the frames' pixels"
	if p.Measured {
		measured = "measured"
	}
	fmt.Fprintf(w, "clip job %s over a %s dataset: %d clips an epoch; cache %s", params, p.Kind, p.Clips, humanize.IBytes(uint64(max(cacheBytes, 0))))
	if nodes > 1 {
		fmt.Fprintf(w, " (%d nodes' together)", nodes)
	}
	fmt.Fprintf(w, "; decoded GOPs held %s; decode %.3f ms a frame (%s)\n", humanize.IBytes(uint64(max(p.GOPCacheBytes, 0))), p.CPUPerFrameMs, measured)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "epoch\tclips\tframes\tGOPs\tcovering GOP bytes\tstore bytes\tstore/covering\tGOPs decoded\tframes decoded\ta clip\treuse\tdecode CPU s\tms a clip\t")
	for _, e := range p.Epochs {
		fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\t%.3f\t%d\t%d\t%.2f\t%.2f\t%.3f\t%.3f\t\n", e.Epoch, e.Clips, e.Frames, e.GOPs,
			e.CoveringBytes, e.StoreBytes, e.StoreOverCovering, e.GOPsDecoded, e.FramesDecoded, e.FramesDecodedPerClip, e.Reuse, e.DecodeCPUSeconds, e.DecodeCPUPerClip)
	}
	return tw.Flush()
}
