package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/shuffle"
)

// TestClusterResize resizes a cluster of `brand serve` processes under a
// running job, as an operator does with --peers-file (on Kubernetes the
// headless Service's records change the same way under kubectl scale):
// 8 ranks read 3 epochs through the Go client while the cluster goes from
// 3 nodes to 5 in the middle of epoch 0 (two joins: the file lists them,
// then they start), to 4 in the middle of epoch 1 (a planned leave: the
// node is removed from the file and sent SIGTERM), and loses one of the
// 4 to SIGKILL in the middle of epoch 2.
//
// What it holds to: every epoch exactly once and byte-equal to the
// source; every global step's samples those of the same job on a single
// gateway, each rank's in that step's order; every batch read without an
// error (what fails over does so inside the client's documented retry);
// every rank of an epoch pinned to the membership the cluster agreed on
// when the epoch began. The ranks of each epoch are given the member
// list the cluster agrees on at its start, as a job that asks GET
// /cluster at each epoch does; between epochs the test waits until the
// live nodes agree, the procedure docs/scale-out.md gives for jobs that
// need exactness. The figures (store reads, latency around each change)
// are logged; brand-bench resize measures them against a fixed cluster.
func TestClusterResize(t *testing.T) {
	const nodes, world, batchSize, window, epochs, changeStep = 5, 8, 32, 16, 3, 5
	spec := synth.Spec{Samples: 4096, MeanBytes: 4 << 10, Classes: 10, Seed: 35}
	p := packToMinIO(t, spec, 256<<10)
	ix := p.index(t)
	dataset := float64(ix.TotalBytes())
	// 40 % of the dataset a node: three nodes hold it, barely, so that
	// where chunks are read from matters.
	cache := int64(0.4 * dataset)
	// With a peer secret, as a deployment runs: a node then counts what
	// it serves to each peer, which shows a joiner owning chunks.
	cs := newClusterSetup(t, p, nodes, "http", "peer secret of the resize test cluster")
	bin, env, urls := cs.bin, cs.env, cs.urls
	peersFile := filepath.Join(cs.dir, "peers")
	procs := make([]*clusterProc, nodes)
	for k := range nodes {
		procs[k] = cs.proc(k, p, "--cache-size", strconv.FormatInt(cache, 10), "--cache-prefault=false",
			"--peers-file", peersFile, "--advertise", urls[k], "--peers-poll", "200ms", "--peer-secret-file", cs.secret)
	}
	// The joiners sort between the first members (node k is member k of
	// the full list), so that the homes of every rank move on a join.
	first, full, afterLeave := []int{0, 2, 4}, []int{0, 1, 2, 3, 4}, []int{0, 1, 3, 4}
	const leaver, victim = 2, 1
	pick := func(ks []int) []string {
		out := make([]string, len(ks))
		for i, k := range ks {
			out[i] = urls[k]
		}
		return out
	}
	writePeers(t, peersFile, pick(first))
	startProcs(t, []*clusterProc{procs[0], procs[2], procs[4]}, bin, env, "")
	t.Cleanup(func() {
		for _, k := range []int{1, 3} {
			procs[k].stop(t)
		}
		keepLogs(t, []*clusterProc{procs[1], procs[3]}) // the joiners'; startProcs keeps the others'
	})

	// The same job on a single gateway: each global step's keys in order.
	_, single := p.gatewayOn(t, nil, 1<<30, "next-use")
	steps := ix.NumSamples() / (batchSize * world)
	ref := make([][][]string, epochs)
	for e := range epochs {
		for m := range steps {
			ref[e] = append(ref[e], manifestKeys(t, single, fmt.Sprintf("/epoch/%d/batch/%d/manifest?seed=9&window=%d&batch_size=%d&world=1", e, m, window, batchSize*world)))
		}
	}

	keys := p.keys()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: time.Minute}
	ctx := context.Background()
	// readEpoch reads an epoch step by step, each of the world's ranks
	// reading its batch of the step through its own client given members
	// as its peer list; change runs, without holding the ranks back,
	// before step changeStep. It checks the epoch and returns its batch
	// latencies by step and how many batches came from another node than
	// the rank's home.
	readEpoch := func(epoch int, members []string, change func()) ([][]time.Duration, int) {
		t.Helper()
		clients := rankClients(t, members, hc, shuffle.Params{Seed: 9, Window: window, BatchSize: batchSize, World: world})
		sorted := slices.Sorted(slices.Values(members))
		seen := make(map[string]int, spec.Samples)
		lat := make([][]time.Duration, steps)
		failovers := 0
		var mu sync.Mutex
		for m := range steps {
			if m == changeStep && change != nil {
				change()
			}
			got := make([][]string, world)
			var step sync.WaitGroup
			for r := range world {
				step.Go(func() {
					start := time.Now()
					b, err := clients[r].Batch(ctx, epoch, m)
					d := time.Since(start)
					if err != nil {
						t.Errorf("epoch %d step %d rank %d: %v", epoch, m, r, err)
						return
					}
					defer b.Release()
					mu.Lock()
					defer mu.Unlock()
					lat[m] = append(lat[m], d)
					if b.Node != sorted[cluster.Home(r, world, len(sorted))] {
						failovers++
					}
					for _, s := range b.Samples {
						p.checkSample(t, s, keys)
						seen[s.Key]++
						got[r] = append(got[r], s.Key)
					}
				})
			}
			step.Wait()
			if t.Failed() {
				t.FailNow()
			}
			checkStep(t, fmt.Sprintf("epoch %d step %d", epoch, m), ref[epoch][m], got, batchSize)
		}
		exactlyOnce(t, seen, spec.Samples, fmt.Sprintf("epoch %d over all ranks", epoch))
		want := mustMembership(t, members).Version()
		for r, c := range clients {
			if c.Members() != want {
				t.Errorf("epoch %d: rank %d pinned membership %q, want %s, the one the cluster agreed on at the epoch's start", epoch, r, c.Members(), want)
			}
		}
		return lat, failovers
	}
	type change struct {
		epoch         int
		what          string
		before, after []int // the members at the epoch's start and after the change
		run           func()
		lat           [][]time.Duration
		failovers     int
		epochCounters clusterCounters
	}
	live := map[int]bool{0: true, 2: true, 4: true}
	store := func() clusterCounters {
		var sum clusterCounters
		for k := range live {
			c, _ := counters(t, []*clusterProc{procs[k]}, nil)
			sum.store += c.store
			sum.home += c.home
			sum.peer += c.peer
		}
		return sum
	}
	var gone clusterCounters // what the nodes that left or died had counted
	leaveCounted := func(k int) {
		c, _ := counters(t, []*clusterProc{procs[k]}, nil)
		gone.store += c.store
		gone.home += c.home
		gone.peer += c.peer
		delete(live, k)
	}

	joined := make(chan error, 2)
	left := make(chan error, 1)
	changes := []*change{
		{epoch: 0, what: "3 → 5 nodes (two joins)", before: first, after: full, run: func() {
			writePeers(t, peersFile, pick(full))
			for _, k := range []int{1, 3} {
				go func() { joined <- procs[k].launch(bin, env) }()
			}
		}},
		{epoch: 1, what: "5 → 4 nodes (planned leave, SIGTERM)", before: full, after: afterLeave, run: func() {
			writePeers(t, peersFile, pick(afterLeave))
			leaveCounted(leaver)
			if err := procs[leaver].cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			go func() {
				select {
				case <-procs[leaver].exited:
					left <- procs[leaver].waitErr
				case <-time.After(time.Minute):
					left <- fmt.Errorf("node %d still running a minute after SIGTERM", leaver)
				}
			}()
		}},
		{epoch: 2, what: "4 → 3 live nodes (SIGKILL)", before: afterLeave, after: afterLeave, run: func() {
			leaveCounted(victim)
			procs[victim].kill()
		}},
	}
	// sum is the cluster's counters so far, those of the nodes gone
	// included.
	sum := func() clusterCounters {
		c := store()
		c.store += gone.store
		c.home += gone.home
		c.peer += gone.peer
		return c
	}
	total := sum()
	for _, ch := range changes {
		before := sum()
		ch.lat, ch.failovers = readEpoch(ch.epoch, pick(ch.before), ch.run)
		switch ch.epoch {
		case 0:
			for range 2 {
				if err := <-joined; err != nil {
					t.Fatal(err)
				}
			}
			live[1], live[3] = true, true
		case 1:
			if err := <-left; err != nil {
				t.Fatalf("the leaving node: %v; log:\n%s", err, tail(procs[leaver].logPath))
			}
			// It left as planned: the cluster agreed on the members
			// without it before it stopped, rather than its
			// --leave-timeout running out.
			if b, _ := os.ReadFile(procs[leaver].logPath); !strings.Contains(string(b), "the cluster agrees on a membership without this node") {
				t.Errorf("the leaving node stopped without the cluster agreeing on a membership without it; log:\n%s", tail(procs[leaver].logPath))
			}
		}
		ch.epochCounters = sum().minus(before)
		if ch.epoch == 1 {
			// The joiners took part: each is home to ranks (two of the
			// eight under five nodes, cluster.Home), which it served
			// from its own cache, the chunks it owns. What a joiner
			// serves to the other nodes is only logged: under locality
			// its two ranks take every sample of its chunks unless a
			// step holds more of them than its ranks' 64, and the
			// other nodes may still hold its chunks from epoch 0, so
			// whether any crosses depends on the chunks' owners, which
			// hash the nodes' ports (a soak round saw a joiner serve
			// its peers nothing, as designed).
			for _, k := range []int{1, 3} {
				m := scrape(t, urls[k], `brand_locality_bytes_total`, "brand_peer_bytes_served_total")
				home := m[`brand_locality_bytes_total{source="home"}`]
				if home == 0 {
					t.Errorf("joined node %d served its ranks no bytes from its own cache by the end of epoch 1 (%.0f from peers); it should be home to two ranks and own chunks",
						k, m[`brand_locality_bytes_total{source="peer"}`])
				}
				t.Logf("joined node %d by the end of epoch 1: %.0f batch bytes from its own cache, %.0f from peers, %.0f served to its peers",
					k, home, m[`brand_locality_bytes_total{source="peer"}`], m["brand_peer_bytes_served_total"])
			}
		}
		waitAgreed(t, pick(ch.after), live, urls, mustMembership(t, pick(ch.after)).Version())
	}
	run := sum().minus(total)
	t.Logf("over the run: store %.3f × dataset, delivered %.3f × dataset, cross-node %.1f %% of delivered",
		run.store/dataset, (run.home+run.peer)/dataset, 100*run.peer/(run.home+run.peer))
	for _, ch := range changes {
		steady := slices.Concat(ch.lat[:changeStep]...)
		during := slices.Concat(ch.lat[changeStep:min(changeStep+4, len(ch.lat))]...)
		c := ch.epochCounters
		t.Logf("epoch %d, %s at step %d: store %.3f × dataset, cross-node %.1f %%; batch p99 %s before, %s over the 4 steps from the change; %d batches failed over",
			ch.epoch, ch.what, changeStep, c.store/dataset, 100*c.peer/(c.home+c.peer), pct(steady, 99), pct(during, 99), ch.failovers)
	}
}

// writePeers replaces a --peers-file's list as an operator's tool would:
// a new file renamed over the old one, so that no poll reads half of it.
// rankClients returns the clients of a job's ranks, each through peers as
// its peer list, with job's parameters and its own rank.
func rankClients(t *testing.T, peers []string, hc *http.Client, job shuffle.Params) []*client.Client {
	t.Helper()
	clients := make([]*client.Client, job.World)
	for r := range job.World {
		job.Rank = r
		c, err := client.New("", client.Options{Peers: peers, HTTPClient: hc, Job: api.Job{Params: job}})
		if err != nil {
			t.Fatal(err)
		}
		clients[r] = c
	}
	return clients
}

func writePeers(t *testing.T, path string, urls []string) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, []byte("# the cluster's members\n"+strings.Join(urls, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func mustMembership(t *testing.T, urls []string) *cluster.Membership {
	t.Helper()
	ms, err := cluster.NewMembership(urls)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

// waitAgreed waits until every live node agrees on the membership
// version want and sees every live member of it up.
func waitAgreed(t *testing.T, members []string, live map[int]bool, urls []string, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for k := range live {
		for {
			var cl api.Cluster
			err := getJSONInto(urls[k]+"/cluster", &cl)
			ok := err == nil && cl.Members == want
			for _, n := range cl.Nodes {
				if ok && slices.Contains(members, n.URL) && live[slices.Index(urls, n.URL)] {
					ok = n.Up && n.Members == want
				}
			}
			if ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("node %d does not agree on membership %s with every live member up 30 s on: %+v (%v)", k, want, cl, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

func getJSONInto(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// manifestKeys returns the keys of a batch's manifest, in order.
func manifestKeys(t *testing.T, base, path string) []string {
	t.Helper()
	var m api.Manifest
	if err := getJSONInto(base+path, &m); err != nil {
		t.Fatal(err)
	}
	keys := make([]string, len(m.Samples))
	for i, s := range m.Samples {
		keys[i] = s.Key
	}
	return keys
}

// checkStep fails t unless the ranks' batches of a global step (got, by
// rank) hold exactly the samples of want, the same step of the job on a
// single gateway, batchSize each, and each rank's in want's order: a
// cluster decides only which rank of a step receives which sample.
func checkStep(t *testing.T, what string, want []string, got [][]string, batchSize int) {
	t.Helper()
	pos := make(map[string]int, len(want))
	for i, k := range want {
		pos[k] = i
	}
	n := 0
	for r, keys := range got {
		if len(keys) != batchSize {
			t.Fatalf("%s: rank %d received %d samples, want %d", what, r, len(keys), batchSize)
		}
		last := -1
		for _, k := range keys {
			i, ok := pos[k]
			if !ok {
				t.Fatalf("%s: rank %d received %s, which the single gateway's step does not hold", what, r, k)
			}
			if i <= last {
				t.Fatalf("%s: rank %d received %s out of the step's order", what, r, k)
			}
			last = i
			delete(pos, k)
			n++
		}
	}
	if n != len(want) {
		t.Fatalf("%s: the ranks received %d of the step's %d samples", what, n, len(want))
	}
}
