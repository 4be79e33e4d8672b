package integration

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/cmdtest"
	"github.com/brandgw/brand/internal/testsupport/promtest"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/shuffle"
)

// clusterProc is one `brand serve` process of a test cluster.
type clusterProc struct {
	k       int
	url     string
	args    []string
	logPath string
	client  *http.Client // asks the node (nil: http.DefaultClient)
	// command makes the process's command (nil: exec.Command): a node in
	// a network namespace of its own runs through netns.Host.Command.
	command func(bin string, args ...string) *exec.Cmd
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// freePorts returns n loopback ports free when asked, for processes the
// test starts later with each one's address fixed (a cluster's members
// list each other). They are drawn below Linux's ephemeral range
// (32768–60999), never from it as a listen on port 0 draws them: every
// outgoing connection of the suite's lanes takes its local port from that
// range, and one that took a port between its probe's close and the
// process's bind failed the process ("address already in use", once in a
// suite's run of three lanes).
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var lns []net.Listener
	var ports []int
	for tries := 0; len(ports) < n; tries++ {
		if tries == 1000 {
			t.Fatalf("no %d free loopback ports in [%d, %d) after 1,000 tries", n, portsFrom, portsTo)
		}
		port := portsFrom + rand.IntN(portsTo-portsFrom)
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken
		}
		lns = append(lns, ln)
		ports = append(ports, port)
	}
	for _, ln := range lns {
		ln.Close()
	}
	// In the order of their URLs (http://127.0.0.1:PORT), as a cluster's
	// membership sorts its members: node k of a test is member k, whose
	// ranks cluster.Home places there.
	slices.SortFunc(ports, func(a, b int) int { return strings.Compare(strconv.Itoa(a), strconv.Itoa(b)) })
	return ports
}

// The ports freePorts draws from: below the ephemeral range.
const portsFrom, portsTo = 20000, 32768

// start runs the process and waits until its /readyz answers ready.
func (p *clusterProc) start(t *testing.T, bin string, env []string) {
	t.Helper()
	if err := p.launch(bin, env); err != nil {
		t.Fatal(err)
	}
}

// launch is start for a goroutine other than the test's: it returns what
// start fails the test with.
func (p *clusterProc) launch(bin string, env []string) error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	command := p.command
	if command == nil {
		command = exec.Command
	}
	p.cmd = command(bin, p.args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		return err
	}
	p.exited = make(chan struct{})
	go func() {
		p.waitErr = p.cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	deadline := time.Now().Add(2 * time.Minute)
	hc := p.client
	if hc == nil {
		hc = http.DefaultClient
	}
	for {
		resp, err := hc.Get(p.url + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("node %d exited before it was ready (%v); log:\n%s", p.k, p.waitErr, tail(p.logPath))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %d not ready after 2 minutes; log:\n%s", p.k, tail(p.logPath))
		}
	}
}

// startProcs starts a cluster's processes together, stops them when the
// test ends (with their warnings if it failed), and waits until every node
// sees every other up: nodes that started before their peers listened saw
// them down, and a job starting at once would have its first chunks read
// twice. token is the client token the nodes want, if any.
func startProcs(t *testing.T, procs []*clusterProc, bin string, env []string, token string) {
	t.Helper()
	var wg sync.WaitGroup
	for _, pr := range procs {
		wg.Go(func() { pr.start(t, bin, env) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, pr := range procs {
			pr.stop(t)
		}
		if t.Failed() {
			for _, pr := range procs {
				t.Logf("node %d's warnings:\n%s", pr.k, warnings(pr.logPath))
			}
		}
		keepLogs(t, procs)
	})
	urls := make([]string, len(procs))
	for k, pr := range procs {
		urls[k] = pr.url
	}
	for k := range procs {
		waitUpVia(t, procs[0].client, urls, k, token)
	}
}

// keepLogs keeps every node's whole log where BRAND_TEST_LOGS=DIR says
// (a soak's failing round, read at leisure): DIR/TEST/node-K.log, a
// passing round's overwritten by the next. Nodes started by
// clusterSetup.proc then log at debug level: each chunk read from the
// store is named.
func keepLogs(t *testing.T, procs []*clusterProc) {
	dir := os.Getenv("BRAND_TEST_LOGS")
	if dir == "" {
		return
	}
	keep := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	if err := os.MkdirAll(keep, 0o755); err != nil {
		t.Logf("BRAND_TEST_LOGS: %v", err)
		return
	}
	for _, pr := range procs {
		if b, err := os.ReadFile(pr.logPath); err == nil {
			_ = os.WriteFile(filepath.Join(keep, fmt.Sprintf("node-%d.log", pr.k)), b, 0o644)
		}
	}
}

// clusterSetup is what a test of a cluster of `brand serve` processes
// over a packed dataset starts from: the binary, its environment (the
// store's credentials), the nodes' loopback ports and URLs, a scratch
// directory and a peer secret file in it.
type clusterSetup struct {
	bin, dir, secret string
	env              []string
	ports            []int
	urls             []string
}

// newClusterSetup prepares a cluster of n nodes over p's dataset, whose
// URLs have scheme.
func newClusterSetup(t *testing.T, p *packed, n int, scheme, secret string) clusterSetup {
	t.Helper()
	s := clusterSetup{bin: cmdtest.Build(t, "brand"), dir: t.TempDir(), ports: freePorts(t, n),
		env: append(os.Environ(), "AWS_ACCESS_KEY_ID="+p.server.AccessKey, "AWS_SECRET_ACCESS_KEY="+p.server.SecretKey, "AWS_REGION=us-east-1")}
	for _, port := range s.ports {
		s.urls = append(s.urls, fmt.Sprintf("%s://127.0.0.1:%d", scheme, port))
	}
	s.secret = filepath.Join(s.dir, "peer-secret")
	if err := os.WriteFile(s.secret, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

// proc is node k's process: `brand serve` of p's dataset on its port, with
// args after the common ones.
func (s clusterSetup) proc(k int, p *packed, args ...string) *clusterProc {
	common := []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", s.ports[k]), "--dataset", "synthetic=" + p.url,
		"--s3-endpoint", p.server.URL(), "--log-format", "json", "--shutdown-timeout", "10s", "--index-poll", "0"}
	if os.Getenv("BRAND_TEST_LOGS") != "" {
		common = append(common, "--log-level", "debug") // kept to be read (keepLogs)
	}
	return &clusterProc{k: k, url: s.urls[k], logPath: filepath.Join(s.dir, fmt.Sprintf("node%d.log", k)),
		args: append(common, args...)}
}

// kill ends the process at once, as a machine's loss would.
func (p *clusterProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// stop shuts the process down and fails the test on a non-zero exit (a
// race report in a child fails it this way). SIGTERM makes a node of a
// cluster leave it first — serve its peers until they agree on the
// members without it, for at most its --leave-timeout (35 s) — and then
// drain: the bound covers both.
func (p *clusterProc) stop(t *testing.T) {
	if p.exited == nil {
		return // never started
	}
	select {
	case <-p.exited:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		p.kill()
		t.Errorf("node %d did not stop within 60 s", p.k)
	}
	if p.waitErr != nil {
		t.Errorf("node %d exited with %v; log:\n%s", p.k, p.waitErr, tail(p.logPath))
	}
}

// warnings returns the warning and error lines of a node's JSON log.
func warnings(path string) string {
	b, _ := os.ReadFile(path)
	return warningLines(string(b), 40)
}

// warningLines returns the last max warning and error lines of a JSON
// log.
func warningLines(log string, max int) string {
	return logLines(log, max, func(line string) bool {
		return strings.Contains(line, `"level":"warn"`) || strings.Contains(line, `"level":"error"`)
	})
}

// logLines returns the last max lines of log that keep accepts.
func logLines(log string, max int, keep func(line string) bool) string {
	var out []string
	for _, line := range strings.Split(log, "\n") {
		if keep(line) {
			out = append(out, line)
		}
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	return strings.Join(out, "\n")
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// scrape reads a node's counters: every series of the metrics asked for.
func scrape(t *testing.T, url string, names ...string) map[string]float64 {
	t.Helper()
	return scrapeAuth(t, url, "", names...)
}

// scrapeAuth is scrape of a node that wants a bearer token.
func scrapeAuth(t *testing.T, url, token string, names ...string) map[string]float64 {
	t.Helper()
	return scrapeVia(t, http.DefaultClient, url, token, names...)
}

// scrapeVia is scrapeAuth through hc.
func scrapeVia(t *testing.T, hc *http.Client, url, token string, names ...string) map[string]float64 {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scraping %s: %s", url, resp.Status)
	}
	s, err := promtest.Read(resp.Body)
	if err != nil {
		t.Fatalf("scraping %s: %v", url, err)
	}
	out := map[string]float64{}
	for _, n := range names {
		out[n] = s.Sum(n)
		for series, v := range s {
			if name, _, _ := strings.Cut(series, "{"); name == n {
				out[series] = v
			}
		}
	}
	return out
}

// clusterCounters are a cluster's byte counters summed over its live
// nodes, with its store GETs and the sample tables its nodes read of
// chunks they do not own (a cluster node's index is partial).
type clusterCounters struct {
	store, home, peer float64
	gets, tables      float64
}

var clusterMetricNames = []string{"brand_backend_read_bytes_total", "brand_locality_bytes_total", "brand_peer_bytes_fetched_total",
	"brand_backend_requests_total", "brand_index_table_loads_total"}

func (c clusterCounters) minus(o clusterCounters) clusterCounters {
	return clusterCounters{c.store - o.store, c.home - o.home, c.peer - o.peer, c.gets - o.gets, c.tables - o.tables}
}

// counters sums the byte counters of the nodes not in dead.
func counters(t *testing.T, procs []*clusterProc, dead map[int]bool) (clusterCounters, []clusterCounters) {
	var sum clusterCounters
	per := make([]clusterCounters, len(procs))
	for k, p := range procs {
		if dead[k] {
			continue
		}
		m := scrape(t, p.url, clusterMetricNames...)
		c := clusterCounters{store: m["brand_backend_read_bytes_total"],
			home: m[`brand_locality_bytes_total{source="home"}`], peer: m[`brand_locality_bytes_total{source="peer"}`],
			gets: m[`brand_backend_requests_total{op="get",result="ok"}`], tables: m["brand_index_table_loads_total"]}
		per[k] = c
		sum.store += c.store
		sum.home += c.home
		sum.peer += c.peer
		sum.gets += c.gets
		sum.tables += c.tables
	}
	return sum, per
}

// TestClusterOfFourGateways runs four `brand serve` processes and one MinIO
// as one cluster: world 8, two ranks per node each reading through its
// home, a per-node cache of 35 % of the dataset. It checks what the
// cluster promises — each chunk read from the store once, warm epochs
// reading almost nothing, few bytes crossing nodes with locality, every
// sample exactly once, the same bytes from every node, and a node's loss
// in the middle of an epoch costing no batch — and logs the figures
// docs/benchmarks.md ("Cluster") reports.
func TestClusterOfFourGateways(t *testing.T) {
	const nodes, world, batchSize, window = 4, 8, 64, 32
	spec := synth.Spec{Samples: 8192, MeanBytes: 4 << 10, Classes: 10, Seed: 21}
	p := packToMinIO(t, spec, 512<<10)
	ix := p.index(t)
	if ix.NumChunks() < 64 {
		t.Fatalf("the dataset has %d chunks; the cluster test wants at least 64", ix.NumChunks())
	}
	dataset := float64(ix.TotalBytes())
	cache := int64(0.35 * dataset)
	bin := cmdtest.Build(t, "brand")
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+p.server.AccessKey, "AWS_SECRET_ACCESS_KEY="+p.server.SecretKey, "AWS_REGION=us-east-1")
	ports := freePorts(t, nodes)
	urls := make([]string, nodes)
	for k, port := range ports {
		urls[k] = fmt.Sprintf("http://127.0.0.1:%d", port)
	}
	members, err := cluster.NewMembership(urls)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	procs := make([]*clusterProc, nodes)
	for k := range nodes {
		procs[k] = &clusterProc{k: k, url: urls[k], logPath: filepath.Join(dir, fmt.Sprintf("node%d.log", k)),
			args: []string{"serve", "--listen", fmt.Sprintf("127.0.0.1:%d", ports[k]),
				"--dataset", "synthetic=" + p.url, "--s3-endpoint", p.server.URL(),
				"--cache-size", strconv.FormatInt(cache, 10), "--cache-prefault=false",
				"--peers", strings.Join(urls, ","), "--self", strconv.Itoa(k),
				"--log-format", "json", "--shutdown-timeout", "10s", "--index-poll", "0"}}
	}
	// The planner's prediction of the same cluster: its figures depend on
	// which node owns which chunk, and so on the nodes' URLs, whose ports
	// differ from run to run (the cold epoch's share of bytes crossing
	// nodes: 4.4–18.7 % over 300 random port sets, median 10.2 %).
	plan, err := planner.MakeClusterPlan(context.Background(), planner.ClusterInput{Dataset: planner.DatasetOf(ix),
		Job:      planner.Job{Params: shuffle.Params{Seed: 9, Window: window, BatchSize: batchSize, World: world}, Epochs: 5},
		IndexKey: cluster.IndexKey(ix.ID()), Nodes: nodes, MemberIDs: members.IDs(), NodeCacheBytes: cache})
	if err != nil {
		t.Fatal(err)
	}
	e0, e3, e4 := plan.Epochs[0], plan.Epochs[3], plan.Epochs[4]
	// nearPlan checks a live figure against the planner's.
	nearPlan := func(name string, live, want float64) {
		t.Helper()
		t.Logf("  planner beside live: %-40s live %.3f, predicted %.3f", name, live, want)
		if math.Abs(live-want) > 0.02 {
			t.Errorf("%s: live %.3f, the planner predicted %.3f: more than 2 points apart", name, live, want)
		}
	}
	if locality, plain := float64(e0.CrossNodeBytes)/float64(e0.DeliveredBytes), float64(e0.CrossNodeBytesPlain)/float64(e0.DeliveredBytes); locality >= plain {
		t.Fatalf("the planner predicts %.3f of the cold epoch's bytes crossing nodes with locality, %.3f without: locality should cut it", locality, plain)
	}
	startProcs(t, procs, bin, env, "")
	keys := p.keys()
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: time.Minute}
	dead := map[int]bool{}
	var deadMu sync.Mutex

	// readEpoch reads an epoch as a DDP job does: step by step, the
	// world's ranks each asking their home for their batch of the step, a
	// rank whose home fails going to the next node (as the clients do).
	// beforeStep runs before each step. It returns the batch latencies
	// of each step.
	readEpoch := func(epoch int, query string, beforeStep func(m int)) [][]time.Duration {
		t.Helper()
		batches := int(math.Ceil(float64(spec.Samples) / (batchSize * world)))
		seen := make(map[string]int, spec.Samples)
		var mu sync.Mutex
		lat := make([][]time.Duration, batches)
		for m := range batches {
			if beforeStep != nil {
				beforeStep(m)
			}
			var step sync.WaitGroup
			for r := range world {
				step.Go(func() {
					path := fmt.Sprintf("/epoch/%d/batch/%d?seed=9&window=%d&batch_size=%d&world=%d&rank=%d%s", epoch, m, window, batchSize, world, r, query)
					home := cluster.Home(r, world, nodes)
					start := time.Now()
					body, err := getWithFailover(hc, urls, home, path)
					d := time.Since(start)
					if err != nil {
						t.Errorf("epoch %d batch %d rank %d: %v", epoch, m, r, err)
						return
					}
					samples, err := client.DecodeTar(body)
					if err != nil {
						t.Errorf("epoch %d batch %d rank %d: %v", epoch, m, r, err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					lat[m] = append(lat[m], d)
					for _, s := range samples {
						p.checkSample(t, s, keys)
						seen[s.Key]++
					}
				})
			}
			step.Wait()
			if t.Failed() {
				t.FailNow()
			}
		}
		exactlyOnce(t, seen, spec.Samples, fmt.Sprintf("epoch %d over all ranks", epoch))
		return lat
	}
	report := func(name string, c clusterCounters, steps [][]time.Duration) {
		lat := slices.Concat(steps...)
		delivered := c.home + c.peer
		t.Logf("%-34s store %.3f × dataset, delivered %.3f × dataset, cross-node %.1f %% of delivered, batch p50 %s p99 %s",
			name, c.store/dataset, delivered/dataset, 100*c.peer/delivered, pct(lat, 50), pct(lat, 99))
	}

	c0, _ := counters(t, procs, dead)
	lat := readEpoch(0, "", nil)
	c1, per1 := counters(t, procs, dead)
	cold := c1.minus(c0)
	report("epoch 0 (cold)", cold, lat)
	// Each chunk by its owner only: one GET a chunk (512 KiB, one part),
	// and two (its records and its keys) for each sample table a node read
	// of a chunk it does not own, which are the rest of the store bytes
	// (0.8–1.1 % of the dataset here: 3.7 KiB a table). A bound on bytes
	// alone would not tell a chunk read twice (1.1 %) from those.
	t.Logf("  %.0f store GETs: %.0f sample tables of other nodes' chunks, two GETs each", cold.gets, cold.tables)
	if chunkGets := cold.gets - 2*cold.tables; chunkGets != float64(ix.NumChunks()) {
		t.Errorf("cold epoch: %.0f GETs of chunks (%.0f GETs, %.0f sample tables), want %d: each chunk read once, by its owner", chunkGets, cold.gets, cold.tables, ix.NumChunks())
	}
	indexInfo, err := p.store.Stat(context.Background(), chunkindex.IndexKey)
	if err != nil {
		t.Fatal(err)
	}
	if most := dataset + float64(nodes-1)*float64(indexInfo.Size); cold.store < dataset || cold.store > most {
		t.Errorf("cold epoch: the cluster read %.3f × the dataset from the store, want 1 to %.3f (each chunk by its owner; each node at most the index's tables of the others' chunks)", cold.store/dataset, most/dataset)
	}
	// The order is the single gateway's (not stratified by owner): with
	// 8 chunks of each node in a window, some bytes cross nodes, as many
	// as the planner predicts for these owners. (A fixed bound of 20 %
	// failed once in a run of the suite at 20.2 %; over random ports the
	// planner's share reaches 18.7 %.)
	nearPlan("cross-node with locality, cold (share)", cold.peer/(cold.home+cold.peer), float64(e0.CrossNodeBytes)/float64(e0.DeliveredBytes))

	// Epoch 1: node 2 is killed before the middle step.
	const victim = 2
	const killStep = 8
	var beforeKill []clusterCounters
	lat = readEpoch(1, "", func(m int) {
		if m == killStep {
			_, beforeKill = counters(t, procs, dead)
			procs[victim].kill()
			deadMu.Lock()
			dead[victim] = true
			deadMu.Unlock()
		}
	})
	_, per2 := counters(t, procs, dead)
	// The dead node's part is what it did up to its loss.
	per2[victim] = beforeKill[victim]
	var lost clusterCounters
	for k := range nodes {
		d := per2[k].minus(per1[k])
		lost.store += d.store
		lost.home += d.home
		lost.peer += d.peer
	}
	report("epoch 1 (node 2 killed at step 8)", lost, lat)
	after := slices.Concat(lat[killStep:]...)
	t.Logf("  from the loss on (steps %d–%d): batch p50 %s, p99 %s, max %s over %d batches", killStep, len(lat)-1, pct(after, 50), pct(after, 99), pct(after, 100), len(after))

	// Node 2 comes back: its chunks return to it.
	procs[victim].start(t, bin, env)
	deadMu.Lock()
	delete(dead, victim)
	deadMu.Unlock()
	waitUp(t, urls, victim)
	// What each other node may read in epoch 2: the chunks it owns that
	// its cache no longer holds. While node 2 was down they held its
	// share too, beyond a 35 % cache's room for their own beside the
	// windows in flight, and evicted some of their own chunks needed late
	// in epoch 2 (Belady's rule, right while node 2 might never return).
	owners := members.Owners(cluster.IndexKey(ix.ID()), ix.SampleCounts())
	mayRead := make([]float64, nodes)
	for k := range nodes {
		if k == victim {
			continue
		}
		var own []int
		for c, o := range owners {
			if o == k {
				own = append(own, c)
			}
		}
		held := heldChunks(t, hc, urls[k], ix.ID(), own)
		for _, c := range own {
			if !held[c] {
				mayRead[k] += float64(ix.Chunk(c).Size)
			}
		}
	}
	c3, per3 := counters(t, procs, dead)
	lat = readEpoch(2, "", nil)
	c4, per4 := counters(t, procs, dead)
	back := c4.minus(c3)
	report("epoch 2 (node 2 back, cold)", back, lat)
	victimReads := per4[victim].store - per3[victim].store
	t.Logf("  store bytes re-read for node 2's chunks while it was down: %.3f × the dataset", lost.store/dataset)
	// Its chunks returned to it: as each peer that read them while it was
	// down took it back up, it gave them back (needed?given=true), and
	// the node read the rest from the store.
	var ownV []int
	for c, o := range owners {
		if o == victim {
			ownV = append(ownV, c)
		}
	}
	heldV := heldChunks(t, hc, urls[victim], ix.ID(), ownV)
	t.Logf("  the restarted node read %.3f × the dataset from the store and holds %d of its %d chunks", victimReads/dataset, len(heldV), len(ownV))
	if len(heldV) < len(ownV)*9/10 {
		t.Errorf("epoch 2: the restarted node holds %d of its %d chunks; they should have returned to it", len(heldV), len(ownV))
	}
	for k := range nodes {
		// Beyond its own chunks it no longer held, a node reads nothing
		// with node 2 back (0.005: sample tables of the index).
		if read := per4[k].store - per3[k].store; k != victim && read > mayRead[k]+0.005*dataset {
			t.Errorf("epoch 2: node %d read %.3f × the dataset from the store; with node 2 back it should read only its own chunks it no longer held, %.3f", k, read/dataset, mayRead[k]/dataset)
		}
	}

	lat = readEpoch(3, "", nil)
	c5, _ := counters(t, procs, dead)
	warm := c5.minus(c4)
	report("epoch 3 (warm)", warm, lat)
	if warm.store > 0.05*dataset {
		t.Errorf("warm epoch: the cluster read %.3f × the dataset from the store, want at most 0.05", warm.store/dataset)
	}
	nearPlan("cross-node with locality, warm (share)", warm.peer/(warm.home+warm.peer), float64(e3.CrossNodeBytes)/float64(e3.DeliveredBytes))

	lat = readEpoch(4, "&locality=false", nil)
	c6, _ := counters(t, procs, dead)
	plain := c6.minus(c5)
	report("epoch 4 (warm, locality=false)", plain, lat)

	// The planner's other figures, beside the live ones (the cross-node
	// shares with locality are checked above, after their epochs).
	nearPlan("store, cold epoch (× dataset)", cold.store/dataset, float64(e0.StoreBytes)/dataset)
	nearPlan("store, warm epoch (× dataset)", warm.store/dataset, float64(e3.StoreBytes)/dataset)
	nearPlan("cross-node, plain cut (share)", plain.peer/(plain.home+plain.peer), float64(e4.CrossNodeBytesPlain)/float64(e4.DeliveredBytes))

	// Any node answers any request with the same bytes.
	for _, r := range []int{0, 3, 5, 7} {
		path := fmt.Sprintf("/epoch/3/batch/2?seed=9&window=%d&batch_size=%d&world=%d&rank=%d", window, batchSize, world, r)
		var first [32]byte
		for k, u := range urls {
			body, err := getWithFailover(hc, []string{u}, 0, path)
			if err != nil {
				t.Fatalf("node %d: %v", k, err)
			}
			sum := sha256.Sum256(body)
			if k == 0 {
				first = sum
			} else if sum != first {
				t.Fatalf("rank %d's batch from node %d differs from node 0's", r, k)
			}
		}
	}
}

// heldChunks asks the node at url which of chunks its cache holds (the
// peers' question, POST /internal/v2/needed?held=true, answered to any
// asker on a cluster without a peer secret).
func heldChunks(t *testing.T, hc *http.Client, url, index string, chunks []int) map[int]bool {
	t.Helper()
	body := make([]byte, 4*len(chunks))
	for i, c := range chunks {
		binary.LittleEndian.PutUint32(body[4*i:], uint32(c))
	}
	resp, err := hc.Post(url+"/internal/v2/needed?dataset=synthetic&held=true&index="+index, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK || len(got)%4 != 0 {
		t.Fatalf("asking %s which chunks it holds: %s, %v: %s", url, resp.Status, err, got)
	}
	held := map[int]bool{}
	for i := 0; i < len(got); i += 4 {
		held[int(binary.LittleEndian.Uint32(got[i:]))] = true
	}
	return held
}

// getWithFailover GETs path from urls[home], and on a failure from the
// next nodes in order, as the clients do; 30 attempts at most.
func getWithFailover(hc *http.Client, urls []string, home int, path string) ([]byte, error) {
	var last error
	for attempt := range 30 {
		u := urls[(home+attempt/3)%len(urls)]
		resp, err := hc.Get(u + path)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK {
				return body, nil
			}
			err = fmt.Errorf("%s: %s: %s", u, resp.Status, body)
			if rerr != nil {
				err = rerr
			}
		}
		last = err
		time.Sleep(50 * time.Millisecond)
	}
	return nil, last
}

// waitUp waits until every node sees node k up again.
func waitUp(t *testing.T, urls []string, k int) {
	t.Helper()
	waitUpAuth(t, urls, k, "")
}

// waitUpAuth is waitUp on nodes that want a bearer token.
func waitUpAuth(t *testing.T, urls []string, k int, token string) {
	t.Helper()
	waitUpVia(t, http.DefaultClient, urls, k, token)
}

// waitUpVia is waitUpAuth through hc (nil: http.DefaultClient).
func waitUpVia(t *testing.T, hc *http.Client, urls []string, k int, token string) {
	t.Helper()
	if hc == nil {
		hc = http.DefaultClient
	}
	series := fmt.Sprintf(`brand_peer_up{peer=%q}`, urls[k])
	deadline := time.Now().Add(30 * time.Second)
	for j, u := range urls {
		if j == k {
			continue
		}
		for scrapeVia(t, hc, u, token, "brand_peer_up")[series] != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("node %d does not see node %d up 30 s after its restart", j, k)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// pct is the p-th percentile of ds.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(math.Ceil(p/100*float64(len(s))))-1)].Round(100 * time.Microsecond)
}

// index reads the packed dataset's index.
func (p *packed) index(t *testing.T) *chunkindex.Index {
	t.Helper()
	ix, err := stored.ReadIndex(context.Background(), p.store)
	if err != nil {
		t.Fatal(err)
	}
	return ix
}

// exactlyOnce fails t unless seen (delivered sample keys and their counts)
// holds n distinct samples, each delivered once.
func exactlyOnce(t *testing.T, seen map[string]int, n int, what string) {
	t.Helper()
	if len(seen) != n {
		t.Fatalf("%s: %d distinct samples, want %d", what, len(seen), n)
	}
	for k, c := range seen {
		if c != 1 {
			t.Fatalf("%s: sample %s delivered %d times", what, k, c)
		}
	}
}
