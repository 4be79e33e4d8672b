package integration

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
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
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/planner"
	"github.com/brandgw/brand/shuffle"
)

// storeTally is a reverse proxy between a cluster's nodes and the store
// that counts the body bytes it passes of each object's GETs, by path:
// which chunks were read, and how many times over.
type storeTally struct {
	*httptest.Server
	target    *url.URL
	transport *http.Transport

	mu      sync.Mutex
	bytes   map[string]int64
	gate    chan struct{} // while not nil, chunk GETs wait until it closes
	only    []string      // the chunk keys the gate holds; nil: every chunk
	waiting int           // chunk GETs waiting at the gate now
}

// hold makes GETs of the chunks keys wait until release; of every chunk
// if none is named.
func (s *storeTally) hold(keys ...string) {
	s.mu.Lock()
	s.gate, s.only = make(chan struct{}), keys
	s.mu.Unlock()
}

// release lets the chunk GETs held go on.
func (s *storeTally) release() {
	s.mu.Lock()
	if s.gate != nil {
		close(s.gate)
		s.gate, s.only = nil, nil
	}
	s.mu.Unlock()
}

// held is how many chunk GETs wait at the gate now.
func (s *storeTally) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.waiting
}

// gateFor returns the gate a request waits at, nil if none; s.mu is held.
func (s *storeTally) gateFor(r *http.Request) chan struct{} {
	if s.gate == nil || r.Method != http.MethodGet || !strings.Contains(r.URL.Path, "/chunks/") {
		return nil
	}
	if len(s.only) == 0 || slices.ContainsFunc(s.only, func(k string) bool { return strings.HasSuffix(r.URL.Path, "/"+k) }) {
		return s.gate
	}
	return nil
}

func newStoreTally(t *testing.T, target string) *storeTally {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	s := &storeTally{target: u, bytes: map[string]int64{}, transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 64}}
	s.Server = httptest.NewServer(s)
	t.Cleanup(s.Close)
	return s
}

func (s *storeTally) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	gate := s.gateFor(r)
	if gate != nil {
		s.waiting++
	}
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-r.Context().Done():
		}
		s.mu.Lock()
		s.waiting--
		s.mu.Unlock()
		if r.Context().Err() != nil {
			return
		}
	}
	out := r.Clone(r.Context())
	out.URL.Scheme, out.URL.Host = s.target.Scheme, s.target.Host
	out.Host = r.Host // the host the request was signed for
	out.RequestURI = ""
	resp, err := s.transport.RoundTrip(out)
	if err != nil {
		http.Error(w, "store tally: "+err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	n, _ := io.Copy(w, resp.Body)
	if r.Method == http.MethodGet && (resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusPartialContent) {
		s.mu.Lock()
		s.bytes[r.URL.Path] += n
		s.mu.Unlock()
	}
}

// chunkReads returns how many times over each chunk of ix was read
// through the proxy (its GETs' body bytes ÷ its size).
func (s *storeTally) chunkReads(ix *chunkindex.Index) []float64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]float64, ix.NumChunks())
	for c := range out {
		ch := ix.Chunk(c)
		var n int64
		for path, b := range s.bytes {
			if strings.HasSuffix(path, "/"+ch.Key) {
				n += b
			}
		}
		out[c] = float64(n) / float64(ch.Size)
	}
	return out
}

// overReads describes the chunks read other than once, or "" if none.
func overReads(reads []float64) string {
	var out []string
	total := 0.0
	for c, r := range reads {
		total += r
		if r != 1 {
			out = append(out, fmt.Sprintf("chunk %d %.2f×", c, r))
		}
	}
	if len(out) == 0 {
		return ""
	}
	return fmt.Sprintf("%d of %d chunks read other than once (%.1f chunk reads): %s", len(out), len(reads), total, strings.Join(out, ", "))
}

// startOrdered starts a cluster's processes one at a time, each once the
// one before answers /readyz 200 (a Kubernetes StatefulSet's default,
// OrderedReady), and stops them when the test ends.
func startOrdered(t *testing.T, procs []*clusterProc, bin string, env []string) {
	t.Helper()
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
	for _, pr := range procs {
		pr.start(t, bin, env)
	}
}

// TestClusterColdEpochOneReadPerChunk: a fixed cluster of four `brand
// serve` processes (each node's cache 40 % of the dataset, a peer
// secret), started as a StatefulSet starts its pods — each once the one
// before is ready — and a job of 8 ranks started as soon as every node
// answers /readyz 200, as docs/scale-out.md says, each rank reading its
// batches from its home as fast as it can: the cold epoch reads each
// chunk from the store exactly once, by its owner. So it does with the
// nodes starved: all four pinned to one core beside a busy loop the
// test starts there, as nodes beside a training job's processes are.
//
// Before nodes reported ready only once they and their peers saw each
// other up, the nodes started earlier still saw the last one down (its
// port refused their first probes, and their next ones backed off up to
// 4 s) and read its chunks from the store themselves while it read them
// too: an independent check measured 1.001–1.090 × the dataset over 10
// runs of such a cluster.
func TestClusterColdEpochOneReadPerChunk(t *testing.T) {
	for _, starved := range []bool{false, true} {
		t.Run(fmt.Sprintf("starved=%t", starved), func(t *testing.T) { coldEpoch(t, starved) })
	}
}

// coldEpoch is TestClusterColdEpochOneReadPerChunk's cluster, its nodes
// pinned to one core beside a busy loop if starved.
func coldEpoch(t *testing.T, starved bool) {
	const nodes, world, batchSize, window = 4, 8, 32, 16
	spec := synth.Spec{Samples: 4096, MeanBytes: 4 << 10, Classes: 10, Seed: 39}
	p := packToMinIO(t, spec, 256<<10)
	ix := p.index(t)
	dataset := float64(ix.TotalBytes())
	cache := int64(0.4 * dataset)
	tally := newStoreTally(t, p.server.URL())
	cs := newClusterSetup(t, p, nodes, "http", "peer secret of the cold epoch test cluster")
	procs := make([]*clusterProc, nodes)
	for k := range nodes {
		procs[k] = cs.proc(k, p, "--cache-size", strconv.FormatInt(cache, 10), "--cache-prefault=false",
			"--peers", strings.Join(cs.urls, ","), "--self", strconv.Itoa(k), "--peer-secret-file", cs.secret)
		for i, a := range procs[k].args {
			if a == p.server.URL() {
				procs[k].args[i] = tally.URL
			}
		}
		if starved {
			procs[k].command = pinned(t, 0)
		}
	}
	if starved {
		busyLoop(t, 0)
	}
	startOrdered(t, procs, cs.bin, cs.env)
	for k, u := range cs.urls {
		resp, err := http.Get(u + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("node %d not ready once the last node is: %s", k, resp.Status)
		}
	}
	if r := tally.chunkReads(ix); slices.Max(r) > 0 {
		t.Fatalf("chunks read before the job started: %s", overReads(r))
	}

	// The job, at once: every rank on its own, as fast as it can.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: time.Minute}
	batches := int(math.Ceil(float64(spec.Samples) / (batchSize * world)))
	keys := p.keys()
	seen := make(map[string]int, spec.Samples)
	var mu sync.Mutex
	var ranks sync.WaitGroup
	for r := range world {
		ranks.Go(func() {
			home := cluster.Home(r, world, nodes)
			for m := range batches {
				path := fmt.Sprintf("/epoch/0/batch/%d?seed=9&window=%d&batch_size=%d&world=%d&rank=%d", m, window, batchSize, world, r)
				body, err := getWithFailover(hc, cs.urls, home, path)
				if err != nil {
					t.Errorf("batch %d rank %d: %v", m, r, err)
					return
				}
				samples, err := client.DecodeTar(body)
				if err != nil {
					t.Errorf("batch %d rank %d: %v", m, r, err)
					return
				}
				mu.Lock()
				for _, s := range samples {
					p.checkSample(t, s, keys)
					seen[s.Key]++
				}
				mu.Unlock()
			}
		})
	}
	ranks.Wait()
	if t.Failed() {
		t.FailNow()
	}
	exactlyOnce(t, seen, spec.Samples, "epoch 0 over all ranks")
	reads := tally.chunkReads(ix)
	total := 0.0
	for _, r := range reads {
		total += r
	}
	t.Logf("cold epoch: %.3f chunk reads per chunk (%d chunks)", total/float64(len(reads)), len(reads))
	if msg := overReads(reads); msg != "" {
		t.Errorf("cold epoch: %s; want each chunk once, by its owner", msg)
	}
	// What the cluster's plan predicts of the epoch: the same store reads
	// and bytes as counted.
	var plan planner.ClusterPlan
	if err := getJSONInto(fmt.Sprintf("%s/plan?epochs=2&seed=9&window=%d&batch_size=%d&world=%d", cs.urls[0], window, batchSize, world), &plan); err != nil {
		t.Fatal(err)
	}
	var counted int64 // the chunks' bytes, not the index's
	for path, b := range tally.byPath() {
		if strings.Contains(path, "/chunks/") {
			counted += b
		}
	}
	if e := plan.Epochs[0]; plan.Nodes != nodes || e.StoreReads != int(math.Round(total)) || e.StoreBytes != counted {
		t.Errorf("/plan of the cold epoch on %d nodes: %d store reads of %d bytes; counted %.3f reads of %d bytes", plan.Nodes, e.StoreReads, e.StoreBytes, total, counted)
	}
}

// byPath returns the GET body bytes passed of each object, by path.
func (s *storeTally) byPath() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.bytes)
}

// warmups returns a node log's lines about its membership changes'
// warm-ups: what each loaded, and from where. They come first in a
// failure's output, which CI may cut short before the nodes' warnings.
func warmups(path string) string {
	b, _ := os.ReadFile(path)
	return logLines(string(b), 40, func(line string) bool {
		return strings.Contains(line, warmupStarted) || strings.Contains(line, "warmed up for a new membership")
	})
}

// joinPoint returns the step before which TestClusterJoinAtEpochEnd's
// ranks pause for the join, and the chunks of the window it begins: the
// first window, from the middle of the epoch outward (leaving a window
// before it and one after), in which the joiners gain a chunk going from
// membership from to to. Ownership hashes the nodes' URLs, whose ports
// differ from run to run; each joiner gains a fifth of the chunks, so a
// window of 16 holds no gain of either only about once in 3,500 runs.
func joinPoint(t *testing.T, ix *chunkindex.Index, job shuffle.Params, from, to *cluster.Membership, joiners []string) (step int, keys []string) {
	t.Helper()
	e, err := shuffle.NewEpoch(ix.SampleCounts(), job.Seed, 0, job.Window)
	if err != nil {
		t.Fatal(err)
	}
	windows := e.NumWindows()
	gains := map[int]bool{}
	for _, u := range joiners {
		gained, _ := cluster.Moves(cluster.IndexKey(ix.ID()), ix.SampleCounts(), from, to, u)
		for _, c := range gained {
			gains[c] = true
		}
	}
	perStep := job.BatchSize * job.World
	for d := range windows {
		w := windows/2 + (d+1)/2*(1-2*(d%2)) // the middle, then one before, one after, …
		if w < 1 || w >= windows-1 || e.WindowStart(w)/perStep < 1 {
			continue
		}
		chunks := e.WindowChunks(w)
		if !slices.ContainsFunc(chunks, func(c int) bool { return gains[c] }) {
			continue
		}
		for _, c := range chunks {
			keys = append(keys, ix.Chunk(c).Key)
		}
		return e.WindowStart(w) / perStep, keys
	}
	t.Fatalf("the joiners gain no chunk of windows 1 to %d of epoch 0", windows-2)
	return 0, nil
}

// sub returns a − b, chunk by chunk.
func sub(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for c := range a {
		out[c] = a[c] - b[c]
	}
	return out
}

// sum is the total of xs.
func sum(xs []float64) (s float64) {
	for _, x := range xs {
		s += x
	}
	return s
}

// warmupStarted is what a node logs once it has planned a membership
// change's warm-up (package handover).
const warmupStarted = "loading the chunks this node gains that the jobs need soon"

// TestClusterJoinAtEpochEnd: two nodes join a cluster of three (each
// node's cache 40 % of the dataset, 8 ranks) in the middle of the cold
// epoch, and the join completes as the epoch ends: the joiners' warm-up
// waits on the store (their chunk GETs are held) until the job has read
// the whole epoch under the three old members. The ranks pause for the
// join before the first step of a window in which the joiners gain
// chunks, and the old members' GETs of that window's chunks are held
// until a joiner's warm-up waits on the store for one: no cache holds
// them, so the joiners' warm-up, which loads the gains of the current
// window and the next, reads some from the store. (Before, the test
// relied on the old owners' prefetch not having reached every gain of
// the next window yet; in 2 of 14 joiners' warm-ups it had, and none
// read the store. When neither joiner's did, as in one CI run, the
// cluster moved to the five members before the epoch ended.) At the
// warm-up's start the old owners had yet to read the gains of the
// epoch's later windows, so the warm-up left those to the batches, to be
// asked of their old owner when a batch first needs one; by then the old
// owners hold them.
// Early in the next epoch, pinned to the five members, one of the old
// members leaves as planned (removed from the list, then SIGTERM).
//
// The joiners read no chunk from the store in that epoch: each gain came
// from its old owner's cache, during the join or when a batch first
// needed it. Before, the leave's warm-up forgot the gains the join had
// left to the batches and the joiners read them from the store (an
// independent check of 3 → 5 → 4 nodes measured 0.032–0.063 × the
// dataset so). Under load (two busy loops beside the test on two cores)
// it failed 3 of 12 runs by one chunk: a gain the join moved between old
// members (the load bound) and left to the batches moved on to a joiner
// when that member left before the jobs reached it, and the joiner asked
// the member alone, which did not hold it, while the one before did
// (every live member is asked now: handover.TestGainsFromAnotherHolder);
// a deferred gain that the leave moves away, which the joiner reads
// until the flip, was forgotten at once (kept until then now:
// handover.TestGainsLeftReadUntilTheFlip); and a deferred gain to be
// copied from the node leaving was on no list while the leave's warm-up
// planned, when a batch needed it (it stays asked of that node until
// copied now: handover.TestGainsFromANodeThatLeavesReadMeanwhile).
// A last window (seen once in 20 runs under load with the above fixed):
// the node leaving exited as soon as its own view agreed on the members
// without it; a peer whose view had not flipped yet saw it down, read its
// chunks along the old ranking, and a joiner next in that ranking that
// lacked one read it from the store. It now serves until every live
// member reads by a membership without it
// (membership.TestLeaveWaitsForEveryMemberToFlip). And one more (2 of 40
// runs at load averages of 13–16, chunks 43 and 60): an old owner's
// copy of a gain left to the batches, kept for its joiner (Kept), was
// keyed as a stand-in's, for the windows at hand and the next alone, so
// the old owner's own leave warm-up evicted it as needed by no stream
// before the joiner asked for it in the next epoch, and the joiner read
// it from the store (usetable.TestUseTableKeepsChunksAwaited/a_cluster's_node).
func TestClusterJoinAtEpochEnd(t *testing.T) {
	const nodes, world, batchSize, window = 5, 8, 32, 16
	spec := synth.Spec{Samples: 4096, MeanBytes: 4 << 10, Classes: 10, Seed: 39}
	p := packToMinIO(t, spec, 256<<10)
	ix := p.index(t)
	cache := int64(0.4 * float64(ix.TotalBytes()))
	cs := newClusterSetup(t, p, nodes, "http", "peer secret of the join test cluster")
	peersFile := cs.dir + "/peers"
	procs := make([]*clusterProc, nodes)
	tallies := make([]*storeTally, nodes)
	for k := range nodes {
		tallies[k] = newStoreTally(t, p.server.URL())
		procs[k] = cs.proc(k, p, "--cache-size", strconv.FormatInt(cache, 10), "--cache-prefault=false",
			"--peers-file", peersFile, "--advertise", cs.urls[k], "--peers-poll", "100ms", "--peer-secret-file", cs.secret,
			"--membership-flip-timeout", "2m")
		for i, a := range procs[k].args {
			if a == p.server.URL() {
				procs[k].args[i] = tallies[k].URL
			}
		}
	}
	// The joiners sort between the first members, so that the homes of
	// every rank move with the join.
	first, full, afterLeave, joiners := []int{0, 2, 4}, []int{0, 1, 2, 3, 4}, []int{0, 1, 3, 4}, []int{1, 3}
	const leaver = 2
	pick := func(ks []int) []string {
		out := make([]string, len(ks))
		for i, k := range ks {
			out[i] = cs.urls[k]
		}
		return out
	}
	writePeers(t, peersFile, pick(first))
	job := shuffle.Params{Seed: 9, Window: window, BatchSize: batchSize, World: world}
	steps := ix.NumSamples() / (batchSize * world)
	joinStep, gated := joinPoint(t, ix, job, mustMembership(t, pick(first)), mustMembership(t, pick(full)), pick(joiners))
	for _, k := range first {
		tallies[k].hold(gated...)
	}
	t.Cleanup(func() {
		for _, k := range first {
			tallies[k].release()
		}
		for _, k := range joiners {
			tallies[k].release()
			procs[k].stop(t)
			if t.Failed() {
				t.Logf("joiner %d's warnings:\n%s", k, warnings(procs[k].logPath))
			}
		}
		var js []*clusterProc
		for _, k := range joiners {
			js = append(js, procs[k])
		}
		keepLogs(t, js)
	})
	startOrdered(t, []*clusterProc{procs[0], procs[2], procs[4]}, cs.bin, cs.env)
	reads := func() [][]float64 {
		out := make([][]float64, nodes)
		for k := range nodes {
			out[k] = tallies[k].chunkReads(ix)
		}
		return out
	}

	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: time.Minute}
	keys := p.keys()
	// readEpoch reads an epoch step by step, each rank through its own
	// client given members; before runs before step m without holding
	// the ranks back.
	readEpoch := func(epoch int, members []string, before func(m int)) {
		t.Helper()
		clients := rankClients(t, members, hc, job)
		seen := make(map[string]int, spec.Samples)
		var mu sync.Mutex
		for m := range steps {
			if before != nil {
				before(m)
			}
			var step sync.WaitGroup
			for r := range world {
				step.Go(func() {
					b, err := clients[r].Batch(context.Background(), epoch, m)
					if err != nil {
						t.Errorf("epoch %d step %d rank %d: %v", epoch, m, r, err)
						return
					}
					defer b.Release()
					mu.Lock()
					defer mu.Unlock()
					for _, s := range b.Samples {
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
	}

	joined := make(chan error, len(joiners))
	readEpoch(0, pick(first), func(m int) {
		if m != joinStep {
			return
		}
		for _, k := range joiners {
			tallies[k].hold()
		}
		writePeers(t, peersFile, pick(full))
		for _, k := range joiners {
			go func() { joined <- procs[k].launch(cs.bin, cs.env) }()
		}
		// The ranks wait until each joiner has planned its warm-up:
		// what it loads, and what it leaves to the batches.
		deadline := time.Now().Add(time.Minute)
		for _, k := range joiners {
			for {
				if b, _ := os.ReadFile(procs[k].logPath); strings.Contains(string(b), warmupStarted) {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("joiner %d has not begun its warm-up a minute after it started; log:\n%s", k, tail(procs[k].logPath))
				}
				time.Sleep(10 * time.Millisecond)
			}
		}
		// A joiner's warm-up waits on the store for a gain of the
		// gated window, which no cache holds: the old members may read
		// that window now (the ranks need it next).
		for slices.IndexFunc(joiners, func(k int) bool { return tallies[k].held() > 0 }) < 0 {
			if time.Now().After(deadline) {
				t.Fatalf("no joiner's warm-up read a chunk of the gated window from the store a minute after they started; logs:\n%s\n%s",
					tail(procs[joiners[0]].logPath), tail(procs[joiners[1]].logPath))
			}
			time.Sleep(10 * time.Millisecond)
		}
		for _, k := range first {
			tallies[k].release()
		}
	})
	// The epoch is read: the joiners' warm-up may go on, and the join
	// complete.
	fullVersion := mustMembership(t, pick(full)).Version()
	for _, u := range pick(first) {
		var cl struct {
			Members string `json:"members"`
		}
		if err := getJSONInto(u+"/cluster", &cl); err != nil {
			t.Fatal(err)
		}
		if cl.Members == fullVersion {
			t.Fatalf("%s moved to the five members before the joiners' warm-up could end: the join did not complete as the epoch ended; the joiners' warm-ups:\n%s\n%s",
				u, warmups(procs[joiners[0]].logPath), warmups(procs[joiners[1]].logPath))
		}
	}
	for _, k := range joiners {
		tallies[k].release()
	}
	for range joiners {
		if err := <-joined; err != nil {
			t.Fatal(err)
		}
	}
	live := map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true}
	waitAgreed(t, pick(full), live, cs.urls, fullVersion)
	after0 := reads()
	var total0 float64
	for k := range nodes {
		total0 += sum(after0[k])
	}
	t.Logf("epoch 0 and the join: %.3f chunk reads per chunk", total0/float64(ix.NumChunks()))

	left := make(chan error, 1)
	readEpoch(1, pick(full), func(m int) {
		if m != 1 {
			return
		}
		writePeers(t, peersFile, pick(afterLeave))
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
	})
	if err := <-left; err != nil {
		t.Fatalf("the leaving node: %v; log:\n%s", err, tail(procs[leaver].logPath))
	}
	after1 := reads()
	for k := range nodes {
		d := sub(after1[k], after0[k])
		role := "old member"
		switch {
		case slices.Contains(joiners, k):
			role = "joiner"
		case k == leaver:
			role = "leaver"
		}
		t.Logf("epoch 1: node %d (%s) read %.0f chunks from the store", k, role, sum(d))
		if sum(d) != 0 && role == "joiner" {
			var which []string
			for c, r := range d {
				if r != 0 {
					which = append(which, fmt.Sprintf("chunk %d %.2f×", c, r))
				}
			}
			t.Errorf("epoch 1: node %d (%s) read chunks from the store, want none: %s", k, role, strings.Join(which, ", "))
		}
	}
}
