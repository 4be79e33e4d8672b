package planner

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/shuffle"
)

// inPlaceDataset is a dataset served in place: 12 chunks whose resident
// sizes (what the cache holds) and store sizes (what a load reads) differ
// and are not in proportion, as a Parquet job reading some columns, or an
// MDS shard read whole and decoded, has them. Chunk 5 holds no samples.
func inPlaceDataset() Dataset {
	d := Dataset{}
	for c := range 12 {
		k := 3 + c%4
		if c == 5 {
			k = 0
		}
		d.Counts = append(d.Counts, k)
		d.ChunkSizes = append(d.ChunkSizes, int64(1000+100*c))
		d.StoreSizes = append(d.StoreSizes, int64(70+37*((c*5)%12)))
	}
	return d
}

// epochAccesses returns, per epoch of the job, the chunks its trace
// accesses, in order.
func epochAccesses(t *testing.T, d Dataset, j Job) map[int][]int32 {
	t.Helper()
	trace, err := Trace(d, j)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]int32{}
	for _, a := range trace {
		out[int(a.Epoch)] = append(out[int(a.Epoch)], a.Chunk)
	}
	return out
}

// A dataset whose loads read other bytes than the cache holds: the
// planner's store bytes are what the simulation loads times each chunk's
// store size, and its room — cache, disk, working set, a node's share —
// counts resident sizes. The cases are those whose loads are known
// without simulating: a cache that holds every chunk loads each once,
// a cache of nothing loads at every access, and a disk that holds every
// chunk below a cache of nothing reads the store once per chunk and the
// disk (resident bytes) at every later access.
func TestStoreSizes(t *testing.T) {
	d := inPlaceDataset()
	job := Job{Params: shuffle.Params{Seed: 7, Window: 3, BatchSize: 4, World: 2}, Epochs: 3}
	var resident, stored int64 // of the chunks with samples: those a job reads
	for c, k := range d.Counts {
		if k > 0 {
			resident += d.ChunkSizes[c]
			stored += d.StoreSizes[c]
		}
	}
	acc := epochAccesses(t, d, job)
	each := func(chunks []int32, sizes []int64) (n int64) {
		for _, c := range chunks {
			n += sizes[c]
		}
		return n
	}
	firsts := map[int][]int32{} // per epoch, the chunks accessed for the first time in the trace
	later := map[int][]int32{}  // and the other accesses
	seen := map[int32]bool{}
	for e := range job.Epochs {
		for _, c := range acc[e] {
			if seen[c] {
				later[e] = append(later[e], c)
			} else {
				firsts[e] = append(firsts[e], c)
				seen[c] = true
			}
		}
	}

	tests := []struct {
		name        string
		cache, disk int64
		// per epoch: the bytes read from the store and from the disk
		store, fromDisk func(e int) int64
	}{
		{"a cache of every chunk", sum(d.ChunkSizes), 0,
			func(e int) int64 { return each(firsts[e], d.StoreSizes) },
			func(int) int64 { return 0 }},
		{"no cache", 0, 0,
			func(e int) int64 { return each(acc[e], d.StoreSizes) },
			func(int) int64 { return 0 }},
		{"no cache, a disk of every chunk", 0, sum(d.ChunkSizes),
			func(e int) int64 { return each(firsts[e], d.StoreSizes) },
			func(e int) int64 { return each(later[e], d.ChunkSizes) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustPlan(t, PlanInput{Dataset: d, Job: job, CacheBytes: tt.cache, DiskCacheBytes: tt.disk, BackendBytesPerSec: 1 << 20})
			if p.DatasetBytes != sum(d.ChunkSizes) || p.DatasetStoreBytes != sum(d.StoreSizes) || p.EpochStoreBytes != sum(d.StoreSizes) {
				t.Errorf("dataset bytes %d, in the store %d, an epoch's %d; want %d, %d, %d",
					p.DatasetBytes, p.DatasetStoreBytes, p.EpochStoreBytes, sum(d.ChunkSizes), sum(d.StoreSizes), sum(d.StoreSizes))
			}
			if p.WorkingSetBytes > resident || p.WorkingSetBytes <= stored {
				t.Errorf("working set %d: want resident bytes (at most %d, more than the %d stored)", p.WorkingSetBytes, resident, stored)
			}
			for _, r := range []Result{p.LRU, p.Optimal} {
				if tt.disk > 0 {
					continue // the RAM figures of a plan with a disk are those without one
				}
				for _, er := range r.Epochs {
					if er.BackendBytes != tt.store(er.Epoch) {
						t.Errorf("%v epoch %d: backend bytes %d, want %d", r.Policy, er.Epoch, er.BackendBytes, tt.store(er.Epoch))
					}
				}
			}
			if tt.disk == 0 {
				if p.Disk != nil {
					t.Fatalf("a disk section without a disk: %+v", p.Disk)
				}
				return
			}
			for _, tr := range []TierResult{p.Disk.LRU, p.Disk.Optimal} {
				var store, disk int64
				for _, te := range tr.Epochs {
					if te.StoreBytes != tt.store(te.Epoch) || te.DiskBytes != tt.fromDisk(te.Epoch) {
						t.Errorf("%v epoch %d: %d from the store, %d from the disk; want %d and %d",
							tr.Policy, te.Epoch, te.StoreBytes, te.DiskBytes, tt.store(te.Epoch), tt.fromDisk(te.Epoch))
					}
					if want := float64(te.StoreBytes) / float64(sum(d.StoreSizes)); te.StoreFraction != want {
						t.Errorf("%v epoch %d: store fraction %v, want %v (of the dataset's store bytes)", tr.Policy, te.Epoch, te.StoreFraction, want)
					}
					if want := float64(te.DiskBytes) / float64(sum(d.ChunkSizes)); te.DiskFraction != want {
						t.Errorf("%v epoch %d: disk fraction %v, want %v (of the dataset's resident bytes)", tr.Policy, te.Epoch, te.DiskFraction, want)
					}
					store += te.StoreBytes
					disk += te.DiskBytes
				}
				if tr.StoreBytes != store || tr.DiskBytes != disk {
					t.Errorf("%v: totals %d and %d, the epochs' %d and %d", tr.Policy, tr.StoreBytes, tr.DiskBytes, store, disk)
				}
			}
		})
	}

	// A cluster whose caches hold their shares reads each chunk once, by
	// its owner; importance mode's chunks read are their store bytes.
	cp := mustClusterPlan(t, ClusterInput{Dataset: d, Job: job, IndexKey: 99, Nodes: 3, NodeCacheBytes: sum(d.ChunkSizes)})
	for _, e := range cp.Epochs {
		if want := each(firsts[e.Epoch], d.StoreSizes); e.StoreBytes != want {
			t.Errorf("cluster epoch %d: store bytes %d, want %d", e.Epoch, e.StoreBytes, want)
		}
	}
	if cp.DatasetBytes != sum(d.ChunkSizes) || cp.DatasetStoreBytes != sum(d.StoreSizes) || cp.ColdStoreFraction() != float64(stored)/float64(sum(d.StoreSizes)) {
		t.Errorf("cluster: dataset %d bytes, %d stored, cold store fraction %v", cp.DatasetBytes, cp.DatasetStoreBytes, cp.ColdStoreFraction())
	}
}

// storeFigures are a plan's figures of bytes read from the store, and
// zeroStore zeroes them in place: with them zeroed, the rest of a plan
// depends on resident sizes alone.
func storeFigures(v any, zero bool) []int64 {
	var out []int64
	f := func(p *int64) {
		out = append(out, *p)
		if zero {
			*p = 0
		}
	}
	ff := func(p *float64) {
		if zero {
			*p = 0
		}
	}
	result := func(r *Result) {
		f(&r.BackendBytes)
		for i := range r.Epochs {
			f(&r.Epochs[i].BackendBytes)
		}
		for i := range r.Jobs {
			f(&r.Jobs[i].BackendBytes)
			for k := range r.Jobs[i].Epochs {
				f(&r.Jobs[i].Epochs[k].BackendBytes)
			}
		}
		for i := range r.Components {
			f(&r.Components[i].BackendBytes)
			for k := range r.Components[i].Epochs {
				f(&r.Components[i].Epochs[k].BackendBytes)
			}
		}
	}
	tier := func(tr *TierResult) {
		f(&tr.StoreBytes)
		ff(&tr.StoreFraction)
		for i := range tr.Epochs {
			f(&tr.Epochs[i].StoreBytes)
			ff(&tr.Epochs[i].StoreFraction)
		}
	}
	disk := func(dp *DiskPlan) {
		if dp == nil {
			return
		}
		tier(&dp.LRU)
		tier(&dp.Optimal)
		if dp.Aware != nil {
			tier(dp.Aware)
		}
	}
	bill := func(b *Bill) {
		if b == nil {
			return
		}
		for i := range b.Epochs {
			f(&b.Epochs[i].Bytes)
			ff(&b.Epochs[i].Cost)
		}
		f(&b.Total.Bytes)
		ff(&b.Total.Cost)
	}
	mix := func(mp *MixPlan) {
		if mp == nil {
			return
		}
		for i := range mp.Components {
			f(&mp.Components[i].DatasetStoreBytes)
		}
	}
	switch p := v.(type) {
	case *Plan:
		f(&p.DatasetStoreBytes)
		mix(p.Mix)
		if p.Mix == nil {
			// A mixture's is its components' in proportion: rounded,
			// not linear in their store sizes.
			f(&p.EpochStoreBytes)
		} else if zero {
			p.EpochStoreBytes = 0
		}
		result(&p.LRU)
		result(&p.Optimal)
		bill(p.Bill)
		disk(p.Disk)
		if ip := p.Importance; ip != nil {
			for i := range ip.ReadBytes {
				f(&ip.ReadBytes[i])
			}
			result(&ip.LRU)
			result(&ip.Aware)
			result(&ip.Optimal)
			disk(ip.Disk)
		}
	case *ClusterPlan:
		f(&p.DatasetStoreBytes)
		mix(p.Mix)
		bill(p.Bill)
		for i := range p.Epochs {
			f(&p.Epochs[i].StoreBytes)
			if zero {
				p.Epochs[i].MaxNodeStoreBytes = 0 // a maximum over nodes: not linear
			}
		}
	case *SharedPlan:
		f(&p.DatasetStoreBytes)
		result(&p.LRU)
		result(&p.Optimal)
		result(&p.Partitioned)
		ff(&p.LRUReads) // over the store bytes: not linear
		ff(&p.OptimalReads)
		ff(&p.PartitionedReads)
	case *ResizePlan:
		f(&p.StoreBytes)
		ff(&p.WarmSeconds) // the slowest node's: not linear
		ff(&p.SoonSeconds)
	default:
		panic(fmt.Sprintf("storeFigures of %T", v))
	}
	return out
}

// Every kind of plan counts store bytes by the chunks' store sizes and
// nothing else by them: its store figures are linear in the store sizes —
// f(S) is Σ_c S_c · f(e_c), e_c a store size of one byte for chunk c
// alone, and f(0) is 0 — so each is a sum over the loads the simulation
// made of the loaded chunks' store sizes; a mixture's tar component adds
// its own loads' bytes; and with the store figures zeroed, the plan is
// the one without store sizes, whose room is counted in resident sizes.
// Store sizes equal to the chunk sizes plan as none (a tar dataset) but
// for the store totals they add.
func TestStoreSizesEveryPlan(t *testing.T) {
	d := inPlaceDataset()
	n := len(d.Counts)
	job := Job{Params: shuffle.Params{Seed: 3, Window: 4, BatchSize: 4, World: 2}, Epochs: 3}
	cache := sum(d.ChunkSizes) / 3
	counts := []int{}
	for _, k := range d.Counts {
		counts = append(counts, k)
	}
	snap := clusteredSnapshot(t, counts, 5)
	ctx := context.Background()
	// Rates under which nothing stalls whatever the store sizes: the
	// stall figures depend on them.
	rates := func(in PlanInput) PlanInput {
		in.BackendBytesPerSec, in.ConsumeBytesPerSec = 1e15, 1
		return in
	}
	// tar is d's partner in a mixture, read with its store sizes given
	// (nil: a tar dataset's, the chunk sizes).
	tar := func(store []int64) Dataset {
		x := Dataset{ChunkSizes: []int64{800, 900, 1000, 700}, Counts: []int{4, 5, 3, 6}}
		x.StoreSizes = store
		return x
	}
	plans := []struct {
		name string
		plan func(d Dataset, tarStore []int64) (any, error)
	}{
		{"plan", func(d Dataset, _ []int64) (any, error) {
			return MakePlan(ctx, rates(PlanInput{Dataset: d, Job: job, CacheBytes: cache}))
		}},
		{"plan with a disk", func(d Dataset, _ []int64) (any, error) {
			return MakePlan(ctx, rates(PlanInput{Dataset: d, Job: job, CacheBytes: cache / 2, DiskCacheBytes: cache}))
		}},
		{"importance with a disk", func(d Dataset, _ []int64) (any, error) {
			return MakePlan(ctx, rates(PlanInput{Dataset: d, Job: job, CacheBytes: cache / 2, DiskCacheBytes: cache,
				Importance: &Importance{Snapshot: snap, Hot: 2}}))
		}},
		{"mixture with a tar dataset", func(d Dataset, tarStore []int64) (any, error) {
			return MakePlan(ctx, rates(PlanInput{Job: job, CacheBytes: cache, DiskCacheBytes: cache / 2, Mix: &Mix{Components: []MixComponent{
				{Name: "inplace", Weight: 2, Dataset: d}, {Name: "tar", Weight: 1, Dataset: tar(tarStore)}}}}))
		}},
		{"cluster with disks", func(d Dataset, _ []int64) (any, error) {
			return MakeClusterPlan(ctx, ClusterInput{Dataset: d, Job: job, IndexKey: 5, Nodes: 3, NodeCacheBytes: cache / 3, NodeDiskCacheBytes: cache / 3})
		}},
		{"cluster of a mixture", func(d Dataset, tarStore []int64) (any, error) {
			return MakeClusterPlan(ctx, ClusterInput{Job: job, Nodes: 2, NodeCacheBytes: cache / 2, Mix: &Mix{Components: []MixComponent{
				{Name: "inplace", Weight: 1, Dataset: d, IndexKey: 5}, {Name: "tar", Weight: 1, Dataset: tar(tarStore), IndexKey: 6}}}})
		}},
		{"shared", func(d Dataset, _ []int64) (any, error) {
			return MakeSharedPlan(ctx, SharedInput{Dataset: d, CacheBytes: cache, Jobs: []SharedJob{
				{Job: job, Name: "a"}, {Job: Job{Params: shuffle.Params{Seed: 9, Window: 2, BatchSize: 3, World: 1}, Epochs: 2}, Name: "b", Speed: 0.5}}})
		}},
		{"resize", func(d Dataset, _ []int64) (any, error) {
			return MakeResizePlan(ResizeInput{Dataset: d, IndexKey: 5, Job: Job{Params: job.Params, FirstEpoch: 0, Epochs: 1},
				From: PlannedMembers(2), To: PlannedMembers(4), PrefetchWindows: 1, NodeCacheBytes: cache, StoreBytesPerSec: 1e6})
		}},
	}
	with := func(store []int64) Dataset {
		x := d
		x.StoreSizes = store
		return x
	}
	unit := func(c int) []int64 {
		s := make([]int64, n)
		s[c] = 1
		return s
	}
	for _, tt := range plans {
		t.Run(tt.name, func(t *testing.T) {
			zeroTar := make([]int64, 4) // the tar partner's loads read nothing
			plan := func(d Dataset, tarStore []int64) any {
				t.Helper()
				p, err := tt.plan(d, tarStore)
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			must := func(d Dataset) any { return plan(d, nil) }
			zero := storeFigures(plan(with(make([]int64, n)), zeroTar), false)
			if slices.ContainsFunc(zero, func(v int64) bool { return v != 0 }) {
				t.Errorf("store figures %v with every store size 0; want none", zero)
			}
			got := storeFigures(plan(d, zeroTar), false)
			want := make([]int64, len(got))
			for c := range n {
				fc := storeFigures(plan(with(unit(c)), zeroTar), false)
				for i := range want {
					want[i] += d.StoreSizes[c] * fc[i]
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("store figures %v\nwant the loads times the store sizes %v", got, want)
			}
			if !slices.ContainsFunc(got, func(v int64) bool { return v != 0 }) {
				t.Errorf("no store bytes: %v", got)
			}
			// A tar partner's loads add their chunks' sizes.
			tarOnly := storeFigures(plan(with(make([]int64, n)), nil), false)
			both := storeFigures(must(d), false)
			for i := range both {
				if both[i] != got[i]+tarOnly[i] {
					t.Errorf("store figure %d: %d with a tar partner, %d + %d apart", i, both[i], got[i], tarOnly[i])
				}
			}

			// With the store figures zeroed, the plan without store sizes.
			zeroed, plain := must(d), must(with(nil))
			storeFigures(zeroed, true)
			storeFigures(plain, true)
			if !reflect.DeepEqual(zeroed, plain) {
				t.Errorf("the resident figures depend on the store sizes:\n%+v\nwithout them\n%+v", zeroed, plain)
			}

			// Store sizes equal to the chunk sizes: the store figures of
			// none.
			same := storeFigures(must(with(d.ChunkSizes)), false)
			none := storeFigures(must(with(nil)), false)
			if len(same) != len(none) {
				t.Fatalf("%d store figures with store sizes, %d without", len(same), len(none))
			}
			for i := range same {
				if none[i] != 0 && same[i] != none[i] {
					t.Errorf("store figure %d: %d with store sizes equal to the chunk sizes, %d without", i, same[i], none[i])
				}
			}
		})
	}
}

// A plan refuses store sizes that are not one per chunk, or negative.
func TestStoreSizesInvalid(t *testing.T) {
	job := Job{Params: shuffle.Params{Seed: 1, Window: 2, BatchSize: 2, World: 1}, Epochs: 2}
	for _, store := range [][]int64{{1, 2}, {1, 2, 3, 4}, {1, -2, 3}} {
		d := Dataset{ChunkSizes: []int64{10, 20, 30}, Counts: []int{2, 2, 2}, StoreSizes: store}
		if _, err := MakePlan(context.Background(), PlanInput{Dataset: d, Job: job, BackendBytesPerSec: 1}); err == nil {
			t.Errorf("store sizes %v planned", store)
		}
		if _, err := MakeResizePlan(ResizeInput{Dataset: d, IndexKey: cluster.IndexKey("x"), Job: job, From: PlannedMembers(1), To: PlannedMembers(2), StoreBytesPerSec: 1}); err == nil {
			t.Errorf("store sizes %v planned a resize", store)
		}
	}
}
