package bench

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/internal/testsupport/throttlefront"
	"github.com/brandgw/brand/shuffle"
)

// The store's budget benchmark (brand-bench budget): a cluster of Nodes
// `brand serve` processes over one MinIO, reached through an S3 front
// (internal/testsupport/throttlefront) that answers 503 SlowDown to GETs
// past a rate a second, as S3 does past its limits; a job of World ranks
// (goroutines of this process, each with the Go client, each reading
// from its home node) reads Epochs epochs. First one epoch with no limit
// and no budget measures the GETs a second the job asks unpaced; the
// front's limit and the budget are then Fraction of that, and the job
// runs twice, alternating Rounds times: with per-request retries alone
// (no budget: what a gateway did before the budget) and paced under the
// budget (--store-gets-per-sec, split among the nodes).
//
// Figures per run, from the front: GETs sent, those throttled, GETs
// answered a second over the run and its ratio to the budget, the
// busiest second's; from the ranks: errors reaching them, and how long
// each waited for each batch (p50, p99); from the nodes: requests that
// waited for the budget (brand_store_paced_waits_total) and the 503s they
// saw (brand_store_throttled_total).

// BudgetConfig describes a budget benchmark run. Zero fields take
// DefaultBudgetConfig's values.
type BudgetConfig struct {
	Samples   int
	MeanBytes int64
	ChunkSize int64
	Seed      uint64

	Nodes     int
	BatchSize int
	Window    int
	World     int
	Epochs    int
	NodeCache float64 // each node's cache, a fraction of the dataset
	Fraction  float64 // the budget and the front's limit, a fraction of the unpaced rate
	Rounds    int     // alternations of the retries-only and the paced run

	GatewayArgs   []string
	ConfigTimeout time.Duration
	Harness
}

// DefaultBudgetConfig is the setting: 4 nodes, 64 ranks, three
// epochs, a budget of half the unpaced rate.
func DefaultBudgetConfig() BudgetConfig {
	return BudgetConfig{Samples: 24000, MeanBytes: 2 << 10, ChunkSize: 16 << 10, Seed: 41,
		Nodes: 4, BatchSize: 8, Window: 4, World: 64, Epochs: 3, NodeCache: 0.05, Fraction: 0.5, Rounds: 1,
		ConfigTimeout: 15 * time.Minute}
}

// The targets of the paced run.
const (
	budgetThrottledTarget = 0.01 // GETs the store throttles, a share of those sent
	budgetRateTarget      = 0.9  // GETs answered a second ÷ the budget
	budgetSecondTarget    = 1.05 // the busiest second ÷ the budget
)

func (c BudgetConfig) withDefaults() (BudgetConfig, error) {
	fillZero(&c, DefaultBudgetConfig())
	if err := c.check(); err != nil {
		return c, err
	}
	switch {
	case c.Nodes < 1 || c.Epochs < 1 || c.BatchSize < 1 || c.Window < 1 || c.World < 1 || c.Rounds < 1:
		return c, fmt.Errorf("%w: nodes, epochs, batch size, window, world and rounds >= 1", ErrConfig)
	case !(c.NodeCache > 0 && c.NodeCache <= 1) || !(c.Fraction > 0 && c.Fraction <= 1):
		return c, fmt.Errorf("%w: node cache and the budget's fraction in (0, 1]", ErrConfig)
	}
	return c, nil
}

// The runs.
const (
	budgetFree    = "unthrottled"
	budgetRetries = "retries only"
	budgetPaced   = "paced"
)

// RunBudget runs the budget benchmark. Every run is bounded by
// cfg.ConfigTimeout, the whole by ctx.
func RunBudget(ctx context.Context, cfg BudgetConfig) (*BudgetReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	started := time.Now()
	srv, url, ix, err := syntheticInMinIO(ctx, cfg.WorkDir, "budget", synth.Spec{Samples: cfg.Samples, MeanBytes: cfg.MeanBytes, Classes: 100, Seed: cfg.Seed}, cfg.ChunkSize)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	rep := &BudgetReport{Header: newHeader(started, cfg.Command),
		Samples: ix.NumSamples(), Bytes: ix.TotalBytes(), Chunks: ix.NumChunks(), Nodes: cfg.Nodes,
		BatchSize: cfg.BatchSize, World: cfg.World, Window: cfg.Window, Epochs: cfg.Epochs,
		NodeCache: int64(cfg.NodeCache * float64(ix.TotalBytes())), Fraction: cfg.Fraction}
	logf(cfg.Log, "dataset: %d samples in %d chunks (%s); %d nodes, each node's cache %s", rep.Samples, rep.Chunks, sizeString(rep.Bytes), cfg.Nodes, sizeString(rep.NodeCache))
	bc := &budgetCluster{cfg: cfg, srv: srv, url: url, cache: rep.NodeCache}
	free, err := bc.run(ctx, budgetFree, 0, 0, 0)
	if err != nil {
		return nil, err
	}
	rep.Runs = append(rep.Runs, free)
	rep.Budget = int(cfg.Fraction * free.Rate)
	logf(cfg.Log, "unpaced: %.0f GETs a second; the store's limit and the budget: %d", free.Rate, rep.Budget)
	if rep.Budget < 10 {
		return nil, fmt.Errorf("bench: the job reads %.0f GETs a second unpaced: too few for a budget of a fraction of it", free.Rate)
	}
	for round := range cfg.Rounds {
		for _, name := range []string{budgetRetries, budgetPaced} {
			budget := 0
			if name == budgetPaced {
				budget = rep.Budget
			}
			run, err := bc.run(ctx, name, round, rep.Budget, budget)
			if err != nil {
				return nil, err
			}
			rep.Runs = append(rep.Runs, run)
		}
	}
	rep.Targets = rep.targets()
	rep.Seconds = time.Since(started).Seconds()
	return rep, nil
}

// budgetCluster runs the runs' clusters over one store.
type budgetCluster struct {
	cfg   BudgetConfig
	srv   *miniotest.Server
	url   string // the dataset
	cache int64
}

// run runs the job on fresh nodes behind a fresh front that throttles
// past limit GETs a second (0: none), the nodes paced under budget (0:
// none): one epoch for the unthrottled run, the configuration's for the
// others.
func (bc *budgetCluster) run(ctx context.Context, name string, round, limit, budget int) (BudgetRun, error) {
	cfg := bc.cfg
	ctx, cancel := context.WithTimeout(ctx, cfg.ConfigTimeout)
	defer cancel()
	epochs := cfg.Epochs
	if name == budgetFree {
		epochs = 1
	}
	out := BudgetRun{Name: name, Round: round, Limit: limit, Budget: budget, Epochs: epochs}
	front, err := throttlefront.Start(bc.srv.URL(), throttlefront.Config{Rate: limit})
	if err != nil {
		return out, err
	}
	defer front.Close()
	ports, err := loopbackPorts(cfg.Nodes)
	if err != nil {
		return out, err
	}
	urls := make([]string, len(ports))
	all := make([]int, len(ports))
	for k, port := range ports {
		urls[k], all[k] = fmt.Sprintf("http://127.0.0.1:%d", port), k
	}
	tag := strings.ReplaceAll(name, " ", "-")
	peersFile := filepath.Join(cfg.WorkDir, fmt.Sprintf("budget-%s-%d.peers", tag, round))
	if err := writeMembers(peersFile, urls, all); err != nil {
		return out, err
	}
	env := gatewayEnv(bc.srv.AccessKey, bc.srv.SecretKey)
	procs := make([]*gatewayProc, cfg.Nodes)
	defer func() {
		for _, p := range procs {
			if p != nil {
				p.kill()
			}
		}
	}()
	var wg sync.WaitGroup
	errs := make([]error, cfg.Nodes)
	for k := range procs {
		args := append([]string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[k]),
			"--dataset", "budget=" + bc.url, "--s3-endpoint", front.URL,
			"--cache-size", strconv.FormatInt(bc.cache, 10), "--cache-prefault=false",
			"--peers-file", peersFile, "--advertise", urls[k], "--peers-poll", "500ms",
			"--log-format", "json", "--log-level", "info", "--index-poll", "0",
			"--store-gets-per-sec", strconv.Itoa(budget)}, cfg.GatewayArgs...)
		wg.Go(func() {
			procs[k], errs[k] = startGateway(ctx, cfg.GatewayBinary, args, env, filepath.Join(cfg.WorkDir, fmt.Sprintf("budget-%s-%d-node%d.log", tag, round, k)))
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return out, err
	}
	hc := &http.Client{Transport: newTransport(cfg.World + 4)}
	defer hc.CloseIdleConnections()
	live := map[int]bool{}
	for k := range procs {
		live[k] = true
	}
	if err := waitMembers(ctx, hc, urls, live, all); err != nil {
		return out, err
	}
	before := front.Counts()
	start := time.Now()
	var mu sync.Mutex
	var waits []time.Duration
	errCount := 0
	var ranks sync.WaitGroup
	for rank := range cfg.World {
		ranks.Go(func() {
			home := urls[cluster.Home(rank, cfg.World, cfg.Nodes)]
			c, err := client.New(home, client.Options{HTTPClient: hc, Job: api.Job{Params: shuffle.Params{Seed: cfg.Seed, World: cfg.World, Rank: rank, BatchSize: cfg.BatchSize, Window: cfg.Window}}, Ahead: 2})
			if err != nil {
				mu.Lock()
				errCount++
				mu.Unlock()
				return
			}
			var mine []time.Duration
			failed := 0
			for e := range epochs {
				last := time.Now()
				for _, err := range c.Epoch(ctx, e) {
					now := time.Now()
					if err != nil {
						failed++
						logf(cfg.Log, "%s: rank %d epoch %d: %v", name, rank, e, err)
						break
					}
					mine = append(mine, now.Sub(last))
					last = now
				}
			}
			mu.Lock()
			waits = append(waits, mine...)
			errCount += failed
			mu.Unlock()
		})
	}
	ranks.Wait()
	out.Seconds = time.Since(start).Seconds()
	after := front.Counts()
	out.GETs = after.Gets - before.Gets
	out.Heads = after.Heads - before.Heads
	out.Throttled = after.Throttled - before.Throttled
	out.Errors = errCount
	out.Batches = len(waits)
	out.Rate = float64(out.GETs-out.Throttled) / out.Seconds
	slices.Sort(waits)
	out.P50, out.P99 = ms(percentile(waits, 50)), ms(percentile(waits, 99))
	secs := front.PerSecond()
	from, to := start.Unix(), time.Now().Unix()
	for s, n := range secs {
		// Whole seconds of the run only: its first and last are partial.
		if s > from && s < to {
			out.Busiest = max(out.Busiest, n)
		}
	}
	for _, p := range procs {
		m, err := p.metrics(ctx)
		if err != nil {
			return out, err
		}
		out.PacedWaits += m["brand_store_paced_waits_total"]
		out.NodesThrottled += m["brand_store_throttled_total"]
	}
	logf(cfg.Log, "%s (round %d): %d GETs, %d throttled, %.0f answered a second, %d errors at ranks, batch wait p50 %.1f ms p99 %.1f ms",
		name, round, out.GETs, out.Throttled, out.Rate, out.Errors, out.P50, out.P99)
	return out, nil
}
