package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// planCluster is what `brand plan` needs to predict a cluster instead of
// one gateway.
type planCluster struct {
	nodes        int // 0: one gateway, the single-node plan
	ranksPerNode int
}

func (c *planCluster) register(fs *flag.FlagSet) {
	fs.IntVar(&c.nodes, "nodes", 0, "predict a cluster of this many nodes, --cache-size being each node's cache (0: one gateway)")
	fs.IntVar(&c.ranksPerNode, "ranks-per-node", 1, "with --nodes: ranks per node; the world is nodes × ranks-per-node unless --world is given")
}

// world returns the job's world size: --world if it was given, else, for a
// cluster, nodes × ranks per node.
func (c *planCluster) world(fs *flag.FlagSet, world int) (int, error) {
	if c.nodes < 0 || c.nodes > api.MaxPlanNodes {
		return 0, fmt.Errorf("--nodes %d: must be 0 (one gateway) to %d", c.nodes, api.MaxPlanNodes)
	}
	if c.ranksPerNode < 1 {
		return 0, fmt.Errorf("--ranks-per-node %d: must be at least 1", c.ranksPerNode)
	}
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "world" })
	if given || c.nodes == 0 {
		return world, nil
	}
	if c.ranksPerNode > math.MaxInt32/c.nodes {
		return 0, fmt.Errorf("--nodes %d × --ranks-per-node %d: too many ranks", c.nodes, c.ranksPerNode)
	}
	return c.nodes * c.ranksPerNode, nil
}

// runPlan simulates a job over a dataset's index and prints what a cache
// size achieves under LRU and under the optimal (next-use) policy (with
// --snapshot or --importance, in importance mode too; with
// --disk-cache-size, the store and disk reads with a disk tier below the
// cache), or with --nodes
// what a cluster of that many nodes reads from the store and sends
// between nodes, or with --shared-job what several jobs read through one
// cache. With --mix it plans a mixture of datasets, one --src per
// component, alone or with --nodes and --disk-cache-size. A dataset
// served in place is planned as a gateway reads it (planData): its chunks
// decoded in the cache, their store extents from the store, with only
// the fields --columns names.
func runPlan(ctx context.Context, env *cli.Env, args []string) error {
	var (
		srcs                datasetFlags
		mix                 planMix
		cache, disk         cli.ByteSize
		bw, consume, peerBW cli.ByteSize
		nodesAfter          int
		seed                uint64
		batch, window, wrld int
		epochs, first, pf   int
		dropLast, asJSON    bool
		s3                  cli.S3Flags
		cl                  planCluster
		imp                 planImportance
		shared              sharedJobFlags
		tf                  planTransform
		columns, clip       string
		prices              cli.PriceFlags
	)
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.Var(&srcs, "src", "dataset URL: s3://bucket/prefix, file:///dir or a directory; with --mix, one per component, as name=URL or a URL named after its last path element")
	cache = gateway.DefaultCacheSize
	fs.Var(&cache, "cache-size", "cache size to plan for")
	fs.Var(&disk, "disk-cache-size", "a disk tier below the cache to plan for too, as serve's --disk-cache-size (each node's with --nodes; 0: none)")
	var gopCache cli.ByteSize
	gopSet := false
	fs.Func("gop-cache-bytes", "with --clip: the node's decoded-GOP cache to plan the decode with, as serve's --gop-cache-bytes (0: none; default: serve's, half the decodes)", func(v string) error {
		gopSet = true
		return gopCache.Set(v)
	})
	bw = 1 << 30
	fs.Var(&bw, "bandwidth", "backend read bandwidth, bytes per second (e.g. 500MiB)")
	fs.IntVar(&nodesAfter, "nodes-after", 0, "plan a resize instead: what going from --nodes (default 1) to this many nodes costs the job, at the start of --first-epoch (chunks moved, bytes from peers and the store, warm-up)")
	peerBW = planner.DefaultPeerBytesPerSec
	fs.Var(&peerBW, "peer-bandwidth", "with --nodes-after: bandwidth between nodes, bytes per second")
	fs.Var(&consume, "consume", "trainer read rate, bytes per second (default: as fast as the backend)")
	fs.Uint64Var(&seed, "seed", 0, "shuffle seed")
	fs.IntVar(&batch, "batch-size", query.DefaultBatchSize, "samples per rank per batch")
	fs.IntVar(&window, "window", query.DefaultWindow, "shuffle window, in chunks")
	fs.IntVar(&wrld, "world", 1, "ranks")
	fs.IntVar(&epochs, "epochs", 3, "epochs to simulate (at least 2: the first is cold)")
	fs.IntVar(&first, "first-epoch", 0, "first epoch to simulate")
	fs.IntVar(&pf, "prefetch-windows", gateway.DefaultPrefetchWindows, "windows the gateway prefetches beyond the current one")
	fs.BoolVar(&dropLast, "drop-last", false, "drop the last partial global batch")
	fs.BoolVar(&asJSON, "json", false, "print the plan as JSON")
	fs.StringVar(&columns, "columns", "", "for a dataset served in place (MDS, Megatron): plan a job that reads only these fields, comma-separated, as a job's columns= (default: every field)")
	fs.StringVar(&clip, "clip", "", "plan a clip job of a video or LeRobot dataset: its clip parameters as a request gives them (e.g. 'clip=16&stride=2', or 'delta_timestamps=...&frames=...'), planned as a gateway serving the dataset plans GET /plan?clip=...: the GOPs its clips cover, the store bytes for --cache-size, the decode")
	fs.Var(&shared, "shared-job", "plan several jobs sharing the cache, one per flag: SPEC is comma-separated key=value pairs of "+
		"name, seed, window, batch_size, world, epochs, first_epoch, drop_last, speed, start; a key not given takes this command's flag (speed 1, start 0)")
	prices.Register(fs)
	cl.register(fs)
	tf.register(fs)
	imp.register(fs)
	mix.register(fs)
	s3.Register(fs)
	if err := cli.ParseFlags(fs, env, args, "brand plan --src URL [--cache-size 4GiB] [--disk-cache-size 100GiB] [--nodes N [--ranks-per-node R]] [--snapshot FILE | --job J --importance V] [--hot H] [--shared-job SPEC ...] [--columns F,...] [job flags]\n"+
		"       brand plan --src URL --clip 'clip=16&stride=2' [--cache-size 4GiB] [--nodes N [--ranks-per-node R]] [job flags]\n"+
		"       brand plan {--mix NAME:WEIGHT,... | --mix-schedule STEP:NAME:WEIGHT,...;...} --src NAME=URL ... [--mix-block K] [--mix-samples L] [--cache-size 4GiB] [--disk-cache-size 100GiB] [--nodes N [--ranks-per-node R]] [job flags]"); err != nil {
		return err
	}
	if len(srcs) == 0 {
		return fmt.Errorf("--src is required: the dataset to plan for")
	}
	if err := prices.Check(); err != nil {
		return err
	}
	if err := mix.check(srcs); err != nil {
		return err
	}
	var cols []string
	if columns != "" {
		var err error
		if cols, err = query.ParseColumns(columns); err != nil {
			return fmt.Errorf("--columns: %w", err)
		}
	}
	if clip != "" {
		return planClip(ctx, env, fs, clip, srcs, s3.Config(), clipPlanJob{seed: seed, batch: batch, window: window, world: wrld,
			epochs: epochs, first: first, dropLast: dropLast, cacheBytes: int64(cache), gopCache: gopCacheOf(gopSet, gopCache)}, cl, asJSON)
	}
	if gopSet {
		return errors.New("--gop-cache-bytes plans a clip job's decode: give --clip")
	}
	job := planner.Job{Params: shuffle.Params{Seed: seed, Window: window, BatchSize: batch, World: wrld, DropLast: dropLast}, FirstEpoch: first, Epochs: epochs}
	var jobs []planner.SharedJob
	if len(shared) > 0 {
		if disk > 0 {
			return fmt.Errorf("--shared-job and --disk-cache-size are not supported together: a shared plan simulates the jobs' RAM cache only")
		}
		var err error
		if jobs, err = shared.jobs(fs, job); err != nil {
			return err
		}
	}
	wrld, err := cl.world(fs, wrld)
	if err != nil {
		return err
	}
	job.World = wrld
	// What to plan: one dataset's index (its chunks and ownership key),
	// or a mixture of several.
	var (
		d       planner.Dataset
		key     uint64
		m       *planner.Mix
		impMode *planner.Importance
	)
	if mix.on() {
		switch {
		case len(jobs) > 0:
			return fmt.Errorf("--mix and --shared-job are not supported together: a shared plan is of one dataset")
		case imp.file != "" || imp.version != "" || imp.job != "" || imp.hot != 0:
			return fmt.Errorf("--mix: importance mode (--snapshot, --importance, --job, --hot) is per dataset; a mixture draws uniformly from each component")
		}
		if m, err = mix.load(ctx, srcs, s3.Config(), cols); err != nil {
			return err
		}
	} else {
		store, err := s3backend.Open(ctx, srcs[0], s3.Config())
		if err != nil {
			return err
		}
		ix, err := stored.ReadIndex(ctx, store)
		if err != nil {
			return err
		}
		if d, err = planData(ctx, store, ix, cols); err != nil {
			return err
		}
		if len(jobs) > 0 {
			plan, err := planner.MakeSharedPlan(ctx, planner.SharedInput{Dataset: d, Jobs: jobs, CacheBytes: int64(cache)})
			if err != nil {
				return err
			}
			return writePlan(env, plan, asJSON)
		}
		if impMode, err = imp.load(ctx, store, ix); err != nil {
			return err
		}
		key = cluster.IndexKey(ix.Lineage().Root())
	}
	if nodesAfter != 0 {
		switch {
		case nodesAfter < 0 || nodesAfter > api.MaxPlanNodes:
			return fmt.Errorf("--nodes-after %d: must be 1 to %d", nodesAfter, api.MaxPlanNodes)
		case m != nil || impMode != nil:
			return fmt.Errorf("--nodes-after plans a resize for a job of one dataset and the uniform shuffle")
		}
		plan, err := planner.MakeResizePlan(planner.ResizeInput{Dataset: d, IndexKey: key, Job: job,
			From: planner.PlannedMembers(max(cl.nodes, 1)), To: planner.PlannedMembers(nodesAfter), PrefetchWindows: pf,
			NodeCacheBytes: int64(cache), StoreBytesPerSec: float64(bw), PeerBytesPerSec: float64(peerBW)})
		if err != nil {
			return err
		}
		return writePlan(env, plan, asJSON)
	}
	// One node is one gateway: importance mode, planned for one gateway,
	// is planned for it as /plan's nodes=1 is.
	if cl.nodes > 1 || cl.nodes == 1 && impMode == nil {
		if impMode != nil {
			return fmt.Errorf("--nodes %d: importance mode is planned for one gateway; drop --nodes or the snapshot", cl.nodes)
		}
		plan, err := planner.MakeClusterPlan(ctx, planner.ClusterInput{
			Dataset:            d,
			Mix:                m,
			Job:                job,
			IndexKey:           key,
			Nodes:              cl.nodes,
			NodeCacheBytes:     int64(cache),
			NodeDiskCacheBytes: int64(disk),
			Prices:             prices.Prices(),
		})
		if err != nil {
			return err
		}
		if t, ok, err := tf.input(); err != nil {
			return err
		} else if ok {
			t.ImagesPerSec /= float64(cl.nodes) // each node transforms its chunks' samples
			plan.Transform = planner.TransformCores(t)
		}
		return writePlan(env, plan, asJSON)
	}
	in := planner.PlanInput{
		Dataset:            d,
		Mix:                m,
		Job:                job,
		CacheBytes:         int64(cache),
		DiskCacheBytes:     int64(disk),
		BackendBytesPerSec: float64(bw),
		ConsumeBytesPerSec: float64(consume),
		PrefetchWindows:    pf,
		Importance:         impMode,
		Prices:             prices.Prices(),
	}
	plan, err := planner.MakePlan(ctx, in)
	if err != nil {
		return err
	}
	if t, ok, err := tf.input(); err != nil {
		return err
	} else if ok {
		if plan.Transform, err = planner.PlanTransform(ctx, in, plan, t); err != nil {
			return err
		}
	}
	return writePlan(env, plan, asJSON)
}

// planMix is what `brand plan` needs to plan a mixture of datasets: its
// components and weights as mix= takes them, each component's dataset
// (one --src per component, as name=URL), and the mixing block and epoch
// length.
type planMix struct {
	spec           string
	schedule       string // --mix-schedule: the phases, the first one's datasets the mixture's
	block, samples int
}

func (m *planMix) register(fs *flag.FlagSet) {
	fs.StringVar(&m.spec, "mix", "", "plan a mixture of datasets, as mix= takes it: NAME:WEIGHT,... (e.g. web:0.7,code:0.3), each NAME's dataset given by --src NAME=URL")
	fs.StringVar(&m.schedule, "mix-schedule", "", "plan a schedule of mixtures instead of --mix, as mix_schedule= takes it: STEP:NAME:WEIGHT,...;... (e.g. 0:web:0.7,code:0.3;4000:web:0.3,code:0.7); the report gives each phase's working set and store reads")
	fs.IntVar(&m.block, "mix-block", 0, "with --mix: the mixing block, in samples (0: batch size × world)")
	fs.IntVar(&m.samples, "mix-samples", 0, "with --mix: samples in a mixture epoch, rounded up to whole blocks (0: the components' samples summed)")
}

// flag is the flag that gave the mixture, for messages.
func (m *planMix) flag() string {
	if m.schedule != "" {
		return "--mix-schedule"
	}
	return "--mix"
}

// on says whether the plan is of a mixture (--mix or --mix-schedule).
func (m *planMix) on() bool { return m.spec != "" || m.schedule != "" }

// check refuses mixture flags without --mix, and several --src without
// it: a plan is of one dataset unless it is of a mixture.
func (m *planMix) check(srcs []string) error {
	switch {
	case m.spec != "" && m.schedule != "":
		return fmt.Errorf("--mix and --mix-schedule are one or the other: a schedule's first phase is its mixture")
	case !m.on() && (m.block != 0 || m.samples != 0):
		return fmt.Errorf("--mix-block and --mix-samples apply only with --mix or --mix-schedule")
	case !m.on() && len(srcs) > 1:
		return fmt.Errorf("--src given %d times: a plan is of one dataset, or with --mix of a mixture, one --src NAME=URL per component", len(srcs))
	case m.block < 0:
		return fmt.Errorf("--mix-block %d: must be at least 0 (0: batch size × world)", m.block)
	case m.samples < 0:
		return fmt.Errorf("--mix-samples %d: must be at least 0 (0: the components' samples summed)", m.samples)
	}
	return nil
}

// load parses --mix and reads each component's index from the --src that
// names it, as `brand serve --dataset` names datasets; each component is
// read with the fields columns names, as a mixture job's columns= reads
// them.
func (m *planMix) load(ctx context.Context, srcs []string, cfg s3backend.Config, columns []string) (*planner.Mix, error) {
	var (
		parsed  api.Mix
		weights []uint64
		phases  []shuffle.SchedulePhase
		err     error
	)
	if m.schedule != "" {
		// A schedule's components, in their order, are its first phase's.
		var sched api.Schedule
		if sched, err = api.ParseSchedule(m.schedule); err == nil {
			phases, err = sched.Phases()
		}
		if err != nil {
			return nil, fmt.Errorf("--mix-schedule: %w", err)
		}
		parsed, weights = sched[0].Mix, phases[0].Weights
	} else {
		if parsed, err = api.ParseMix(m.spec); err != nil {
			return nil, fmt.Errorf("--mix: %w", err)
		}
		if weights, err = parsed.IntWeights(); err != nil {
			return nil, fmt.Errorf("--mix: %w", err)
		}
	}
	specs, err := (&serveFlags{datasets: datasetFlags(srcs)}).specs()
	if err != nil {
		return nil, err
	}
	urls := map[string]string{}
	for _, s := range specs {
		if _, dup := urls[s.Name]; dup {
			return nil, fmt.Errorf("--src names dataset %q twice", s.Name)
		}
		urls[s.Name] = s.URL
	}
	named := map[string]bool{}
	for _, c := range parsed {
		if _, ok := urls[c.Dataset]; !ok {
			return nil, fmt.Errorf("%s names dataset %q: give its URL as --src %s=URL", m.flag(), c.Dataset, c.Dataset)
		}
		named[c.Dataset] = true
	}
	for _, s := range specs {
		if !named[s.Name] {
			return nil, fmt.Errorf("--src %s: the mixture %s has no dataset %q", s.URL, parsed, s.Name)
		}
	}
	out := &planner.Mix{Block: m.block, Samples: m.samples, Phases: phases}
	for i, c := range parsed {
		store, err := s3backend.Open(ctx, urls[c.Dataset], cfg)
		if err != nil {
			return nil, fmt.Errorf("dataset %s: %w", c.Dataset, err)
		}
		ix, err := stored.ReadIndex(ctx, store)
		if err != nil {
			return nil, fmt.Errorf("dataset %s: %w", c.Dataset, err)
		}
		d, err := planData(ctx, store, ix, columns)
		if err != nil {
			return nil, fmt.Errorf("dataset %s: %w", c.Dataset, err)
		}
		out.Components = append(out.Components, planner.MixComponent{Name: c.Dataset, Weight: weights[i],
			Dataset: d, IndexKey: cluster.IndexKey(ix.Lineage().Root())})
	}
	return out, nil
}

// planData is what the planner needs of the dataset whose index ix is in
// store, as a gateway serving it reads it with the fields columns names
// (none: every field). A tar dataset's chunks are read whole and held as
// read, and have no fields to name. A dataset served in place is opened
// as `brand serve` opens it — its format's description of the chunks,
// stored beside the index (stored.ReadFormat), decoded by the format of
// its name in formats() — and planned with each chunk's resident bound
// with those fields, which the cache holds, and its store extent with
// them, which a load reads (planner.DatasetInPlace).
func planData(ctx context.Context, store s3backend.Store, ix *chunkindex.Index, columns []string) (planner.Dataset, error) {
	if !ix.Deferred() {
		if len(columns) > 0 {
			return planner.Dataset{}, fmt.Errorf("--columns %s: the dataset is tar chunks, whose samples are served whole; --columns selects fields of a dataset served in place",
				strings.Join(columns, ","))
		}
		d := planner.DatasetOf(ix)
		// Its chunks are read whole, in the store's parts: a load's GETs.
		if r, ok := store.(interface{ Requests(n int64) int }); ok {
			d = planner.WithGETs(d, r.Requests)
		}
		return d, nil
	}
	dec, err := openFormat(ctx, store, ix, formats())
	if err != nil {
		return planner.Dataset{}, err
	}
	sel, err := format.Select(dec.Fields(), columns)
	if err != nil {
		return planner.Dataset{}, fmt.Errorf("--columns: %w", err)
	}
	return planner.DatasetInPlace(ix, dec, sel), nil
}

// openFormat opens the decoder of the dataset served in place whose
// deferred index ix is in store, from the formats fs offers.
func openFormat(ctx context.Context, store s3backend.Store, ix *chunkindex.Index, fs []format.Format) (format.Decoder, error) {
	name := ix.InPlace().Format
	i := slices.IndexFunc(fs, func(f format.Format) bool { return f.Name() == name })
	if i < 0 {
		names := make([]string, len(fs))
		for k, f := range fs {
			names[k] = f.Name()
		}
		return nil, fmt.Errorf("the dataset is served in place in %s format, which this brand does not read (formats: %s)", name, strings.Join(names, ", "))
	}
	meta, err := stored.ReadFormat(ctx, store, ix)
	if err != nil {
		return nil, err
	}
	dec, err := fs[i].Open(meta)
	if err != nil {
		return nil, fmt.Errorf("opening its %s description: %w", name, err)
	}
	return dec, nil
}

// writePlan prints a plan as indented JSON or as its text report.
func writePlan(env *cli.Env, plan interface{ WriteText(io.Writer) error }, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(env.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(plan)
	}
	return plan.WriteText(env.Stdout)
}
