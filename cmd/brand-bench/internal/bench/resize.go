package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/shuffle"
)

// The resize benchmark (brand-bench resize): a data-parallel job of World
// ranks reads Epochs epochs from a cluster of `brand serve` processes over
// one MinIO while the cluster is resized under it through --peers-file —
// 3 nodes, two joining in the middle of epoch 0 (5), one leaving in the
// middle of epoch 1 on a planned leave (removed from the file, then
// SIGTERM: 4), and in the middle of the last epoch one of the 4 killed
// (SIGKILL) — and, side by side in the same run, the same job on a fixed
// cluster of 4 nodes that loses one node the same way in the last epoch.
// Runs alternate (fixed, resize, fixed, …) so that the machine's noise
// hits both.
//
// Between epochs the harness waits until the live nodes agree on the
// membership and gives the ranks its members, as a job that asks GET
// /cluster at every epoch does; each rank pins the version of its first
// answer (the Go client does). A change runs while the ranks read: its
// window starts when the file is rewritten (or the signal sent) and ends
// when every live node agrees on the new membership with every live
// member up (a kill: when every live node sees the victim down).
//
// Figures: p99 batch latency over the batches in flight during each
// change against the fixed cluster's over the same epoch (the issue's
// target: ≤ 2×), the store's bytes and GETs over the epochs before the
// kill against the fixed cluster's (≤ 1.05×), sample bytes fetched from
// peers against those read from the store, and each change's duration.

// ResizeConfig describes a resize benchmark run. Zero fields take
// DefaultResizeConfig's values.
type ResizeConfig struct {
	Samples   int
	MeanBytes int64
	ChunkSize int64
	Seed      uint64

	BatchSize int
	Window    int
	World     int
	Epochs    int     // at least 3: the join, the leave, and the kill in the last
	NodeCache float64 // each node's cache, a fraction of the dataset
	ChangeAt  float64 // where in an epoch a change starts, a fraction of its steps
	// StepTime is the training step each global step takes once its
	// batches are in: the ranks ask for the next step's batches no
	// sooner, as a training loop does, so that a change spans steps
	// rather than racing through the rest of an epoch.
	StepTime  time.Duration
	Pairs     int // alternations of the fixed and the resized cluster
	PeersPoll time.Duration

	GatewayArgs   []string
	ConfigTimeout time.Duration
	Harness
}

// DefaultResizeConfig: 16,384 samples of 8 KiB (about 140 MiB) in 1 MiB
// chunks, batch 32 × 8 ranks (64 steps an epoch) with a training step of
// 20 ms, window 32, four epochs, each node's cache 40 % of the dataset
// (three nodes hold it), changes at the middle of an epoch, three pairs,
// the member file polled every 200 ms.
func DefaultResizeConfig() ResizeConfig {
	return ResizeConfig{Samples: 16384, MeanBytes: 8 << 10, ChunkSize: 1 << 20, Seed: 35,
		BatchSize: 32, Window: 32, World: 8, Epochs: 4, NodeCache: 0.4, ChangeAt: 0.5, StepTime: 20 * time.Millisecond, Pairs: 3,
		PeersPoll: 200 * time.Millisecond, ConfigTimeout: 10 * time.Minute}
}

// The targets of a resize against a fixed cluster.
const (
	resizeLatencyTarget = 2.0  // p99 during a change ÷ the fixed cluster's over the same epoch
	resizeStoreTarget   = 1.05 // store bytes before the kill ÷ the fixed cluster's
)

func (c ResizeConfig) withDefaults() (ResizeConfig, error) {
	fillZero(&c, DefaultResizeConfig())
	if err := c.check(); err != nil {
		return c, err
	}
	switch {
	case c.Epochs < 3 || c.BatchSize < 1 || c.Window < 1 || c.World < 1 || c.Pairs < 1:
		return c, fmt.Errorf("%w: epochs >= 3, and batch size, window, world and pairs >= 1", ErrConfig)
	case !(c.NodeCache > 0 && c.NodeCache <= 1) || !(c.ChangeAt >= 0 && c.ChangeAt < 1):
		return c, fmt.Errorf("%w: node cache in (0, 1], change point in [0, 1)", ErrConfig)
	}
	return c, nil
}

// The scenarios.
const (
	resizeFixed   = "fixed 4"
	resizeResized = "3 → 5 → 4"
)

// RunResize runs the resize benchmark. Every run is bounded by
// cfg.ConfigTimeout, the whole by ctx.
func RunResize(ctx context.Context, cfg ResizeConfig) (*ResizeReport, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	started := time.Now()
	srv, url, ix, err := syntheticInMinIO(ctx, cfg.WorkDir, "resize", synth.Spec{Samples: cfg.Samples, MeanBytes: cfg.MeanBytes, Classes: 100, Seed: cfg.Seed}, cfg.ChunkSize)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	rep := &ResizeReport{Header: newHeader(started, cfg.Command),
		Samples: ix.NumSamples(), MeanBytes: cfg.MeanBytes, Bytes: ix.TotalBytes(), Chunks: ix.NumChunks(),
		BatchSize: cfg.BatchSize, World: cfg.World, Window: cfg.Window, Epochs: cfg.Epochs,
		Steps:     int(math.Ceil(float64(ix.NumSamples()) / float64(cfg.BatchSize*cfg.World))),
		NodeCache: int64(cfg.NodeCache * float64(ix.TotalBytes())), StepMs: ms(cfg.StepTime)}
	logf(cfg.Log, "dataset: %d samples in %d chunks (%s); each node's cache %s", rep.Samples, rep.Chunks, sizeString(rep.Bytes), sizeString(rep.NodeCache))
	rc := &resizeCluster{cfg: cfg, srv: srv, url: url, bytes: rep.Bytes, cache: rep.NodeCache, steps: rep.Steps}
	for pair := range cfg.Pairs {
		for _, scenario := range []string{resizeFixed, resizeResized} {
			run, err := rc.run(ctx, scenario, pair)
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

// resizeCluster runs the scenarios' clusters over one store.
type resizeCluster struct {
	cfg   ResizeConfig
	srv   *miniotest.Server
	url   string // the dataset
	bytes int64  // its size
	cache int64
	steps int
}

// resizeEvent is a change of a scenario: before step Step of epoch
// Epoch, the member file becomes Members (when not nil), then Join start,
// Leave is sent SIGTERM and Kill SIGKILL.
type resizeEvent struct {
	epoch   int
	what    string
	members []int
	join    []int
	leave   int // -1: none
	kill    int // -1: none
}

// scenario returns the nodes a scenario starts with and its changes.
// Node k is member k of the five URLs sorted, so that the joiners sort
// between the first members and every rank's home moves on a join.
func (rc *resizeCluster) scenario(name string) ([]int, []resizeEvent) {
	last := rc.cfg.Epochs - 1
	kill := resizeEvent{epoch: last, what: "SIGKILL of 1 of 4", leave: -1, kill: 1}
	if name == resizeFixed {
		return []int{0, 1, 3, 4}, []resizeEvent{kill}
	}
	return []int{0, 2, 4}, []resizeEvent{
		{epoch: 0, what: "3 → 5 (two joins)", members: []int{0, 1, 2, 3, 4}, join: []int{1, 3}, leave: -1, kill: -1},
		{epoch: 1, what: "5 → 4 (planned leave)", members: []int{0, 1, 3, 4}, leave: 2, kill: -1},
		kill,
	}
}

// resizeNode is one node of a run.
type resizeNode struct {
	k    int
	url  string
	args []string
	proc *gatewayProc
}

// run runs one scenario on fresh processes.
func (rc *resizeCluster) run(ctx context.Context, scenario string, pair int) (ResizeRun, error) {
	cfg := rc.cfg
	ctx, cancel := context.WithTimeout(ctx, cfg.ConfigTimeout)
	defer cancel()
	out := ResizeRun{Scenario: scenario, Pair: pair}
	ports, err := loopbackPorts(5)
	if err != nil {
		return out, err
	}
	urls := make([]string, len(ports))
	for k, port := range ports {
		urls[k] = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	tag := strings.NewReplacer(" ", "", "→", "-").Replace(scenario)
	peersFile := filepath.Join(cfg.WorkDir, fmt.Sprintf("resize-%s-%d.peers", tag, pair))
	// A peer secret, as a deployment has.
	secret := filepath.Join(cfg.WorkDir, "resize-peer-secret")
	if err := os.WriteFile(secret, []byte("peer secret of the resize benchmark\n"), 0o600); err != nil {
		return out, err
	}
	nodes := make([]*resizeNode, len(urls))
	for k := range nodes {
		nodes[k] = &resizeNode{k: k, url: urls[k], args: append([]string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[k]),
			"--dataset", "resize=" + rc.url, "--s3-endpoint", rc.srv.URL(),
			"--cache-size", strconv.FormatInt(rc.cache, 10), "--cache-prefault=false",
			"--peers-file", peersFile, "--advertise", urls[k], "--peers-poll", cfg.PeersPoll.String(), "--peer-secret-file", secret,
			"--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s", "--index-poll", "0"}, cfg.GatewayArgs...)}
	}
	env := gatewayEnv(rc.srv.AccessKey, rc.srv.SecretKey)
	start := func(n *resizeNode) error {
		p, err := startGateway(ctx, cfg.GatewayBinary, n.args, env, filepath.Join(cfg.WorkDir, fmt.Sprintf("resize-%s-%d-node%d.log", tag, pair, n.k)))
		n.proc = p
		return err
	}
	defer func() {
		for _, n := range nodes {
			if n.proc != nil {
				n.proc.kill()
			}
		}
	}()
	initial, events := rc.scenario(scenario)
	members := initial
	if err := writeMembers(peersFile, urls, members); err != nil {
		return out, err
	}
	live := map[int]bool{}
	var wg sync.WaitGroup
	errs := make([]error, len(nodes))
	for _, k := range initial {
		live[k] = true
		wg.Go(func() { errs[k] = start(nodes[k]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return out, err
	}
	hc := &http.Client{Transport: newTransport(cfg.World + 4)}
	defer hc.CloseIdleConnections()
	gone := resizeCounters{} // the counters of the nodes that left or died
	sum := func() (resizeCounters, error) {
		c := gone.clone()
		for k := range live {
			m, err := nodes[k].proc.metrics(ctx)
			if err != nil {
				return c, err
			}
			c.add(countersOf(m))
		}
		return c, nil
	}
	for e := range cfg.Epochs {
		if err := waitMembers(ctx, hc, urls, live, members); err != nil {
			return out, err
		}
		before, err := sum()
		if err != nil {
			return out, err
		}
		var ev *resizeEvent
		for i := range events {
			if events[i].epoch == e {
				ev = &events[i]
			}
		}
		ep := ResizeEpoch{Epoch: e, Nodes: strconv.Itoa(len(live))}
		var change *ResizeChange
		var changeStart time.Time
		var changeDone chan error
		step := int(cfg.ChangeAt * float64(rc.steps))
		onStep := func(m int) error {
			if ev == nil || m != step {
				return nil
			}
			change = &ResizeChange{Epoch: e, What: ev.what, Step: m}
			changeStart = time.Now()
			changeDone = make(chan error, 1)
			if ev.members != nil {
				if err := writeMembers(peersFile, urls, ev.members); err != nil {
					return err
				}
			}
			var leaving *gatewayProc
			var leaverLast chan resizeCounters
			for _, k := range []int{ev.leave, ev.kill} {
				if k < 0 {
					continue
				}
				m, err := nodes[k].proc.metrics(ctx)
				if err != nil {
					return err
				}
				delete(live, k)
				if k == ev.kill {
					gone.add(countersOf(m))
					nodes[k].proc.kill()
					continue
				}
				// A leaving node serves on while it hands its chunks
				// over: its counters are read until it exits.
				leaving = nodes[k].proc
				leaverLast = make(chan resizeCounters, 1)
				go func() {
					last := countersOf(m)
					for {
						select {
						case <-leaving.exited:
							leaverLast <- last
							return
						case <-time.After(100 * time.Millisecond):
						}
						if m, err := leaving.metrics(ctx); err == nil {
							last = countersOf(m)
						}
					}
				}()
				if err := leaving.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					return err
				}
			}
			after := members
			if ev.members != nil {
				after = ev.members
			}
			go func() {
				jerrs := make([]error, len(ev.join))
				var jw sync.WaitGroup
				for i, k := range ev.join {
					jw.Go(func() { jerrs[i] = start(nodes[k]) })
				}
				jw.Wait()
				if err := errors.Join(jerrs...); err != nil {
					changeDone <- err
					return
				}
				now := map[int]bool{}
				for k := range live {
					now[k] = true
				}
				for _, k := range ev.join {
					now[k] = true
				}
				if err := waitMembers(ctx, hc, urls, now, after); err != nil {
					changeDone <- err
					return
				}
				if leaving != nil {
					select {
					case <-leaving.exited:
						if leaving.waitErr != nil {
							changeDone <- fmt.Errorf("bench: the leaving node exited with %w; see %s", leaving.waitErr, leaving.logPath)
							return
						}
						gone.add(<-leaverLast)
					case <-ctx.Done():
						changeDone <- ctx.Err()
						return
					}
				}
				change.Seconds = time.Since(changeStart).Seconds()
				if ev.members != nil {
					ms, err := cluster.NewMembership(pick(urls, after))
					if err == nil {
						err = lastChanges(ctx, hc, urls, now, ms.Version(), change)
					}
					if err != nil {
						changeDone <- err
						return
					}
				}
				changeDone <- nil
			}()
			return nil
		}
		batches, err := rc.readEpoch(ctx, hc, e, pick(urls, members), onStep)
		if err != nil {
			return out, fmt.Errorf("bench: %s, epoch %d: %w", scenario, e, err)
		}
		if change != nil {
			if err := <-changeDone; err != nil {
				return out, err
			}
			end := changeStart.Add(time.Duration(change.Seconds * float64(time.Second)))
			var during []time.Duration
			for _, b := range batches {
				if b.start.Before(end) && b.start.Add(b.d).After(changeStart) {
					during = append(during, b.d)
				}
			}
			change.Batches, change.P99 = len(during), ms(percentile(during, 99))
			for _, k := range ev.join {
				live[k] = true
			}
			if ev.members != nil {
				members = ev.members
			}
			ep.Nodes += " → " + strconv.Itoa(len(live))
			out.Changes = append(out.Changes, *change)
			logf(cfg.Log, "%s, pair %d, epoch %d: %s took %.2f s; %d batches in flight, p99 %.1f ms", scenario, pair, e, change.What, change.Seconds, change.Batches, change.P99)
		}
		after, err := sum()
		if err != nil {
			return out, err
		}
		d := after.minus(before)
		ep.StoreBytes, ep.StoreGets, ep.PeerBytes, ep.DeliveredBytes, ep.Membership = d.store, d.gets, d.peer, d.delivered, d.membership
		all := make([]time.Duration, len(batches))
		for i, b := range batches {
			all[i] = b.d
		}
		ep.P50, ep.P99 = ms(percentile(all, 50)), ms(percentile(all, 99))
		if len(batches) > 0 {
			first, last := batches[0].start, batches[0].start
			for _, b := range batches {
				last = maxTime(last, b.start.Add(b.d))
			}
			ep.Seconds = last.Sub(first).Seconds()
		}
		out.Epochs = append(out.Epochs, ep)
		logf(cfg.Log, "%s, pair %d, epoch %d (%s nodes): store %.3f × dataset in %.0f GETs, peers %.3f × dataset, p50 %.1f ms, p99 %.1f ms",
			scenario, pair, e, ep.Nodes, ep.StoreBytes/float64(rc.bytes), ep.StoreGets, ep.PeerBytes/float64(rc.bytes), ep.P50, ep.P99)
	}
	for _, n := range nodes {
		if n.proc != nil && live[n.k] {
			if err := n.proc.stop(10 * time.Second); err != nil {
				return out, err
			}
		}
	}
	return out, nil
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// timedBatch is one batch's request: when it was sent and how long it
// took.
type timedBatch struct {
	start time.Time
	d     time.Duration
}

// readEpoch reads an epoch step by step, the world's ranks reading their
// batch of each step together through clients given members as their
// peer list; onStep runs before each step, without holding the ranks
// back for longer than it takes. Every rank's batches must come whole,
// within the client's retry.
func (rc *resizeCluster) readEpoch(ctx context.Context, hc *http.Client, epoch int, members []string, onStep func(m int) error) ([]timedBatch, error) {
	cfg := rc.cfg
	clients := make([]*client.Client, cfg.World)
	for r := range cfg.World {
		c, err := client.New("", client.Options{Peers: members, HTTPClient: hc,
			Job: api.Job{Params: shuffle.Params{Seed: 9, Window: cfg.Window, BatchSize: cfg.BatchSize, World: cfg.World, Rank: r}}})
		if err != nil {
			return nil, err
		}
		clients[r] = c
	}
	var out []timedBatch
	samples := 0
	var mu sync.Mutex
	for m := range rc.steps {
		next := time.Now().Add(cfg.StepTime)
		if err := onStep(m); err != nil {
			return nil, err
		}
		errs := make([]error, cfg.World)
		var wg sync.WaitGroup
		for r := range cfg.World {
			wg.Go(func() {
				start := time.Now()
				_, h, err := clients[r].BatchRaw(ctx, epoch, m, io.Discard)
				d := time.Since(start)
				if err != nil {
					errs[r] = err
					return
				}
				mu.Lock()
				out = append(out, timedBatch{start, d})
				samples += h.Samples
				mu.Unlock()
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		time.Sleep(time.Until(next))
	}
	if want := rc.steps * cfg.World * cfg.BatchSize; samples < want-cfg.World*cfg.BatchSize || samples > want {
		return nil, fmt.Errorf("%d samples read in the epoch", samples)
	}
	return out, nil
}
