package integration

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/internal/testsupport/netns"
	"github.com/brandgw/brand/internal/testsupport/pythontest"
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
//   - a node cut off from its peers and the store, its clients still
//     reaching it;
//   - a node cut off from the store alone;
//   - a flapping link (the node's link down and up again, a few times);
//   - two halves of the cluster cut from each other.
//
// What it holds to, in every epoch: every sample exactly once and
// byte-equal to its source, every global step the single gateway's
// samples (each rank's in the step's order), every rank pinned to the
// one membership version, and no batch failed; that every fault in which
// a fetch across the cut must time out counts one (a timeout taken for
// the asker giving up was neither counted nor held down, and stalled
// every step after it); that a node cut off from the store says so to
// its peers; and that a healed fault costs no store reads in the warm
// epoch after it. That the job keeps moving is measured, not asserted:
// the figures per fault (the worst step against twice --peer-timeout,
// the time lost, store bytes of the fault's epoch and the next against
// the fixed cluster's warm epoch, failures counted) are logged and
// written to a file; docs/scale-out.md, "Partitions", reports them —
// but for the faults a hedged read answers (a node cut off from its
// peers, either asymmetric cut, the gray failure and the flapping link),
// which must keep every step within hedgedStep and the fault's epoch's
// store reads within 1.2 × what the fixed cluster's cold epoch read.
// That bound is one of correctness, not speed: the step such a fault
// cost was a --peer-timeout (3.9 s here, 9.7 s by default).
func TestClusterPartitions(t *testing.T) {
	partitions(t, partitionRun{hedgeCeiling: 250 * time.Millisecond, samples: 4096, meanBytes: 2 << 10,
		faults: func(string) bool { return true }})
}

// TestClusterClientFaults runs the faults the clients see — a blip (the
// node cut off from everything, its clients too) and a flapping link of
// 0.3 s, each read by the Go client and by the Python client — on a
// cluster of the default hedge flags (--peer-hedge-ceiling 1 s, not
// TestClusterPartitions' 250 ms) with batches of 1.5 MiB (32 samples of
// 48 KiB), after a cold epoch, every step held to 1 s. (The Python
// client's on the flapping link was a figure until its stalled body
// failed over at its deadline: 1.09 s in 1 of 2 runs of a 6-s flap.)
// TestClusterPartitions runs them too, at its 250 ms and 64-KiB batches. The ceiling is
// what a serving node's fetch from the silent node may wait before it
// hedges, and a batch of MiBs what a step of a real job carries: at
// 250 ms and 64 KiB batches the suite held these faults within 1 s while
// a job at the defaults took 1.67–2.29 s a step on a 30-s flap
// (issue 98, item 12). The flap lasts 6 s, as the other faults do, so
// that CI runs it; $BRAND_PARTITION_FLAP (a duration, e.g. 30s) makes it
// longer, the epoch then read with think time enough to cover it.
func TestClusterClientFaults(t *testing.T) {
	flap := 6 * time.Second
	if v := os.Getenv("BRAND_PARTITION_FLAP"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("BRAND_PARTITION_FLAP: %v", err)
		}
		flap = d
	}
	partitions(t, partitionRun{samples: 4096, meanBytes: 48 << 10, flapFor: flap,
		faults: func(name string) bool { return clientFaults[name] }})
}

// clientFaults are the faults whose victim its clients cannot reach,
// by name: TestClusterClientFaults runs them.
var clientFaults = map[string]bool{
	"blip: cut off from everything, its clients too (Go client)":           true,
	"blip: cut off from everything, its clients too (Python client)":       true,
	"flapping link, its clients too (0.3 s down, 0.3 s up; Go client)":     true,
	"flapping link, its clients too (0.3 s down, 0.3 s up; Python client)": true,
}

// partitionRun is what a run of the partition suite is given.
type partitionRun struct {
	// hedgeCeiling is the nodes' --peer-hedge-ceiling; zero leaves the
	// flag at its default (1 s).
	hedgeCeiling time.Duration
	// samples and meanBytes size the dataset the faults are read over;
	// a batch is 32 samples.
	samples   int
	meanBytes int64
	// flapFor is how long the flapping link the clients see lasts;
	// zero: as long as the other faults.
	flapFor time.Duration
	// faults says which faults run, by name.
	faults func(name string) bool
	// unbound are the faults, by name, whose worst step is a figure
	// only, not held to hedgedStep, and why.
	unbound map[string]string
}

// partitions runs the partition suite (TestClusterPartitions' doc) with
// the faults and flags of pr.
func partitions(t *testing.T, pr partitionRun) {
	nw := netns.New(t)
	// --peer-timeout is short for the test's sake, but well above what a
	// loaded machine makes a fetch take under the race detector (a step
	// of a warm epoch took up to 2.2 s here: 2 s timed out spuriously).
	const (
		nodes, world, batchSize, window = 4, 8, 32, 16
		peerTimeout                     = 4 * time.Second
		bound                           = 2 * peerTimeout        // the worst step a single fault should cost (docs/scale-out.md)
		think                           = 100 * time.Millisecond // between steps; more under a fault longer than an epoch
		faultStep                       = 2
		faultFor                        = 6 * time.Second
		storeCutFor                     = 10 * time.Second
		victim                          = 1
		// A fetch not answered within the learnt hedge deadline is asked
		// of the next node too. The deadline grows with a loaded
		// machine's answers up to its ceiling, which a read may wait
		// once and a half more (the grace before a hedge to this node's
		// store): the ceiling is set so that those, a store read and a
		// loaded machine's slack fit in hedgedStep.
		hedgedStep  = time.Second
		hedgedStore = 1.2 // × the fixed cluster's cold epoch
	)
	// The faults a hedged read answers, by name.
	hedged := map[string]bool{"cut off from its peers": true, "asymmetric: the peers cannot reach it": true,
		"asymmetric: it cannot reach the peers": true, "gray: its sample requests dropped": true, "flapping link (0.4 s down, 0.8 s up)": true}
	// And the faults its clients see, answered by the clients' own learnt
	// deadline and failover to the next node.
	for name := range clientFaults {
		hedged[name] = true
	}
	// Chunks of 48 samples, whatever their size.
	p := packToMinIO(t, synth.Spec{Samples: pr.samples, MeanBytes: pr.meanBytes, Classes: 10, Seed: 53}, 48*pr.meanBytes)
	// A second dataset, which no job reads before the store is cut off
	// from a node under a job reading it: cold, as the part of a dataset
	// a cache cannot hold always is.
	cold := packInto(t, p.server, "s3://train/cold", synth.Spec{Samples: 4096, MeanBytes: 2 << 10, Classes: 10, Seed: 54}, 96<<10)
	// A third, which no job reads before a node is cut off from its peers
	// and the store at once: the node holds none of its chunks, so its
	// ranks' batches need what it cannot read, and it must refuse them
	// at once for its clients to read them from another node.
	unheld := packInto(t, p.server, "s3://train/unheld", synth.Spec{Samples: 4096, MeanBytes: 2 << 10, Classes: 10, Seed: 55}, 96<<10)
	type data struct {
		name   string
		p      *packed
		bytes  float64
		steps  int
		single string // a single gateway over it: each step's samples
		keys   map[string]int
	}
	sets := map[string]*data{}
	for name, pk := range map[string]*packed{"synthetic": p, "cold": cold, "unheld": unheld} {
		ix := pk.index(t)
		_, single := pk.gatewayOn(t, nil, 1<<30, "next-use")
		sets[name] = &data{name: name, p: pk, bytes: float64(ix.TotalBytes()), steps: ix.NumSamples() / (batchSize * world), single: single, keys: pk.keys()}
	}
	// Each node's cache a little over its share of the datasets the
	// cluster serves and the windows in flight (docs/scale-out.md,
	// "Sizing"): a fixed cluster's warm epoch reads nothing. Sized for
	// one dataset, a cold one's second epoch re-read 0.006–0.057 ×
	// itself with no fault at all: its chunks competed with those of the
	// job that had just read the other (idle, but followed as a job
	// whose next epoch may come), which is not what a healed fault
	// costs. That a stand-in takes no own chunk's room when the cache is
	// tight is usetable's TestStandInsNeverEvictOwnChunks.
	cache := int64(0.35 * (sets["synthetic"].bytes + sets["cold"].bytes + sets["unheld"].bytes))

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
	if keep := os.Getenv("BRAND_PARTITION_LOGS"); keep != "" {
		dir = keep // the nodes' logs kept for a look after the run
	}
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
			args: []string{"serve", "--listen", hosts[k].IP + ":8080", "--dataset", "synthetic=" + p.url, "--dataset", "cold=" + cold.url, "--dataset", "unheld=" + unheld.url,
				"--s3-endpoint", "http://" + storeAddr, "--cache-size", strconv.FormatInt(cache, 10), "--cache-prefault=false",
				"--peers", strings.Join(urls, ","), "--self", strconv.Itoa(k), "--peer-secret-file", secret,
				"--peer-timeout", peerTimeout.String(),
				"--log-format", "json", "--shutdown-timeout", "10s", "--index-poll", "0"}}
		if pr.hedgeCeiling > 0 {
			procs[k].args = append(procs[k].args, "--peer-hedge-ceiling", pr.hedgeCeiling.String())
		}
		if os.Getenv("BRAND_TEST_LOGS") != "" {
			// Logs kept to be read: each chunk read from the store named.
			procs[k].args = append(procs[k].args, "--log-level", "debug")
		}
	}
	startProcs(t, procs, bin, env, "")
	members := mustMembership(t, urls).Version()
	names := []string{"brand_peer_fetch_failures_total", "brand_backend_read_bytes_total", "brand_index_table_loads_total"}

	// epochRun is what one epoch did.
	type epochRun struct {
		worst     time.Duration // the slowest step
		worstStep int
		lost      time.Duration // the steps' time beyond the fastest step's, summed
		failovers int           // batches served by another node than the rank's home
		steps     []time.Duration
		store     float64   // store bytes, × the dataset
		perNode   []float64 // each node's part of store
		failures  float64   // peer fetches failed, over the nodes
		tables    float64   // other chunks' sample tables read from the store
	}
	// goRanks reads the steps of an epoch of d for every rank, each
	// through its own Go client given the peer list, checking each
	// sample against its source.
	goRanks := func(t *testing.T, d *data, epoch int) stepReader {
		clients := make([]*client.Client, world)
		for r := range world {
			job := api.Job{Dataset: d.name, Params: shuffle.Params{Seed: 9, Window: window, BatchSize: batchSize, World: world, Rank: r}}
			c, err := client.New("", client.Options{Peers: urls, HTTPClient: hc, Job: job})
			if err != nil {
				t.Fatal(err)
			}
			clients[r] = c
		}
		return &goSteps{t: t, d: d.p, keys: d.keys, epoch: epoch, clients: clients, members: members}
	}
	// pyRanks does the same through the Python client, in a process of
	// its own in the clients' namespace (testdata/partition_client.py).
	pyRanks := func(t *testing.T, d *data, epoch int) stepReader {
		py := pythontest.Need(t, "scripts/install-python.sh")
		return startPySteps(t, py, clientHost, d.p, d.keys, map[string]any{"peers": urls, "dataset": d.name, "epoch": epoch,
			"world": world, "batch_size": batchSize, "seed": 9, "window": window})
	}
	// readEpoch reads an epoch of d step by step through the ranks
	// reading (goRanks if nil), with think time between steps as a
	// training step's; before runs ahead of step m without holding the
	// ranks back, and done, if not nil, after the last step, before the
	// nodes' counts are read (a fault that cuts the clients off a node
	// healed). It checks the epoch against the single gateway's.
	pace := think
	readEpoch := func(t *testing.T, d *data, epoch int, reading func(t *testing.T, d *data, epoch int) stepReader, before func(m int), done func()) epochRun {
		t.Helper()
		want := make([][]string, d.steps)
		for m := range d.steps {
			want[m] = manifestKeys(t, d.single, fmt.Sprintf("/epoch/%d/batch/%d/manifest?seed=9&window=%d&batch_size=%d&world=1", epoch, m, window, batchSize*world))
		}
		if reading == nil {
			reading = goRanks
		}
		ranks := reading(t, d, epoch)
		defer ranks.close()
		m0 := sumOver(t, hc, urls, names)
		n0 := make([]float64, nodes)
		for k, u := range urls {
			n0[k] = scrapeVia(t, hc, u, "", "brand_backend_read_bytes_total")["brand_backend_read_bytes_total"]
		}
		var run epochRun
		fastest := time.Duration(math.MaxInt64)
		var all time.Duration
		seen := make(map[string]int, len(d.keys))
		for m := range d.steps {
			if before != nil {
				before(m)
			}
			start := time.Now()
			got, served := ranks.step(m)
			took := time.Since(start)
			for r, keys := range got {
				for _, k := range keys {
					seen[k]++
				}
				if served[r] != urls[cluster.Home(r, world, nodes)] {
					run.failovers++
				}
			}
			run.steps = append(run.steps, took)
			if testing.Verbose() && took > peerTimeout/4 {
				t.Logf("  %s epoch %d step %d took %s (%s)", d.name, epoch, m, took.Round(time.Millisecond), start.Format("15:04:05.000"))
			}
			if took > run.worst {
				run.worst, run.worstStep = took, m
			}
			fastest = min(fastest, took)
			all += took
			checkStep(t, fmt.Sprintf("%s epoch %d step %d", d.name, epoch, m), want[m], got, batchSize)
			time.Sleep(pace)
		}
		run.lost = all - time.Duration(d.steps)*fastest
		exactlyOnce(t, seen, len(d.keys), fmt.Sprintf("%s epoch %d over all ranks", d.name, epoch))
		if done != nil {
			done()
		}
		m1 := sumOver(t, hc, urls, names)
		run.store = (m1["brand_backend_read_bytes_total"] - m0["brand_backend_read_bytes_total"]) / d.bytes
		for k, u := range urls {
			run.perNode = append(run.perNode, (scrapeVia(t, hc, u, "", "brand_backend_read_bytes_total")["brand_backend_read_bytes_total"]-n0[k])/d.bytes)
		}
		run.failures = m1["brand_peer_fetch_failures_total"] - m0["brand_peer_fetch_failures_total"]
		run.tables = m1["brand_index_table_loads_total"] - m0["brand_index_table_loads_total"]
		return run
	}
	line := func(what string, r epochRun) string {
		return fmt.Sprintf("%-40s worst step %6s (step %2d), time lost %6s, store %.3f × dataset (by node %.3f), %3.0f tables read, %3.0f fetches failed, %2d batches failed over",
			what, r.worst.Round(time.Millisecond), r.worstStep, r.lost.Round(time.Millisecond), r.store, r.perNode, r.tables, r.failures, r.failovers)
	}

	// The figures go to the log and to a file
	// ($BRAND_PARTITION_FIGURES, else brand-partition-figures.txt in the
	// temporary directory), which outlives the test.
	figures := cmp.Or(os.Getenv("BRAND_PARTITION_FIGURES"), filepath.Join(os.TempDir(), "brand-partition-figures.txt"))
	out, err := os.Create(figures)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := out.Close(); err != nil {
			t.Error(err)
		}
		t.Logf("figures written to %s", figures)
	}()
	ceiling := "1s (the default)"
	if pr.hedgeCeiling > 0 {
		ceiling = pr.hedgeCeiling.String()
	}
	fmt.Fprintf(out, "%s at %s: %d nodes, %d ranks of %d samples of %d KiB on average, --peer-timeout %s, --peer-hedge-ceiling %s, each fault %s (the store's %s, the clients' flapping link's %s) from step %d (the cut from peers and store from the epoch's start)\n",
		t.Name(), time.Now().UTC().Format(time.RFC3339), nodes, world, batchSize, pr.meanBytes>>10, peerTimeout, ceiling, faultFor, storeCutFor, cmp.Or(pr.flapFor, faultFor), faultStep)
	record := func(t *testing.T, s string) {
		t.Helper()
		t.Log(s)
		fmt.Fprintln(out, s)
	}

	a := sets["synthetic"]
	cold0 := readEpoch(t, a, 0, nil, nil, nil)
	record(t, line("epoch 0 (cold, no fault)", cold0))
	warm := readEpoch(t, a, 1, nil, nil, nil)
	record(t, line("epoch 1 (warm, no fault)", warm))

	x := hosts[victim]
	var seenCut atomic.Bool // another node showed the victim cut off from the store
	peers := slices.Delete(slices.Clone(hosts), victim, victim+1)
	type fault struct {
		name  string
		data  *data
		apply func(stop <-chan struct{}) // returns once the fault is in place; stop ends a flapping one
		lasts time.Duration              // faultFor if 0
		// timesOut: some node's fetch from another must time out or lose
		// to its hedge, and be counted (brand_peer_fetch_failures_total).
		timesOut bool
		// failsOver: some rank's batch must be refused by its home node
		// and read from another.
		failsOver bool
		// atStart: it starts before the epoch's first request, not at
		// faultStep.
		atStart bool
		// reading: the ranks' clients (goRanks if nil).
		reading func(t *testing.T, d *data, epoch int) stepReader
	}
	// flapping sets the victim's link down for down and up for up, over
	// and over until stop, and up at the end: nothing reaches it, its
	// clients' requests included, for down at a time.
	flapping := func(down, up time.Duration) func(stop <-chan struct{}) {
		return func(stop <-chan struct{}) {
			go func() {
				defer x.LinkUp() // after its last LinkDown, whatever Heal did meanwhile
				for {
					x.LinkDown()
					select {
					case <-stop:
						return
					case <-time.After(down):
					}
					x.LinkUp()
					select {
					case <-stop:
						return
					case <-time.After(up):
					}
				}
			}()
		}
	}
	// A blip: the victim cut off from everything — its peers, the store
	// and its clients — its process running, as a machine whose network
	// stalls for a few seconds. Its ranks' requests go unanswered (not
	// refused) until their clients give up on it and read from the next
	// node, which hedges its fetches from the victim.
	blip := func(<-chan struct{}) { x.Cut(append(slices.Clone(peers), storeHost, clientHost)...) }
	faults := []fault{
		{"cut off from its peers", a, func(<-chan struct{}) { x.Cut(peers...) }, 0, true, false, false, nil},
		{"asymmetric: the peers cannot reach it", a, func(<-chan struct{}) {
			for _, h := range peers {
				h.Unreachable(8080, x)
			}
		}, 0, true, false, false, nil},
		{"asymmetric: it cannot reach the peers", a, func(<-chan struct{}) { x.Unreachable(8080, peers...) }, 0, true, false, false, nil},
		{"gray: its sample requests dropped", a, func(<-chan struct{}) { x.DropRequests(8080, "POST /internal/v2/samples") }, 0, true, false, false, nil},
		{"flapping link (0.4 s down, 0.8 s up)", a, flapping(400*time.Millisecond, 800*time.Millisecond), 0, false, false, false, nil},
		{name: "blip: cut off from everything, its clients too (Go client)", data: a, apply: blip, failsOver: true},
		{name: "blip: cut off from everything, its clients too (Python client)", data: a, apply: blip, failsOver: true, reading: pyRanks},
		{name: "flapping link, its clients too (0.3 s down, 0.3 s up; Go client)", data: a, apply: flapping(300*time.Millisecond, 300*time.Millisecond), lasts: pr.flapFor},
		{name: "flapping link, its clients too (0.3 s down, 0.3 s up; Python client)", data: a, apply: flapping(300*time.Millisecond, 300*time.Millisecond), lasts: pr.flapFor, reading: pyRanks},
		{"two halves cut from each other", a, func(<-chan struct{}) {
			hosts[0].Cut(hosts[2], hosts[3])
			hosts[1].Cut(hosts[2], hosts[3])
		}, 0, true, false, false, nil},
		// Cut off from its peers and the store at once, its clients still
		// reaching it, as a job starts a dataset it has not read: it
		// holds none of it, so it refuses its ranks' batches (the clients
		// read them from another node), and its peers read its chunks
		// from the store. (From step 2, as the others, its ranks' first
		// windows were in its cache or fetched ahead in most runs, and no
		// batch failed over in 1 of 6.)
		{name: "cut off from peers and store, cold", data: sets["unheld"], apply: func(<-chan struct{}) { x.Cut(append(slices.Clone(peers), storeHost)...) },
			timesOut: true, failsOver: true, atStart: true},
		// Longer than the others: longer than twice the peer timeout, so
		// that a node that waits for its store to answer again fails.
		{"cut off from the store, dataset cold", sets["cold"], func(stop <-chan struct{}) {
			x.Cut(storeHost)
			// The other nodes see it (GET /cluster) while it lasts.
			go func() {
				for {
					var cl api.Cluster
					if err := getJSONVia(hc, urls[0]+"/cluster", &cl); err == nil && cl.Nodes[victim].StoreUnreachable {
						seenCut.Store(true)
					}
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Millisecond):
					}
				}
			}()
		}, storeCutFor, false, false, false, nil},
	}
	epochs := map[*data]int{a: 2}
	// Each fault is a subtest of its own (-run 'TestClusterPartitions/NAME'
	// runs one), in turn on the one cluster; the epochs it reads follow
	// those of the faults before it.
	for _, f := range faults {
		if !pr.faults(f.name) {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			// A fault longer than an epoch's steps at think time each is
			// read with more time between them, so that it ends inside
			// its epoch (the last two steps after it).
			pace = max(think, cmp.Or(f.lasts, faultFor)/time.Duration(max(1, f.data.steps-faultStep-2)))
			defer func() { pace = think }()
			e := epochs[f.data]
			epochs[f.data] = e + 2
			var healed sync.WaitGroup
			defer healed.Wait() // the next fault starts on a healed network
			start := faultStep
			if f.atStart {
				start = 0
			}
			run := readEpoch(t, f.data, e, f.reading, func(m int) {
				if m != start {
					return
				}
				stop := make(chan struct{})
				f.apply(stop)
				t.Logf("  %s: from %s", f.name, time.Now().Format("15:04:05.000"))
				healed.Go(func() {
					time.Sleep(cmp.Or(f.lasts, faultFor))
					close(stop)
					nw.Heal()
					t.Logf("  %s: healed at %s", f.name, time.Now().Format("15:04:05.000"))
				})
			}, healed.Wait)
			healed.Wait()
			// Every node sees every other up again before the epoch
			// after it: until a node's probe of a peer answers again
			// (a probe timeout and a quarter probe interval at most after
			// the heal), it reads what it would fetch from that peer from
			// the store. That lag is a figure; the epoch after shows what
			// the fault left in the caches.
			waited := time.Now()
			for k := range nodes {
				waitUpVia(t, hc, urls, k, "")
			}
			lag := time.Since(waited)
			// A store read begun in the fault's epoch may end after its
			// last step — a node standing in for an owner loads a chunk
			// for a hedge, or a fetch, its asker has since cancelled — and
			// would be counted in the epoch after, which reads nothing
			// from the store itself.
			storeSettles(t, hc, urls)
			after := readEpoch(t, f.data, e+1, f.reading, nil, nil)
			// The times are figures, not assertions (a loaded machine's
			// steps vary): each fault's worst step against the bound of
			// twice --peer-timeout is written out with the rest.
			over := ""
			if run.worst > bound {
				over = fmt.Sprintf(" — over 2 × --peer-timeout (%s)", bound)
			}
			record(t, line(f.name, run)+over)
			record(t, "  its steps: "+stepTimes(run.steps))
			if hedged[f.name] {
				switch why, unbound := pr.unbound[f.name]; {
				case run.worst <= hedgedStep:
				case unbound:
					record(t, fmt.Sprintf("  step %d took %s, over %s, not asserted: %s", run.worstStep, run.worst.Round(time.Millisecond), hedgedStep, why))
				default:
					t.Errorf("step %d took %s, over %s: a hedged read waited on the fault", run.worstStep, run.worst.Round(time.Millisecond), hedgedStep)
				}
				if run.store > hedgedStore*cold0.store {
					t.Errorf("the fault's epoch read %.3f × the dataset from the store, over %.1f × the fixed cluster's cold epoch (%.3f)", run.store, hedgedStore, cold0.store)
				}
			}
			record(t, fmt.Sprintf("  every node saw every other up %s after the fault's epoch", lag.Round(100*time.Millisecond)))
			record(t, line("  the epoch after it healed", after))
			if after.store > warm.store+0.02 {
				t.Errorf("the warm epoch after the fault healed read %.3f × the dataset from the store, the fixed cluster's warm epoch %.3f", after.store, warm.store)
			}
			if f.timesOut && run.failures == 0 {
				t.Errorf("no fetch that timed out was counted (brand_peer_fetch_failures_total)")
			}
			if f.failsOver && run.failovers == 0 {
				t.Errorf("no batch was refused by its home node and read from another")
			}
			if f.data == sets["cold"] {
				lost := scrapeVia(t, hc, urls[victim], "", "brand_store_unreachable_total")["brand_store_unreachable_total"]
				if !seenCut.Load() || lost == 0 {
					t.Errorf("node %d's peers showed it cut off from the store: %t; it counted %v losses of the store (brand_store_unreachable_total)", victim, seenCut.Load(), lost)
				}
			}
		})
	}
}

// storeSettles waits until the nodes at urls have read nothing from the
// store for half a second (a minute at most).
func storeSettles(t *testing.T, hc *http.Client, urls []string) {
	t.Helper()
	const name = "brand_backend_read_bytes_total"
	prev := sumOver(t, hc, urls, []string{name})[name]
	for start := time.Now(); time.Since(start) < time.Minute; {
		time.Sleep(500 * time.Millisecond)
		now := sumOver(t, hc, urls, []string{name})[name]
		if now == prev {
			return
		}
		prev = now
	}
	t.Errorf("the nodes kept reading from the store for a minute with no job reading")
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

// getJSONVia GETs url through hc and decodes its JSON body into v.
func getJSONVia(hc *http.Client, url string, v any) error {
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// stepReader reads the steps of one epoch for every rank of a job.
type stepReader interface {
	// step reads step m for every rank at once, each sample checked
	// against its source: each rank's keys in the order served, and the
	// node that served each rank's batch. A batch that failed fails the
	// test.
	step(m int) (keys [][]string, nodes []string)
	close()
}

// goSteps reads through the Go client, a client a rank.
type goSteps struct {
	t       *testing.T
	d       *packed
	keys    map[string]int
	epoch   int
	clients []*client.Client
	members string // the membership version every rank must pin
}

func (g *goSteps) step(m int) ([][]string, []string) {
	t := g.t
	got := make([][]string, len(g.clients))
	served := make([]string, len(g.clients))
	var failed atomic.Bool
	var step sync.WaitGroup
	for r, c := range g.clients {
		step.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			b, err := c.Batch(ctx, g.epoch, m)
			if err != nil {
				failed.Store(true)
				t.Errorf("epoch %d step %d rank %d: %v", g.epoch, m, r, err)
				return
			}
			defer b.Release()
			served[r] = b.Node
			for _, s := range b.Samples {
				g.d.checkSample(t, s, g.keys)
				got[r] = append(got[r], s.Key)
			}
		})
	}
	step.Wait()
	if failed.Load() {
		t.FailNow()
	}
	return got, served
}

func (g *goSteps) close() {
	for r, c := range g.clients {
		if c.Members() != g.members {
			g.t.Errorf("epoch %d: rank %d pinned membership %q, want %s, the cluster's one", g.epoch, r, c.Members(), g.members)
		}
	}
}

// pySteps reads through the Python client: testdata/partition_client.py,
// its ranks each a brand.Client, told each step to read on its stdin and
// answering on its stdout.
type pySteps struct {
	t      *testing.T
	d      *packed
	keys   map[string]int
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *bytes.Buffer
}

// startPySteps starts the Python client's ranks in host's namespace for
// the job spec describes (the script's doc).
func startPySteps(t *testing.T, py string, host *netns.Host, d *packed, keys map[string]int, spec map[string]any) *pySteps {
	t.Helper()
	b, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "job.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	repo, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	p := &pySteps{t: t, d: d, keys: keys, stderr: &bytes.Buffer{}}
	p.cmd = host.Command(py, filepath.Join("testdata", "partition_client.py"), file)
	p.cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(repo, "python"))
	p.cmd.Stderr = p.stderr
	if p.in, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.out = bufio.NewScanner(out)
	p.out.Buffer(nil, 64<<20)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Its first line says its clients are made: step 0's time is then the
	// read's, not the interpreter's start.
	var ready struct{ Ready bool }
	if !p.out.Scan() || json.Unmarshal(p.out.Bytes(), &ready) != nil || !ready.Ready {
		_ = p.in.Close()
		_ = p.cmd.Wait()
		t.Fatalf("the Python client did not start (%q, %v)\n%s", p.out.Bytes(), p.out.Err(), p.stderr)
	}
	return p
}

func (p *pySteps) step(m int) ([][]string, []string) {
	t := p.t
	if _, err := fmt.Fprintln(p.in, m); err != nil {
		t.Fatalf("step %d: telling the Python client: %v\n%s", m, err, p.stderr)
	}
	if !p.out.Scan() {
		t.Fatalf("step %d: the Python client ended (%v)\n%s", m, p.out.Err(), p.stderr)
	}
	var ans struct {
		Step  int
		Ranks [][][3]string // key, sha256 of jpg, of cls
		Nodes []string
		Error *string
	}
	if err := json.Unmarshal(p.out.Bytes(), &ans); err != nil {
		t.Fatalf("step %d: the Python client's answer: %v", m, err)
	}
	if ans.Error != nil {
		t.Fatalf("step %d: the Python client: %s", m, *ans.Error)
	}
	if ans.Step != m {
		t.Fatalf("the Python client answered step %d for step %d", ans.Step, m)
	}
	got := make([][]string, len(ans.Ranks))
	for r, samples := range ans.Ranks {
		for _, s := range samples {
			i, ok := p.keys[s[0]]
			if !ok {
				t.Fatalf("served an unknown key %q", s[0])
			}
			want := p.d.spec.Sample(i)
			if s[1] != sha256Hex(want.Image) || s[2] != sha256Hex(want.Label()) {
				t.Fatalf("sample %s differs from its source files", s[0])
			}
			got[r] = append(got[r], s[0])
		}
	}
	return got, ans.Nodes
}

func (p *pySteps) close() {
	_ = p.in.Close()
	if err := p.cmd.Wait(); err != nil {
		p.t.Errorf("the Python client: %v\n%s", err, p.stderr)
	}
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// stepTimes writes the times of an epoch's steps, in order, in seconds.
func stepTimes(steps []time.Duration) string {
	s := make([]string, len(steps))
	for m, d := range steps {
		s[m] = strconv.FormatFloat(d.Seconds(), 'f', 2, 64)
	}
	return strings.Join(s, " ")
}
