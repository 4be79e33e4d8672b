package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/internal/testsupport/netns"
	"github.com/brandgw/brand/shuffle"
)

// TestClusterPartitions runs four `brand serve` processes, each in a
// network namespace of its own on one bridge, with the store (MinIO,
// forwarded from a namespace of its own) and the clients (this process's
// sockets in a third) behind addresses of their own, and cuts the
// network under a synchronous job of 8 ranks reading through the Go
// client, one fault an epoch, each healed in the middle of its epoch:
//
//   - a node cut off from its peers, its clients and the store still
//     reachable;
//   - two asymmetric cuts: the peers cannot open connections to the node
//     while it reaches them, and the other way round;
//   - a gray failure: the node's sample requests dropped while its state
//     probes are answered;
//   - a node cut off from the store alone;
//   - a flapping link (the node's link down and up again, a few times);
//   - two halves of the cluster cut from each other.
//
// What it holds to, in every epoch: every sample exactly once and
// byte-equal to its source, every global step the single gateway's
// samples (each rank's in the step's order), every rank pinned to the
// one membership version, and no batch failed; and that the job keeps
// moving — no step during a fault slower than twice --peer-timeout — and
// that a healed fault costs no store reads in the warm epoch after it.
// The figures per fault (the worst step, store bytes of the fault's
// epoch and the next against the fixed cluster's warm epoch, failures
// counted) are logged: docs/scale-out.md, "Partitions", reports them.
func TestClusterPartitions(t *testing.T) {
	nw := netns.New(t)
	const (
		nodes, world, batchSize, window = 4, 8, 32, 16
		peerTimeout                     = 2 * time.Second
		bound                           = 2 * peerTimeout // the worst step a single fault may cost
		think                           = 150 * time.Millisecond
		faultStep                       = 3
		faultFor                        = 4 * time.Second
		victim                          = 1
	)
	spec := synth.Spec{Samples: 6144, MeanBytes: 2 << 10, Classes: 10, Seed: 53}
	p := packToMinIO(t, spec, 128<<10)
	ix := p.index(t)
	dataset := float64(ix.TotalBytes())
	cache := int64(0.4 * dataset)
	steps := ix.NumSamples() / (batchSize * world)

	clientHost, storeHost := nw.Host("client"), nw.Host("store")
	hosts := make([]*netns.Host, nodes)
	urls := make([]string, nodes)
	for k := range nodes {
		hosts[k] = nw.Host("n" + strconv.Itoa(k))
		urls[k] = "http://" + hosts[k].IP + ":8080"
	}
	if !slices.IsSorted(urls) {
		t.Fatalf("the nodes' URLs %v do not sort as the nodes are numbered", urls)
	}
	storeAddr := storeHost.Forward(storeHost.IP+":9000", p.server.Endpoint)
	hc := clientHost.HTTPClient(0)
	dir := t.TempDir()
	secret := filepath.Join(dir, "peer-secret")
	if err := os.WriteFile(secret, []byte("peer secret of the partition test cluster\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	bin := cmdtest.Build(t, "brand")
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+p.server.AccessKey, "AWS_SECRET_ACCESS_KEY="+p.server.SecretKey, "AWS_REGION=us-east-1")
	procs := make([]*clusterProc, nodes)
	for k := range nodes {
		procs[k] = &clusterProc{k: k, url: urls[k], logPath: filepath.Join(dir, fmt.Sprintf("node%d.log", k)),
			client: hc, command: hosts[k].Command,
			args: []string{"serve", "--listen", hosts[k].IP + ":8080", "--dataset", "synthetic=" + p.url,
				"--s3-endpoint", "http://" + storeAddr, "--cache-size", strconv.FormatInt(cache, 10), "--cache-prefault=false",
				"--peers", strings.Join(urls, ","), "--self", strconv.Itoa(k), "--peer-secret-file", secret,
				"--peer-timeout", peerTimeout.String(),
				"--log-format", "json", "--shutdown-timeout", "10s", "--index-poll", "0"}}
	}
	startProcs(t, procs, bin, env, "")
	members := mustMembership(t, urls).Version()

	// The same job on a single gateway: each global step's keys in order.
	_, single := p.gatewayOn(t, nil, 1<<30, "schedule")
	params := shuffle.Params{Seed: 9, Window: window, BatchSize: batchSize, World: world}
	ref := func(epoch int) [][]string {
		out := make([][]string, steps)
		for m := range steps {
			out[m] = manifestKeys(t, single, fmt.Sprintf("/epoch/%d/batch/%d/manifest?seed=9&window=%d&batch_size=%d&world=1", epoch, m, window, batchSize*world))
		}
		return out
	}
	keys := p.keys()
	names := []string{"brand_peer_fetch_failures_total", "brand_backend_read_bytes_total"}

	// epochRun is what one epoch did.
	type epochRun struct {
		worst     time.Duration // the slowest step
		worstStep int
		failovers int // batches served by another node than the rank's home
		store     float64
		failures  float64 // peer fetches failed, over the nodes
	}
	// readEpoch reads an epoch step by step, each rank through its own
	// Go client given the peer list, with think time between steps as a
	// training step's; before runs ahead of step m without holding the
	// ranks back.
	readEpoch := func(epoch int, before func(m int)) epochRun {
		t.Helper()
		want := ref(epoch)
		clients := make([]*client.Client, world)
		for r := range world {
			job := params
			job.Rank = r
			c, err := client.New("", client.Options{Peers: urls, HTTPClient: hc, Job: api.Job{Params: job}})
			if err != nil {
				t.Fatal(err)
			}
			clients[r] = c
		}
		m0 := sumOver(t, hc, urls, names)
		var run epochRun
		seen := make(map[string]int, spec.Samples)
		var mu sync.Mutex
		for m := range steps {
			if before != nil {
				before(m)
			}
			got := make([][]string, world)
			start := time.Now()
			var step sync.WaitGroup
			for r := range world {
				step.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
					defer cancel()
					b, err := clients[r].Batch(ctx, epoch, m)
					if err != nil {
						t.Errorf("epoch %d step %d rank %d: %v", epoch, m, r, err)
						return
					}
					defer b.Release()
					mu.Lock()
					defer mu.Unlock()
					if b.Node != urls[cluster.Home(r, world, nodes)] {
						run.failovers++
					}
					for _, s := range b.Samples {
						p.checkSample(t, s, keys)
						seen[s.Key]++
						got[r] = append(got[r], s.Key)
					}
				})
			}
			step.Wait()
			if d := time.Since(start); d > run.worst {
				run.worst, run.worstStep = d, m
			}
			if t.Failed() {
				t.FailNow()
			}
			checkStep(t, fmt.Sprintf("epoch %d step %d", epoch, m), want[m], got, batchSize)
			time.Sleep(think)
		}
		exactlyOnce(t, seen, spec.Samples, fmt.Sprintf("epoch %d over all ranks", epoch))
		for r, c := range clients {
			if c.Members() != members {
				t.Errorf("epoch %d: rank %d pinned membership %q, want %s, the cluster's one", epoch, r, c.Members(), members)
			}
		}
		m1 := sumOver(t, hc, urls, names)
		run.store = (m1["brand_backend_read_bytes_total"] - m0["brand_backend_read_bytes_total"]) / dataset
		run.failures = m1["brand_peer_fetch_failures_total"] - m0["brand_peer_fetch_failures_total"]
		return run
	}

	cold := readEpoch(0, nil)
	warm := readEpoch(1, nil)
	t.Logf("%-44s worst step %6s, store %.3f × dataset", "epoch 0 (cold, no fault)", cold.worst.Round(time.Millisecond), cold.store)
	t.Logf("%-44s worst step %6s, store %.3f × dataset", "epoch 1 (warm, no fault)", warm.worst.Round(time.Millisecond), warm.store)

	x := hosts[victim]
	peers := slices.Delete(slices.Clone(hosts), victim, victim+1)
	type fault struct {
		name  string
		apply func(stop <-chan struct{}) // returns once the fault is in place; stop ends a flapping one
	}
	faults := []fault{
		{"cut off from its peers", func(<-chan struct{}) { x.Cut(peers...) }},
		{"asymmetric: the peers cannot reach it", func(<-chan struct{}) {
			for _, h := range peers {
				h.Unreachable(8080, x)
			}
		}},
		{"asymmetric: it cannot reach the peers", func(<-chan struct{}) { x.Unreachable(8080, peers...) }},
		{"gray: its sample requests dropped", func(<-chan struct{}) { x.DropRequests(8080, "POST /internal/v2/samples") }},
		{"cut off from the store", func(<-chan struct{}) { x.Cut(storeHost) }},
		{"flapping link (0.4 s down, 0.8 s up)", func(stop <-chan struct{}) {
			go func() {
				for {
					x.LinkDown()
					select {
					case <-stop:
						return
					case <-time.After(400 * time.Millisecond):
					}
					x.LinkUp()
					select {
					case <-stop:
						return
					case <-time.After(800 * time.Millisecond):
					}
				}
			}()
		}},
		{"two halves cut from each other", func(<-chan struct{}) {
			hosts[0].Cut(hosts[2], hosts[3])
			hosts[1].Cut(hosts[2], hosts[3])
		}},
	}
	epoch := 2
	for _, f := range faults {
		var healed sync.WaitGroup
		run := readEpoch(epoch, func(m int) {
			if m != faultStep {
				return
			}
			stop := make(chan struct{})
			f.apply(stop)
			healed.Go(func() {
				time.Sleep(faultFor)
				close(stop)
				nw.Heal()
			})
		})
		healed.Wait()
		after := readEpoch(epoch+1, nil)
		t.Logf("%-44s worst step %6s (step %2d), store %.3f × dataset, %3.0f fetches failed, %2d batches failed over; the warm epoch after: worst step %6s, store %.3f",
			f.name, run.worst.Round(time.Millisecond), run.worstStep, run.store, run.failures, run.failovers, after.worst.Round(time.Millisecond), after.store)
		if run.worst > bound {
			t.Errorf("%s: the worst step took %s, over twice --peer-timeout (%s)", f.name, run.worst.Round(time.Millisecond), bound)
		}
		if after.store > warm.store+0.02 {
			t.Errorf("%s: the warm epoch after the fault healed read %.3f × the dataset from the store, the fixed cluster's warm epoch %.3f", f.name, after.store, warm.store)
		}
		// Every node sees every other up again before the next fault.
		waited := time.Now()
		for k := range nodes {
			waitUpVia(t, hc, urls, k, "")
		}
		if d := time.Since(waited); d > time.Second {
			t.Logf("  every node saw every other up again %s after the epoch after the fault", d.Round(100*time.Millisecond))
		}
		epoch += 2
	}
}

// sumOver sums the series of the metrics named over the nodes at urls.
func sumOver(t *testing.T, hc *http.Client, urls []string, names []string) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, u := range urls {
		for k, v := range scrapeVia(t, hc, u, "", names...) {
			out[k] += v
		}
	}
	return out
}
