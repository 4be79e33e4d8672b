package planner

import (
	"context"
	"fmt"
	"math"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/shuffle"
)

// MaxNodes bounds ClusterInput.Nodes: ownership costs O(chunks × nodes)
// to compute. It is the bound /plan?nodes= enforces.
const MaxNodes = api.MaxPlanNodes

// ClusterInput is what MakeClusterPlan predicts for: a dataset, a job (at
// least two epochs: the first is cold), and a cluster of Nodes gateways
// each with a cache of NodeCacheBytes.
type ClusterInput struct {
	Dataset Dataset
	Job     Job
	// Prices bill the nodes' store reads and the bytes crossing nodes
	// (ClusterPlan.Bill).
	Prices api.Prices
	// IndexKey is cluster.IndexKey of the index's ID. Chunk ownership, and
	// with it every figure below, depends on it, so a prediction for a
	// live cluster must use the served index's.
	IndexKey uint64
	Nodes    int // 1..MaxNodes
	// MemberIDs, if set, are the members' IDs (cluster.Membership.IDs,
	// Nodes of them), so that a prediction for a live cluster places
	// chunks as it does; nil names the nodes by position
	// (cluster.Positions), which places them alike in distribution.
	MemberIDs      []uint64
	NodeCacheBytes int64 // each node's cache, >= 0
	// NodeDiskCacheBytes is each node's disk tier below its cache, >= 0;
	// 0 means none.
	NodeDiskCacheBytes int64

	// Mix, if not nil, predicts the job over a mixture of datasets instead
	// of Dataset, which must then be empty, and IndexKey, which each
	// component's own replaces (ClusterPlan.Mix).
	Mix *Mix

	// Importance, if not nil, adds the figures of the same job and cache
	// in importance mode (ClusterPlan.Importance), for one node only: a
	// node is a gateway, whose plan it is (PlanInput.Importance); the
	// planner models importance sampling on no cluster of several.
	Importance *Importance

	// Budget bounds the prediction's work; zero is no bound.
	Budget Budget
}

// ClusterPlan is MakeClusterPlan's report. Its JSON form is what the
// gateway's GET /plan?nodes=N returns; WriteText renders it for the CLI.
//
// Bytes of samples are counted at their chunk's average: a sample of chunk
// c weighs ChunkSizes[c]/Counts[c] (the planner knows chunk sizes, not
// sample sizes), so an epoch that serves every sample delivers the
// dataset's bytes, and the fractions below are those of the live cluster
// up to the spread of sample sizes within a chunk.
type ClusterPlan struct {
	Job Job `json:"job"`
	// Mix describes the mixture a prediction of one (ClusterInput.Mix) is
	// of; the figures below are then the mixture's, as in Plan.
	Mix *MixPlan `json:"mix,omitempty"`
	// Transform is the answer for a pipeline, when asked: the cores each
	// node needs for its share of the rate (no decoded-cache question:
	// that is one gateway's plan's).
	Transform *TransformPlan `json:"transform,omitempty"`

	Nodes  int `json:"nodes"`
	Chunks int `json:"chunks"`
	// Samples is the dataset's, as in Plan; BatchesPerEpoch the global
	// batches of the first epoch planned (Epochs[0]'s), each epoch's
	// samples and batches being in Epochs.
	Samples           int   `json:"samples"`
	BatchesPerEpoch   int   `json:"batches_per_epoch"`
	NodeCacheBytes    int64 `json:"node_cache_bytes"`
	ClusterCacheBytes int64 `json:"cluster_cache_bytes"` // Nodes × NodeCacheBytes
	// NodeDiskCacheBytes is each node's disk tier below its cache, absent
	// (0) for none.
	NodeDiskCacheBytes int64 `json:"node_disk_cache_bytes,omitempty"`
	// DatasetBytes and DatasetStoreBytes are the dataset's bytes in the
	// caches and in the store, as in Plan: the store bytes below are
	// store sizes, the owned bytes and the bytes ranks receive cache
	// sizes.
	DatasetBytes      int64 `json:"dataset_bytes"`
	DatasetStoreBytes int64 `json:"dataset_store_bytes,omitempty"`
	// EpochBytes is what the ranks receive in an epoch, as in Plan.
	EpochBytes int64 `json:"epoch_bytes"`
	// MinOwnedBytes and MaxOwnedBytes are the bytes of the chunks the
	// least and the most loaded node owns: rendezvous hashing balances
	// them only statistically, and a node whose share exceeds its cache
	// misses in every epoch however large the cluster's cache.
	MinOwnedBytes int64 `json:"min_owned_bytes"`
	MaxOwnedBytes int64 `json:"max_owned_bytes"`

	Epochs []ClusterEpoch `json:"epochs"`
	// Bill is what the nodes' store reads and the bytes crossing nodes
	// cost (a gateway's cluster plan).
	Bill *Bill `json:"bill,omitempty"`

	// Importance is, for one node, the same job read by importance from
	// one snapshot (ClusterInput.Importance): the single gateway's
	// figures, Plan.Importance.
	Importance *ImportancePlan `json:"importance,omitempty"`

	// Locality is the shuffle quality of the batches ranks receive with
	// locality-aware assignment, PlainCut without it (each rank takes its
	// plain cut of the global batch). Both are over the same chunk order:
	// locality changes only which rank receives which sample.
	Locality Quality `json:"locality"`
	PlainCut Quality `json:"plain_cut"`
	// Assignment is the one the job gets (api.AssignLocality,
	// api.AssignPlain, api.AssignBalance), as the gateway that asked
	// resolved it: a job with locality=false, balance= or a token or clip
	// job takes the plain cut's figures (balance= moves samples between
	// the ranks of a node's share by cost, not by where chunks live). ""
	// where the caller did not say.
	Assignment string `json:"assignment,omitempty"`
}

// ClusterEpoch is one epoch of a ClusterPlan: its samples and global
// batches as the gateway serves them (api.PlanEpoch's), and what the cluster
// reads and moves for them.
type ClusterEpoch struct {
	Epoch   int `json:"epoch"`
	Samples int `json:"samples"`
	Batches int `json:"batches"`
	// StoreBytes is what the whole cluster reads from the store: the sum
	// over nodes of the bytes each node's cache misses, each node seeing
	// the accesses to the chunks it owns, under the schedule's next-use
	// (Belady) eviction. MaxNodeStoreBytes is the busiest node's part.
	// With a disk tier on each node (ClusterPlan.NodeDiskCacheBytes) they
	// are the misses read from the store, and DiskBytes those read from
	// the nodes' disks, absent (0) from the JSON when none are.
	StoreBytes        int64 `json:"store_bytes"`
	StoreReads        int   `json:"store_reads"`
	StoreGETs         int64 `json:"store_gets,omitempty"`
	MaxNodeStoreBytes int64 `json:"max_node_store_bytes"`
	DiskBytes         int64 `json:"disk_bytes,omitempty"`
	Accesses          int   `json:"accesses"` // chunk accesses, all nodes
	Hits              int   `json:"hits"`
	// DeliveredBytes is what the ranks receive.
	DeliveredBytes int64 `json:"delivered_bytes"`
	// CrossNodeBytes are the bytes ranks receive from a chunk their home
	// node does not own, with locality-aware assignment;
	// CrossNodeBytesPlain the same without it.
	CrossNodeBytes      int64 `json:"cross_node_bytes"`
	CrossNodeBytesPlain int64 `json:"cross_node_bytes_plain"`
	// BalancedSamples are the samples the balancing step of
	// cluster.Assign moved to a node that does not own them, and
	// BalancingBytes their bytes. Assignment keeps every sample it can on
	// its owner, so with locality these are exactly the samples that cross
	// nodes: BalancingBytes equals CrossNodeBytes.
	BalancedSamples int   `json:"balanced_samples"`
	BalancingBytes  int64 `json:"balancing_bytes"`
}

// MakeClusterPlan predicts what a cluster of in.Nodes gateways does with
// in.Job: per epoch, the bytes read from the store, the bytes that cross
// nodes with and without locality-aware assignment, the balancing traffic,
// and the shuffle quality of the batches ranks receive. It models the
// cluster as docs/planner.md §Cluster describes: the epoch's order is
// the job's alone (as on one gateway), each chunk is read and cached only
// by its owner, rank r's home is cluster.Home(r, world,
// nodes), and its samples are cluster.Assign's share of each global batch.
//
// With one node it is MakePlan's model exactly: StoreBytes are the optimal
// policy's backend bytes (with a disk tier, Plan.Disk's optimal store
// bytes, and DiskBytes its disk bytes) and both qualities are
// Plan.Quality. A disk tier (NodeDiskCacheBytes) is each node's own,
// below its cache, and holds only chunks the node owns, as its cache does.
//
// It costs one walk of the job's samples, one cluster.Assign per global
// batch (O(samples of the batch + nodes × log nodes)), and one Belady
// simulation per node over that node's part of the trace, which together
// cost what one simulation of the whole trace does.
//
// Errors are MakePlan's: ErrInvalid for input it refuses, in.Budget's
// up front included, ErrBudget when the budget runs out, ctx's error when
// ctx is done, checked inside the walk and the simulations.
func MakeClusterPlan(ctx context.Context, in ClusterInput) (*ClusterPlan, error) {
	return makeClusterPlan(newMeter(ctx, in.Budget), in)
}

// makeClusterPlan is MakeClusterPlan counting on m.
func makeClusterPlan(m *meter, in ClusterInput) (*ClusterPlan, error) {
	if in.Mix != nil {
		return makeMixClusterPlan(m, in)
	}
	s, err := newSchedule(in.Dataset, in.Job)
	if err != nil {
		return nil, err
	}
	if err := validateClusterInput(in, s); err != nil {
		return nil, err
	}
	passes := int64(1)
	if in.Importance != nil {
		switch {
		case in.Nodes > 1:
			return nil, fmt.Errorf("%w: importance sampling is planned for one node, not for %d", ErrInvalid, in.Nodes)
		case in.Job.Edit != nil:
			return nil, fmt.Errorf("%w: a job's edits apply to the uniform shuffle, not to importance sampling", ErrInvalid)
		}
		if err := in.Importance.validate(s.n); err != nil {
			return nil, err
		}
		passes++
	}
	if err := admitCluster(m, in, s, passes); err != nil {
		return nil, err
	}
	l := newLayout(in.Dataset, in.IndexKey, in.ids())
	p, err := clusterPlan(m, in, s, l, func(visit func(epoch int, chunks []int32)) error {
		return s.walk(m, s.j.Window, visit)
	}, float64(sum(in.Dataset.ChunkSizes)))
	if err == nil && in.Importance != nil {
		p.Importance, err = planImportance(m, s, in.Importance, in.NodeCacheBytes, in.NodeDiskCacheBytes)
	}
	return p, err
}

// admitCluster checks a cluster prediction's walk against m's budget up
// front: passes walks of the epochs of s (the dataset's schedule or a
// mixture's merged one), each global batch counting its nodes besides
// its samples, and a trace of them for each.
func admitCluster(m *meter, in ClusterInput, s *schedule, passes int64) error {
	epochs, nb := int64(in.Job.Epochs), int64(s.numBatches())
	return m.admit(passes*epochs*(int64(s.n)+nb*int64(in.Nodes)), passes*epochs*nb)
}

// validateClusterInput checks what a cluster prediction adds to a job on
// s, the dataset's schedule or a mixture's merged one.
func validateClusterInput(in ClusterInput, s *schedule) error {
	switch {
	case in.Job.Epochs < 2:
		return fmt.Errorf("%w: %d epochs; a plan needs >= 2 (the first is cold, the rest are the steady state)",
			ErrInvalid, in.Job.Epochs)
	case in.Nodes < 1 || in.Nodes > MaxNodes:
		return fmt.Errorf("%w: %d nodes; must be 1..%d", ErrInvalid, in.Nodes, MaxNodes)
	case len(in.MemberIDs) > 0 && len(in.MemberIDs) != in.Nodes:
		return fmt.Errorf("%w: %d member IDs for %d nodes", ErrInvalid, len(in.MemberIDs), in.Nodes)
	case in.NodeCacheBytes < 0:
		return fmt.Errorf("%w: node cache size %d bytes; must be >= 0", ErrInvalid, in.NodeCacheBytes)
	case in.NodeCacheBytes > math.MaxInt64/int64(in.Nodes):
		return fmt.Errorf("%w: node cache size %d bytes × %d nodes overflows int64", ErrInvalid, in.NodeCacheBytes, in.Nodes)
	case in.NodeDiskCacheBytes < 0:
		return fmt.Errorf("%w: node disk cache size %d bytes; must be >= 0 (0: no disk tier)", ErrInvalid, in.NodeDiskCacheBytes)
	case in.NodeDiskCacheBytes > math.MaxInt64/int64(in.Nodes):
		return fmt.Errorf("%w: node disk cache size %d bytes × %d nodes overflows int64", ErrInvalid, in.NodeDiskCacheBytes, in.Nodes)
	}
	return nil
}

// clusterPlan predicts a validated input whose global batches walk
// yields, over the chunks of s with ownership l; read is the bytes an
// epoch reads before drop_last (the dataset's, for one dataset).
func clusterPlan(m *meter, in ClusterInput, s *schedule, l *layout, walk func(visit func(epoch int, chunks []int32)) error, read float64) (*ClusterPlan, error) {
	sizes, err := s.epochSizes()
	if err != nil {
		return nil, err
	}
	w := newClusterWalker(m, s, l)
	if err := walk(w.visit); err != nil {
		return nil, err
	}
	w.flush()
	// Every planned epoch, one of no batches (which the walk does not
	// visit) included.
	epochs := make([]ClusterEpoch, len(sizes))
	for i, z := range sizes {
		epochs[i] = ClusterEpoch{Epoch: z.Epoch}
	}
	for _, e := range w.epochs {
		epochs[e.Epoch-in.Job.FirstEpoch] = e
	}
	for i, z := range sizes {
		epochs[i].Samples, epochs[i].Batches = z.Samples, z.Batches
	}

	p := &ClusterPlan{
		Job:                in.Job,
		Nodes:              in.Nodes,
		Chunks:             len(s.d.Counts),
		Samples:            s.n,
		BatchesPerEpoch:    sizes[0].Batches,
		NodeCacheBytes:     in.NodeCacheBytes,
		ClusterCacheBytes:  in.NodeCacheBytes * int64(in.Nodes),
		NodeDiskCacheBytes: in.NodeDiskCacheBytes,
		Epochs:             epochs,
		Locality:           w.locality.quality(),
		PlainCut:           w.plain.quality(),
	}
	p.MinOwnedBytes = math.MaxInt64
	for k := range l.nodes {
		owned := sum(l.sizes[k])
		p.DatasetBytes += owned
		p.MinOwnedBytes = min(p.MinOwnedBytes, owned)
		p.MaxOwnedBytes = max(p.MaxOwnedBytes, owned)
	}
	p.DatasetStoreBytes = s.d.storeBytes()
	// The first planned epoch's, as BatchesPerEpoch: under the job's
	// edits, its own samples.
	p.EpochBytes = int64(math.Round(read * float64(served(s.j.Params, sizes[0].Samples)) / float64(s.n)))

	for k := range l.nodes {
		var store []int64 // nil: the sizes
		if l.store != nil {
			store = l.store[k]
		}
		var gets []int32
		if l.gets != nil {
			gets = l.gets[k]
		}
		res, err := newSimulator(w.traces[k], l.sizes[k], store, m).withGets(gets).runTiers(in.NodeCacheBytes, in.NodeDiskCacheBytes, Belady)
		if err != nil {
			return nil, err
		}
		for _, r := range res.Epochs {
			e := &p.Epochs[r.Epoch-in.Job.FirstEpoch]
			e.StoreBytes += r.BackendBytes
			e.StoreReads += r.StoreReads
			e.StoreGETs += r.StoreGETs
			e.MaxNodeStoreBytes = max(e.MaxNodeStoreBytes, r.BackendBytes)
			e.DiskBytes += r.DiskBytes
			e.Accesses += r.Accesses
			e.Hits += r.Hits
		}
	}
	p.Bill = clusterBill(p.Epochs, in.Prices)
	return p, nil
}

// layout is which node owns each chunk, and each node's chunks numbered
// densely so that a node's simulation is sized by what it owns: their
// sizes in the cache and, for a dataset with store sizes, in the store
// (store nil otherwise).
type layout struct {
	nodes int
	owner []int   // owner[c]: the node owning chunk c
	local []int32 // local[c]: chunk c's number among its owner's chunks
	sizes [][]int64
	store [][]int64
	gets  [][]int32
}

func newLayout(d Dataset, key uint64, ids []uint64) *layout {
	return layoutOf(d, owners(d, key, ids), len(ids))
}

// ids are the IDs the input's nodes are scored by.
func (in ClusterInput) ids() []uint64 {
	if len(in.MemberIDs) > 0 {
		return in.MemberIDs
	}
	return cluster.Positions(in.Nodes)
}

// owners returns each chunk's owner among nodes, as the gateway's
// catalog computes it.
func owners(d Dataset, key uint64, ids []uint64) []int {
	if len(ids) == 1 {
		// One node owns everything; skip hashing every chunk.
		return make([]int, len(d.Counts))
	}
	return cluster.BoundedOwners(key, d.Counts, ids)
}

// layoutOf is the layout of d's chunks owned by owner.
func layoutOf(d Dataset, owner []int, nodes int) *layout {
	l := &layout{nodes: nodes, owner: owner, local: make([]int32, len(d.Counts)), sizes: make([][]int64, nodes)}
	if d.StoreSizes != nil {
		l.store = make([][]int64, nodes)
	}
	if d.GETs != nil {
		l.gets = make([][]int32, nodes)
	}
	for c, k := range l.owner {
		l.local[c] = int32(len(l.sizes[k]))
		l.sizes[k] = append(l.sizes[k], d.ChunkSizes[c])
		if l.store != nil {
			l.store[k] = append(l.store[k], d.StoreSizes[c])
		}
		if l.gets != nil {
			l.gets[k] = append(l.gets[k], d.GETs[c])
		}
	}
	return l
}

// clusterWalker takes the global batches of a walk and accumulates, per
// node, the demand trace of its chunks and, per epoch, what crosses nodes.
type clusterWalker struct {
	m      *meter
	s      *schedule
	l      *layout
	cut    shuffle.Params
	traces [][]Access // per node, in its chunks' local numbers
	epochs []ClusterEpoch

	locality, plain *qualityMeter

	// Per-batch state, reused across batches.
	batch     int   // batches visited, over every epoch
	inEpoch   int   // the batch's number in its epoch
	stamp     []int // stamp[c]: the last batch that accessed chunk c
	nodeStamp []int // nodeStamp[k]: the last batch that accessed node k
	ids       []int // 0, 1, ...: Assign's answer is batch positions
	owners    []int // owners[i]: the owner of the batch's i-th sample
	share     []int // per rank: its plain cut's length
	home      []int // per rank: its home node
	rankBuf   []int32

	// Per-epoch sample counts per chunk, turned into bytes by flush.
	epoch                   int
	served, cross, crossCut []int32
	balanced                int
}

func newClusterWalker(m *meter, s *schedule, l *layout) *clusterWalker {
	chunks := len(s.d.Counts)
	w := &clusterWalker{
		m:         m,
		s:         s,
		l:         l,
		cut:       s.cut(),
		traces:    make([][]Access, l.nodes),
		locality:  newQualityMeter(chunks, s.j.BatchSize),
		plain:     newQualityMeter(chunks, s.j.BatchSize),
		stamp:     make([]int, chunks),
		nodeStamp: make([]int, l.nodes),
		share:     make([]int, 0, s.j.World),
		home:      make([]int, s.j.World),
		epoch:     -1,
		served:    make([]int32, chunks),
		cross:     make([]int32, chunks),
		crossCut:  make([]int32, chunks),
	}
	for r := range w.home {
		w.home[r] = cluster.Home(r, s.j.World, l.nodes)
	}
	return w
}

// visit takes one global batch: the chunk of each of its samples in epoch
// order.
func (w *clusterWalker) visit(epoch int, chunks []int32) {
	if epoch != w.epoch {
		w.flush()
		w.epoch, w.inEpoch = epoch, 0
	}
	w.batch++
	defer func() { w.inEpoch++ }()
	// Assignment ranks the nodes of every batch: counted, it stops the
	// walk at its next count when the budget runs out.
	_ = w.m.walk(w.l.nodes)
	l := w.l
	added := 0
	for _, c := range chunks {
		if w.stamp[c] == w.batch {
			continue
		}
		w.stamp[c] = w.batch
		k := l.owner[c]
		start := w.nodeStamp[k] != w.batch
		w.nodeStamp[k] = w.batch
		w.traces[k] = append(w.traces[k], Access{Chunk: l.local[c], Epoch: int32(epoch), Start: start})
		added++
	}
	_ = w.m.trace(added)

	// Each rank's plain cut of the global batch (shuffle's), in rank
	// order: that of batch inEpoch of an epoch ending with it, which is
	// the batch's own whatever the epoch's length (an exclusion or an
	// edits make it other than the dataset's).
	var err error
	if w.share, err = w.cut.AppendShares(w.share[:0], w.inEpoch*w.cut.BatchSize*w.cut.World+len(chunks), w.inEpoch); err != nil {
		// The walk visits only the epoch's batches.
		panic(fmt.Sprintf("planner: batch %d of epoch %d: %v", w.inEpoch, epoch, err))
	}

	// Without locality: each rank takes its plain cut.
	w.plain.add(epoch, chunks)
	w.ids, w.owners = w.ids[:0], w.owners[:0]
	r, end := 0, w.share[0]
	for i, c := range chunks {
		for i >= end {
			r++
			end += w.share[r]
		}
		w.served[c]++
		if l.owner[c] != w.home[r] {
			w.crossCut[c]++
		}
		w.ids = append(w.ids, i)
		w.owners = append(w.owners, l.owner[c])
	}

	// With locality: the same shares, filled by Assign.
	a, err := cluster.Assign(w.ids, w.owners, w.share, l.nodes)
	if err != nil {
		// The shares sum to the batch and every owner is a node: Assign
		// has nothing to reject.
		panic(fmt.Sprintf("planner: cluster.Assign: %v", err))
	}
	w.balanced += a.Moved
	for r, positions := range a.Ranks {
		w.rankBuf = w.rankBuf[:0]
		for _, i := range positions {
			c := chunks[i]
			if l.owner[c] != w.home[r] {
				w.cross[c]++
			}
			w.rankBuf = append(w.rankBuf, c)
		}
		if len(w.rankBuf) > 0 {
			w.locality.addRankBatch(w.rankBuf)
		}
	}
}

// flush closes the current epoch, if any: it turns its per-chunk sample
// counts into bytes and clears them.
func (w *clusterWalker) flush() {
	if w.epoch < 0 {
		return
	}
	e := ClusterEpoch{
		Epoch:               w.epoch,
		DeliveredBytes:      w.bytesOf(w.served),
		CrossNodeBytes:      w.bytesOf(w.cross),
		CrossNodeBytesPlain: w.bytesOf(w.crossCut),
		BalancedSamples:     w.balanced,
	}
	e.BalancingBytes = e.CrossNodeBytes
	w.epochs = append(w.epochs, e)
	w.balanced = 0
	clear(w.served)
	clear(w.cross)
	clear(w.crossCut)
}

// bytesOf weighs per-chunk sample counts by their chunks' average sample
// size.
func (w *clusterWalker) bytesOf(counts []int32) int64 {
	var sum float64
	for c, k := range counts {
		if k > 0 {
			sum += float64(w.s.d.ChunkSizes[c]) * float64(k) / float64(w.s.d.Counts[c])
		}
	}
	return int64(math.Round(sum))
}
