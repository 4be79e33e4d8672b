package planner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/brandgw/brand/shuffle"
)

// tierFigures is one epoch's store and disk bytes.
type tierFigures struct{ store, disk int64 }

// Hand-computed traces through a RAM cache and a disk tier below it, one
// access at a time unless starts are given. Each row's comment walks the
// disk (key: the next access of the chunk; LRU: the order of writes and
// disk reads).
func TestSimulateTiersHandTraces(t *testing.T) {
	tests := []struct {
		name      string
		chunks    []int32 // the accesses' chunks
		epochs    []int32 // per access; nil: all epoch 0
		starts    []bool  // per access; nil: no batches
		sizes     []int64
		ram, disk int64
		policy    Policy
		weights   []float64 // ImportanceAware only
		want      []tierFigures
	}{
		{
			// RAM holds one chunk and misses every access. The disk
			// writes 0 and 1; from 2 on each write evicts the least
			// recently written, which is the next one needed.
			name:   "LRU thrashes a cycle",
			chunks: []int32{0, 1, 2, 3, 0, 1, 2, 3}, epochs: []int32{0, 0, 0, 0, 1, 1, 1, 1},
			sizes: []int64{100, 100, 100, 100}, ram: 100, disk: 200, policy: LRU,
			want: []tierFigures{{400, 0}, {400, 0}},
		},
		{
			// 0 (next 4) and 1 (next 5) are written; 2 (next 6) and 3
			// (next 7) are needed later than both and are not. Epoch 1
			// reads 0 and 1 from disk, 2 and 3 from the store (needed
			// never, they displace nothing).
			name:   "Belady keeps what comes back first",
			chunks: []int32{0, 1, 2, 3, 0, 1, 2, 3}, epochs: []int32{0, 0, 0, 0, 1, 1, 1, 1},
			sizes: []int64{100, 100, 100, 100}, ram: 100, disk: 200, policy: Belady,
			want: []tierFigures{{400, 0}, {200, 200}},
		},
		{
			// i0 writes 0 (next 1); the RAM hit at i1 moves its next use
			// to i4, so at i2 chunk 1 (next 3) displaces it. i4 reads 0
			// from the store: 1 (needed never) is not displaced by 0
			// (needed never).
			name:   "a RAM hit moves the next use on disk",
			chunks: []int32{0, 0, 1, 1, 0},
			sizes:  []int64{100, 100}, ram: 100, disk: 100, policy: Belady,
			want: []tierFigures{{300, 0}},
		},
		{
			// RAM misses all but i2. The disk writes 0 then 1; the RAM
			// hit at i2 does not read the disk, so at i3 chunk 0 is the
			// least recently used there and 2 displaces it; i4 reads 1
			// from disk.
			name:   "LRU recency is the disk's",
			chunks: []int32{0, 1, 0, 2, 1},
			sizes:  []int64{100, 100, 100}, ram: 200, disk: 200, policy: LRU,
			want: []tierFigures{{300, 100}},
		},
		{
			// RAM holds one chunk and misses every access. i2 reads 0
			// from disk, making 1 the least recently used: i3 evicts 1
			// for 2, and i4 evicts 0 for 1.
			name:   "LRU: a disk read is a use",
			chunks: []int32{0, 1, 0, 2, 1},
			sizes:  []int64{100, 100, 100}, ram: 100, disk: 200, policy: LRU,
			want: []tierFigures{{400, 100}},
		},
		{
			// No RAM. Sizes: 0 is 2, 1 and 2 are 1, 3 is 4 (> the disk).
			// i0, i1 write 1 (next 5) and 2 (next 6); i2's chunk 0 (next
			// 4) needs one more byte and displaces 2; 3 is never
			// written; i4, i5 read 0 and 1 from disk; i6's 2 (needed
			// never) displaces nothing.
			name:   "uneven sizes; a chunk larger than the disk",
			chunks: []int32{1, 2, 0, 3, 0, 1, 2},
			sizes:  []int64{2, 1, 1, 4}, ram: 0, disk: 3, policy: Belady,
			want: []tierFigures{{9, 3}},
		},
		{
			// No RAM. 0 is 2 bytes, 1 is 1, 2 is 2; the disk 3. i0, i1
			// write 0 (next 3) and 1 (next 5). i2's chunk 2 (next 4)
			// needs 2 bytes: 1 is needed later but frees only 1, and 0
			// is needed sooner, so nothing is evicted and 2 is not
			// written. 0 and 1 are read from disk later.
			name:   "not enough room from later chunks: nothing evicted",
			chunks: []int32{0, 1, 2, 0, 2, 1},
			sizes:  []int64{2, 1, 2}, ram: 0, disk: 3, policy: Belady,
			want: []tierFigures{{7, 3}},
		},
		{
			// No RAM; sizes 10, 20, 30 on a disk of 50. In epoch 0 no
			// chunk is needed again this epoch, so the disk ranks them
			// by weight: 2 evicts 0, the lightest. At epoch 1, 1 and 2
			// are needed (keys 5 and 3): 2 and 1 are read from disk, and
			// 0, lighter than what stays, is not written.
			name:   "importance-aware ranks by weight, then by this epoch's uses",
			chunks: []int32{0, 1, 2, 2, 0, 1}, epochs: []int32{0, 0, 0, 1, 1, 1},
			sizes: []int64{10, 20, 30}, ram: 0, disk: 50, policy: ImportanceAware, weights: []float64{1, 3, 2},
			want: []tierFigures{{60, 0}, {10, 50}},
		},
		{
			// The same trace under Belady over both epochs: 2 (next 3)
			// evicts 1 (next 5), and epoch 1 reads 2 and 0 from disk.
			name:   "Belady on the importance trace",
			chunks: []int32{0, 1, 2, 2, 0, 1}, epochs: []int32{0, 0, 0, 1, 1, 1},
			sizes: []int64{10, 20, 30}, ram: 0, disk: 50, policy: Belady,
			want: []tierFigures{{60, 0}, {20, 40}},
		},
		{
			// Batches {0 1} {2 0} {1 2}, RAM of one chunk: a batch of
			// two is served in parts. The disk (one chunk) writes 0
			// (next 3); 1 (next 4) and 2 (next 5) come back later than
			// it and are not written; 0 is read from disk at i3.
			name:   "batches in parts",
			chunks: []int32{0, 1, 2, 0, 1, 2}, starts: []bool{true, false, true, false, true, false},
			sizes: []int64{100, 100, 100}, ram: 100, disk: 100, policy: Belady,
			want: []tierFigures{{500, 100}},
		},
		{
			name:   "no disk: every miss reads the store",
			chunks: []int32{0, 1, 2, 3, 0, 1, 2, 3}, epochs: []int32{0, 0, 0, 0, 1, 1, 1, 1},
			sizes: []int64{100, 100, 100, 100}, ram: 100, disk: 0, policy: Belady,
			want: []tierFigures{{400, 0}, {400, 0}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trace := make([]Access, len(tt.chunks))
			for i, c := range tt.chunks {
				trace[i].Chunk = c
				if tt.epochs != nil {
					trace[i].Epoch = tt.epochs[i]
				}
				if tt.starts != nil {
					trace[i].Start = tt.starts[i]
				}
			}
			var r Result
			if tt.policy == ImportanceAware {
				r, _ = newSimulator(trace, tt.sizes, nil, nil).runAware(tt.ram, tt.disk, tt.weights)
			} else {
				r = simulateTiers(trace, tt.sizes, tt.ram, tt.disk, tt.policy)
			}
			var got []tierFigures
			for _, e := range r.Epochs {
				got = append(got, tierFigures{e.BackendBytes, e.DiskBytes})
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("per epoch {store disk} = %v, want %v", got, tt.want)
			}
			if r.DiskCacheBytes != tt.disk {
				t.Errorf("DiskCacheBytes %d, want %d", r.DiskCacheBytes, tt.disk)
			}
			checkTierConservation(t, r, trace, tt.sizes, tt.ram, tt.policy, tt.weights)
		})
	}
}

// checkTierConservation checks that a disk changes where the cache's misses
// are read from, not the cache: the hits are those of the cache alone, and
// store and disk bytes sum to its backend bytes, epoch by epoch.
func checkTierConservation(t *testing.T, r Result, trace []Access, sizes []int64, ram int64, p Policy, weights []float64) {
	t.Helper()
	var alone Result
	if p == ImportanceAware {
		alone = simulateImportance(trace, sizes, weights, ram)
	} else {
		alone = Simulate(trace, sizes, ram, p)
	}
	if len(alone.Epochs) != len(r.Epochs) {
		t.Fatalf("%d epochs with a disk, %d without", len(r.Epochs), len(alone.Epochs))
	}
	for i, e := range r.Epochs {
		a := alone.Epochs[i]
		if e.Hits != a.Hits || e.Accesses != a.Accesses || e.BackendBytes+e.DiskBytes != a.BackendBytes {
			t.Errorf("epoch %d: %d/%d hits, store %d + disk %d; the cache alone: %d/%d hits, backend %d",
				e.Epoch, e.Hits, e.Accesses, e.BackendBytes, e.DiskBytes, a.Hits, a.Accesses, a.BackendBytes)
		}
	}
	if r.BackendBytes+r.DiskBytes != alone.BackendBytes {
		t.Errorf("total: store %d + disk %d, the cache alone %d", r.BackendBytes, r.DiskBytes, alone.BackendBytes)
	}
}

// tierJobs are jobs of different shapes for the property tests: equal and
// uneven chunks, batches within and across windows, several ranks.
func tierJobs() []PlanInput {
	return []PlanInput{
		{Dataset: equalDataset(24, 10, 1000), Job: Job{Params: shuffle.Params{Seed: 1, Window: 4, BatchSize: 8, World: 1}, Epochs: 3}},
		{Dataset: unevenDataset(), Job: Job{Params: shuffle.Params{Seed: 2, Window: 3, BatchSize: 7, World: 2}, FirstEpoch: 2, Epochs: 4}},
		{Dataset: unevenDataset(), Job: Job{Params: shuffle.Params{Seed: 3, Window: 30, BatchSize: 16, World: 1}, Epochs: 3}},
		{Dataset: equalDataset(40, 5, 512), Job: Job{Params: shuffle.Params{Seed: 4, Window: 1, BatchSize: 5, World: 3}, Epochs: 3}},
	}
}

// With a disk that holds the dataset, every epoch after the first reads
// nothing from the store, whatever the RAM cache and the policy: the first
// epoch writes every chunk it reads, and none is ever evicted. And the
// cache's own figures never change.
func TestDiskHoldingTheDatasetReadsTheStoreOnce(t *testing.T) {
	for ji, in := range tierJobs() {
		trace, err := Trace(in.Dataset, in.Job)
		if err != nil {
			t.Fatal(err)
		}
		var all, read int64
		for c, size := range in.Dataset.ChunkSizes {
			all += size
			if in.Dataset.Counts[c] > 0 {
				read += size
			}
		}
		weights := make([]float64, len(in.Dataset.ChunkSizes))
		for c := range weights {
			weights[c] = float64(1 + c%5)
		}
		for _, ram := range []int64{0, all / 10, all / 3, all} {
			for _, disk := range []int64{all, all + 1, 2 * all} {
				for _, p := range []Policy{LRU, Belady, ImportanceAware} {
					t.Run(fmt.Sprintf("job %d ram %d disk %d %v", ji, ram, disk, p), func(t *testing.T) {
						var r Result
						if p == ImportanceAware {
							r, _ = newSimulator(trace, in.Dataset.ChunkSizes, in.Dataset.StoreSizes, nil).runAware(ram, disk, weights)
						} else {
							r = simulateTiers(trace, in.Dataset.ChunkSizes, ram, disk, p)
						}
						if r.Epochs[0].BackendBytes != read {
							t.Errorf("first epoch read %d bytes from the store, want every chunk once, %d", r.Epochs[0].BackendBytes, read)
						}
						for _, e := range r.Epochs[1:] {
							if e.BackendBytes != 0 {
								t.Errorf("epoch %d read %d bytes from the store, want 0", e.Epoch, e.BackendBytes)
							}
						}
						checkTierConservation(t, r, trace, in.Dataset.ChunkSizes, ram, p, weights)
					})
				}
			}
		}
	}
}

// A disk of any size changes only where misses are read from; a disk of 0
// is none: Simulate's figures exactly, and MakePlan's plan without a disk
// section.
func TestDiskZeroIsNoDisk(t *testing.T) {
	for ji, in := range tierJobs() {
		trace, err := Trace(in.Dataset, in.Job)
		if err != nil {
			t.Fatal(err)
		}
		var all int64
		for _, size := range in.Dataset.ChunkSizes {
			all += size
		}
		for _, ram := range []int64{0, all / 7, all / 2} {
			for _, p := range []Policy{LRU, Belady} {
				want := Simulate(trace, in.Dataset.ChunkSizes, ram, p)
				if got := simulateTiers(trace, in.Dataset.ChunkSizes, ram, 0, p); !reflect.DeepEqual(got, want) {
					t.Errorf("job %d ram %d %v: SimulateTiers with no disk\n%+v\nSimulate\n%+v", ji, ram, p, got, want)
				}
				if got := simulateTiers(trace, in.Dataset.ChunkSizes, ram, -5, p); !reflect.DeepEqual(got, want) {
					t.Errorf("job %d ram %d %v: a negative disk is not no disk", ji, ram, p)
				}
				for _, disk := range []int64{1, all / 5, all / 2} {
					checkTierConservation(t, simulateTiers(trace, in.Dataset.ChunkSizes, ram, disk, p), trace, in.Dataset.ChunkSizes, ram, p, nil)
				}
			}
		}
	}

	in := goldenInput()
	want, err := json.Marshal(mustPlan(t, in))
	if err != nil {
		t.Fatal(err)
	}
	in.DiskCacheBytes = 0
	p := mustPlan(t, in)
	if p.Disk != nil {
		t.Errorf("a plan with no disk has a disk section: %+v", p.Disk)
	}
	got, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("no disk changed the plan's JSON")
	}
}

// A plan with a disk: its disk section is the two-tier simulation of the
// plan's trace under each policy, and the rest of the plan is the plan
// without a disk.
func TestMakePlanDisk(t *testing.T) {
	in := goldenInput()
	alone := mustPlan(t, in)
	in.DiskCacheBytes = 1536 << 20
	p := mustPlan(t, in)
	if p.Disk == nil || p.Disk.DiskCacheBytes != in.DiskCacheBytes || p.Disk.Aware != nil {
		t.Fatalf("disk section %+v", p.Disk)
	}
	trace, err := Trace(in.Dataset, in.Job)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		got *TierResult
		p   Policy
	}{{&p.Disk.LRU, LRU}, {&p.Disk.Optimal, Belady}} {
		want := tierResult(simulateTiers(trace, in.Dataset.ChunkSizes, in.CacheBytes, in.DiskCacheBytes, tt.p), p.DatasetBytes, p.DatasetBytes)
		if !reflect.DeepEqual(*tt.got, want) || tt.got.Policy != tt.p {
			t.Errorf("%v: %+v, want %+v", tt.p, *tt.got, want)
		}
		var store, disk int64
		for _, e := range tt.got.Epochs {
			store += e.StoreBytes
			disk += e.DiskBytes
			if f := float64(e.StoreBytes) / float64(p.DatasetBytes); e.StoreFraction != f {
				t.Errorf("%v epoch %d: store fraction %v, want %v", tt.p, e.Epoch, e.StoreFraction, f)
			}
		}
		if store != tt.got.StoreBytes || disk != tt.got.DiskBytes || disk == 0 {
			t.Errorf("%v: totals store %d disk %d; epochs sum to %d and %d", tt.p, tt.got.StoreBytes, tt.got.DiskBytes, store, disk)
		}
	}
	p.Disk = nil
	if !reflect.DeepEqual(p, alone) {
		t.Errorf("a disk changed the rest of the plan")
	}

	in.DiskCacheBytes = -1
	if _, err := MakePlan(context.Background(), in); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "disk cache size -1") {
		t.Errorf("a negative disk: %v", err)
	}
}

func TestWriteTextDiskGolden(t *testing.T) {
	in := goldenInput()
	in.DiskCacheBytes = 1536 << 20
	p := mustPlan(t, in)
	var b bytes.Buffer
	if err := p.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "plan-disk.txt", b.Bytes())
	js, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "plan-disk.json", append(js, '\n'))
}

// In importance mode a disk adds the three policies' store and disk reads,
// the importance-aware one's simulated with the disk ranking by its keys.
func TestImportancePlanDisk(t *testing.T) {
	in := importanceGoldenInput(t)
	alone := mustPlan(t, in)
	in.DiskCacheBytes = alone.DatasetBytes / 2
	p := mustPlan(t, in)
	ip := p.Importance
	if ip == nil || ip.Disk == nil || ip.Disk.Aware == nil || p.Disk == nil {
		t.Fatalf("importance plan %+v", ip)
	}
	for _, tt := range []struct {
		name       string
		ram        Result
		tier       TierResult
		wantPolicy Policy
	}{
		{"lru", ip.LRU, ip.Disk.LRU, LRU},
		{"aware", ip.Aware, *ip.Disk.Aware, ImportanceAware},
		{"optimal", ip.Optimal, ip.Disk.Optimal, Belady},
	} {
		if tt.tier.Policy != tt.wantPolicy || len(tt.tier.Epochs) != len(tt.ram.Epochs) {
			t.Fatalf("%s: %+v", tt.name, tt.tier)
		}
		for i, e := range tt.tier.Epochs {
			if e.StoreBytes+e.DiskBytes != tt.ram.Epochs[i].BackendBytes {
				t.Errorf("%s epoch %d: store %d + disk %d, the cache alone reads %d", tt.name, e.Epoch, e.StoreBytes, e.DiskBytes, tt.ram.Epochs[i].BackendBytes)
			}
		}
		if tt.tier.DiskBytes == 0 {
			t.Errorf("%s: nothing read from disk", tt.name)
		}
	}
	ip.Disk, p.Disk = nil, nil
	if !reflect.DeepEqual(p, alone) {
		t.Errorf("a disk changed the rest of the importance plan")
	}
	var b bytes.Buffer
	if err := mustPlan(t, in).WriteText(&b); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(b.String(), "Disk tier"); n != 2 || !strings.Contains(b.String(), "aware store") {
		t.Errorf("want a disk table for each mode, the importance one with the aware policy:\n%s", &b)
	}
}

// A cluster with a disk on each node: per node the two-tier simulation
// of its part of the trace; with one node, MakePlan's optimal figures.
func TestClusterPlanDisk(t *testing.T) {
	d := unevenDataset()
	job := Job{Params: shuffle.Params{Seed: 5, Window: 6, BatchSize: 8, World: 4}, Epochs: 3}
	var all int64
	for _, size := range d.ChunkSizes {
		all += size
	}
	for _, nodes := range []int{1, 3} {
		in := ClusterInput{Dataset: d, Job: job, IndexKey: 9, Nodes: nodes, NodeCacheBytes: all / 10}
		alone, err := MakeClusterPlan(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		in.NodeDiskCacheBytes = all
		p, err := MakeClusterPlan(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if p.NodeDiskCacheBytes != all {
			t.Errorf("%d nodes: node disk %d", nodes, p.NodeDiskCacheBytes)
		}
		for i, e := range p.Epochs {
			a := alone.Epochs[i]
			if e.StoreBytes+e.DiskBytes != a.StoreBytes || e.Hits != a.Hits {
				t.Errorf("%d nodes epoch %d: store %d + disk %d, hits %d; without disks store %d, hits %d",
					nodes, e.Epoch, e.StoreBytes, e.DiskBytes, e.Hits, a.StoreBytes, a.Hits)
			}
			if i > 0 && e.StoreBytes != 0 {
				t.Errorf("%d nodes epoch %d: %d bytes from the store with disks holding everything", nodes, e.Epoch, e.StoreBytes)
			}
		}
		var b bytes.Buffer
		if err := p.WriteText(&b); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"Disk      ", "disk reads, warm epochs (mean)", "  disk  "} {
			if !strings.Contains(b.String(), want) {
				t.Errorf("%d nodes: the report lacks %q:\n%s", nodes, want, &b)
			}
		}
		if nodes == 1 {
			plan := mustPlan(t, PlanInput{Dataset: d, Job: job, CacheBytes: in.NodeCacheBytes, DiskCacheBytes: all, BackendBytesPerSec: 1})
			for i, e := range p.Epochs {
				if o := plan.Disk.Optimal.Epochs[i]; e.StoreBytes != o.StoreBytes || e.DiskBytes != o.DiskBytes {
					t.Errorf("one node epoch %d: store %d disk %d; the single plan's %d and %d", e.Epoch, e.StoreBytes, e.DiskBytes, o.StoreBytes, o.DiskBytes)
				}
			}
		}
	}
	if _, err := MakeClusterPlan(context.Background(), ClusterInput{Dataset: d, Job: job, Nodes: 2, NodeDiskCacheBytes: -1}); !errors.Is(err, ErrInvalid) {
		t.Errorf("a negative node disk: %v", err)
	}
	if _, err := MakeClusterPlan(context.Background(), ClusterInput{Dataset: d, Job: job, Nodes: 4, NodeDiskCacheBytes: 1 << 62}); !errors.Is(err, ErrInvalid) {
		t.Errorf("node disks overflowing: %v", err)
	}
}
