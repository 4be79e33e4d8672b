package integration

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/shuffle"
)

// TestEveryNodeRestartedMidStep: a job's epoch is laid out under the
// membership version its ranks pinned at its start, whatever happens to
// the nodes. Here the cluster grows from 3 nodes to 4 in the middle of
// epoch 0 (the ranks stay on the version they pinned), half the ranks
// read step 4, and then every node restarts — as a rolling update or a
// power cut would — before the other half read the same step: no node
// holds the pinned version in memory any more, and the node 3 never held
// it at all. Every sample of the epoch still arrives exactly once.
//
// The reproduction: the restarted nodes answered the pinned version with
// 409 naming the new one, each rank's client re-pinned on its own, ranks
// 4–7 read step 4 under the new version and ranks 0–3 under the old, and
// the epoch held some samples twice and some never.
func TestEveryNodeRestartedMidStep(t *testing.T) {
	const nodes, world, batchSize, window, splitStep = 4, 8, 32, 8, 4
	spec := synth.Spec{Samples: 2048, MeanBytes: 2 << 10, Classes: 10, Seed: 43}
	p := packToMinIO(t, spec, 128<<10)
	cs := newClusterSetup(t, p, nodes, "http", "peer secret of the restart test cluster")
	bin, env, urls := cs.bin, cs.env, cs.urls
	peersFile := filepath.Join(cs.dir, "peers")
	procs := make([]*clusterProc, nodes)
	for k := range nodes {
		procs[k] = cs.proc(k, p, "--cache-size", "64MiB", "--cache-prefault=false",
			"--peers-file", peersFile, "--advertise", urls[k], "--peers-poll", "200ms", "--peer-secret-file", cs.secret)
	}
	first, all := urls[:3], urls
	writePeers(t, peersFile, first)
	startProcs(t, procs[:3], bin, env, "")
	t.Cleanup(func() { procs[3].stop(t) })
	live := map[int]bool{0: true, 1: true, 2: true}
	waitAgreed(t, first, live, urls, mustMembership(t, first).Version())

	// Each rank reads through its own client, as a job's ranks do; the
	// clients pin the epoch's membership at its first answer.
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}, Timeout: time.Minute}
	clients := rankClients(t, first, hc, shuffle.Params{Seed: 5, Window: window, BatchSize: batchSize, World: world})
	keys := p.keys()
	seen := make(map[string]int, spec.Samples)
	got := map[[2]int][]string{} // (step, rank) → the keys it received
	var mu sync.Mutex
	read := func(m int, ranks ...int) {
		t.Helper()
		var wg sync.WaitGroup
		for _, r := range ranks {
			wg.Go(func() {
				b, err := clients[r].Batch(context.Background(), 0, m)
				if err != nil {
					t.Errorf("step %d rank %d: %v", m, r, err)
					return
				}
				defer b.Release()
				mu.Lock()
				defer mu.Unlock()
				for _, s := range b.Samples {
					p.checkSample(t, s, keys)
					seen[s.Key]++
					got[[2]int{m, r}] = append(got[[2]int{m, r}], s.Key)
				}
			})
		}
		wg.Wait()
		if t.Failed() {
			t.FailNow()
		}
	}
	ranks := func(lo, hi int) []int {
		var out []int
		for r := lo; r < hi; r++ {
			out = append(out, r)
		}
		return out
	}
	steps := spec.Samples / (world * batchSize)
	for m := range splitStep {
		read(m, ranks(0, world)...)
	}
	pinned := clients[0].Members()

	// A join: the epoch stays on the version its ranks pinned.
	writePeers(t, peersFile, all)
	procs[3].start(t, bin, env)
	live[3] = true
	waitAgreed(t, all, live, urls, mustMembership(t, all).Version())
	read(splitStep, ranks(0, world/2)...)

	// Every node restarts between two ranks' requests for the same step.
	for _, pr := range procs {
		pr.kill()
	}
	var wg sync.WaitGroup
	for _, pr := range procs {
		wg.Go(func() {
			if err := pr.launch(bin, env); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	waitAgreed(t, all, live, urls, mustMembership(t, all).Version())
	read(splitStep, ranks(world/2, world)...)
	for m := splitStep + 1; m < steps; m++ {
		read(m, ranks(0, world)...)
	}
	exactlyOnce(t, seen, spec.Samples, "epoch 0 over all ranks, every node restarted at step "+strconv.Itoa(splitStep))
	for r, c := range clients {
		if c.Members() != pinned {
			t.Errorf("rank %d read the epoch under membership %q, want %s, the one its ranks pinned at its start", r, c.Members(), pinned)
		}
	}
	// Node 3 never was a member of the pinned version, nor held it since
	// its restart: it lays the step out under it all the same.
	for r := range world {
		path := fmt.Sprintf("/epoch/0/batch/%d/manifest?seed=5&window=%d&batch_size=%d&world=%d&rank=%d&members=%s", splitStep, window, batchSize, world, r, pinned)
		if m := manifestKeys(t, urls[3], path); !slices.Equal(m, got[[2]int{splitStep, r}]) {
			t.Errorf("node 3 lays step %d out for rank %d otherwise than the rank received it", splitStep, r)
		}
	}
}
