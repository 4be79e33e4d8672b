package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/cli"
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
// cache.
func runPlan(ctx context.Context, env *cli.Env, args []string) error {
	var (
		src                 string
		cache, disk         cli.ByteSize
		bw, consume         cli.ByteSize
		seed                uint64
		batch, window, wrld int
		epochs, first, pf   int
		dropLast, asJSON    bool
		s3                  cli.S3Flags
		cl                  planCluster
		imp                 planImportance
		shared              sharedJobFlags
	)
	fs := flag.NewFlagSet("plan", flag.ContinueOnError)
	fs.StringVar(&src, "src", "", "dataset URL: s3://bucket/prefix, file:///dir or a directory")
	cache = 4 << 30
	fs.Var(&cache, "cache-size", "cache size to plan for")
	fs.Var(&disk, "disk-cache-size", "a disk tier below the cache to plan for too, as serve's --disk-cache-size (each node's with --nodes; 0: none)")
	bw = 1 << 30
	fs.Var(&bw, "bandwidth", "backend read bandwidth, bytes per second (e.g. 500MiB)")
	fs.Var(&consume, "consume", "trainer read rate, bytes per second (default: as fast as the backend)")
	fs.Uint64Var(&seed, "seed", 0, "shuffle seed")
	fs.IntVar(&batch, "batch-size", 32, "samples per rank per batch")
	fs.IntVar(&window, "window", 8, "shuffle window, in chunks")
	fs.IntVar(&wrld, "world", 1, "ranks")
	fs.IntVar(&epochs, "epochs", 3, "epochs to simulate (at least 2: the first is cold)")
	fs.IntVar(&first, "first-epoch", 0, "first epoch to simulate")
	fs.IntVar(&pf, "prefetch-windows", 1, "windows the gateway prefetches beyond the current one")
	fs.BoolVar(&dropLast, "drop-last", false, "drop the last partial global batch")
	fs.BoolVar(&asJSON, "json", false, "print the plan as JSON")
	fs.Var(&shared, "shared-job", "plan several jobs sharing the cache, one per flag: SPEC is comma-separated key=value pairs of "+
		"name, seed, window, batch_size, world, epochs, first_epoch, drop_last, speed, start; a key not given takes this command's flag (speed 1, start 0)")
	cl.register(fs)
	imp.register(fs)
	s3.Register(fs)
	if err := cli.ParseFlags(fs, env, args, "brand plan --src URL [--cache-size 4GiB] [--disk-cache-size 100GiB] [--nodes N [--ranks-per-node R]] [--snapshot FILE | --job J --importance V] [--hot H] [--shared-job SPEC ...] [job flags]"); err != nil {
		return err
	}
	if src == "" {
		return fmt.Errorf("--src is required: the dataset to plan for")
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
	store, err := s3backend.Open(ctx, src, s3.Config())
	if err != nil {
		return err
	}
	ix, err := dataset.ReadIndex(ctx, store)
	if err != nil {
		return err
	}
	if len(jobs) > 0 {
		plan, err := planner.MakeSharedPlan(ctx, planner.SharedInput{Dataset: planner.DatasetOf(ix), Jobs: jobs, CacheBytes: int64(cache)})
		if err != nil {
			return err
		}
		return writePlan(env, plan, asJSON)
	}
	impMode, err := imp.load(ctx, store, ix)
	if err != nil {
		return err
	}
	if cl.nodes > 0 {
		if impMode != nil {
			return fmt.Errorf("--nodes %d: importance mode is planned for one gateway; drop --nodes or the snapshot", cl.nodes)
		}
		plan, err := planner.MakeClusterPlanContext(ctx, planner.ClusterInput{
			Dataset:            planner.DatasetOf(ix),
			Job:                job,
			IndexKey:           cluster.IndexKey(ix.ID()),
			Nodes:              cl.nodes,
			NodeCacheBytes:     int64(cache),
			NodeDiskCacheBytes: int64(disk),
		})
		if err != nil {
			return err
		}
		return writePlan(env, plan, asJSON)
	}
	plan, err := planner.MakePlan(planner.PlanInput{
		Dataset:            planner.DatasetOf(ix),
		Job:                job,
		CacheBytes:         int64(cache),
		DiskCacheBytes:     int64(disk),
		BackendBytesPerSec: float64(bw),
		ConsumeBytesPerSec: float64(consume),
		PrefetchWindows:    pf,
		Importance:         impMode,
	})
	if err != nil {
		return err
	}
	return writePlan(env, plan, asJSON)
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
