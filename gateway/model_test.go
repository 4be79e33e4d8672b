package gateway_test

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/job/chain"
	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/internal/testsupport/jobmodel"
)

// TestModel holds the gateway to a reference model of a job's epochs
// (internal/testsupport/jobmodel, written from docs/shuffle.md alone)
// over random jobs of every combination the table of features allows for
// the datasets at hand: a job of samples of tar chunks or of a dataset
// served in place, named, with a random chain of exclusions and appends
// each tried from a step ahead of what was served (made, and the model
// takes it) and behind it (refused, naming the model's first editable
// step); a mixture of two datasets; a token job and a vision job of
// image-text samples (the model is their cut: the sequences' packing is
// not modelled); a bucket job of JPEGs of random sizes (the model is
// jobmodel.BucketJob: every step's bucket and every rank's samples,
// resumed at another world size with resume=, and /plan's buckets);
// each at a random seed,
// window, batch size, world of 1 to 6, drop_last, locality and balance,
// on one gateway or a cluster of three, resumed at another world size
// from any position, and read again from a gateway started over the same
// stores. Every batch is the model's (the plain cut's slices exactly, a
// balanced batch §13.3's assignment, a batch by locality the global
// batch's samples, each rank its share), every epoch serves each sample
// as often as the rules say, every batch read before an edit is read
// again byte for byte under its ETag, every round's /plan plans the
// epochs it served (each epoch's samples and batches; 501, the table's
// reason, for a job the table does not plan), and every combination the
// rules refuse is refused with the table's message on /epoch/N,
// /epoch/N/batch/M, /plan and the edit endpoints.
//
// The rounds run in CI are seeds 0 to modelRounds−1 (fewer under the race
// detector). BRAND_MODEL_SOAK=N runs N rounds from a random first seed
// (BRAND_MODEL_BASE sets it); BRAND_MODEL_SEED=S runs round S alone,
// which replays a failing round: each is the subtest named by its seed,
// and logs how to replay it.
func TestModel(t *testing.T) {
	seeds := make([]uint64, modelRounds())
	for i := range seeds {
		seeds[i] = uint64(i)
	}
	// Rounds a soak once failed, kept: mixtures balanced by bytes whose
	// small component put two draws of one sample in a rank's share,
	// which the server separates (docs/shuffle.md §7.2) and the model
	// did not.
	// Each is replayed as it was drawn, among the first ten kinds of
	// round (keptKinds).
	seeds = append(seeds, 232, 3242, 3502)
	if s := os.Getenv("BRAND_MODEL_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("BRAND_MODEL_SEED=%q: %v", s, err)
		}
		seeds = []uint64{n}
	} else if s := os.Getenv("BRAND_MODEL_SOAK"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("BRAND_MODEL_SOAK=%q: %v", s, err)
		}
		base := uint64(time.Now().UnixNano())
		if b := os.Getenv("BRAND_MODEL_BASE"); b != "" {
			if base, err = strconv.ParseUint(b, 10, 64); err != nil {
				t.Fatalf("BRAND_MODEL_BASE=%q: %v", b, err)
			}
		}
		t.Logf("soak: %d rounds from seed %d (BRAND_MODEL_BASE=%d replays them)", n, base, base)
		seeds = seeds[:0]
		for i := range n {
			seeds = append(seeds, base+uint64(i))
		}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			kind := modelKinds[kindOf(seed)]
			t.Logf("round %d: %s (replay: BRAND_MODEL_SEED=%d go test ./gateway -run TestModel)", seed, kind.name, seed)
			kind.run(t, seed)
		})
	}
}

// keptRounds are the rounds a soak once failed, kept (TestModel), and
// the number of kinds of round there were when they failed: a kind added
// since does not change which kind each replays.
var keptRounds = map[uint64]uint64{232: 10, 3242: 10, 3502: 10}

// kindOf is the kind of round seed plays: seed modulo the kinds, or for
// a kept round modulo the kinds there were.
func kindOf(seed uint64) uint64 {
	if n, ok := keptRounds[seed]; ok && os.Getenv("BRAND_MODEL_SOAK") == "" {
		return seed % n
	}
	return seed % uint64(len(modelKinds))
}

// modelRounds is the rounds a run of the suite plays: each kind of round
// four times, twice under the race detector, which runs a round about
// three times slower. On the 2-core machine the 36 rounds of the first
// nine kinds took 46 s, 56 s loaded by two other busy processes; the 18
// under the race detector 65–71 s, 114 s so loaded. A vision round (the
// tenth kind) took 1–4 s alone. Any pairStride rounds of consecutive
// seeds ask every refused pair.
func modelRounds() int {
	if raceEnabled {
		return 2 * len(modelKinds)
	}
	return 4 * len(modelKinds)
}

// modelKinds are the kinds of round, seed mod their number choosing one:
// a job of samples (over tar chunks, or a dataset served in place that
// takes appends), a mixture, a token job; on one gateway or a cluster.
var modelKinds = []struct {
	name string
	run  func(t *testing.T, seed uint64)
}{
	{"samples of tar chunks, one gateway", func(t *testing.T, s uint64) { samplesRound(t, s, mTar, 1) }},
	{"samples in place, one gateway", func(t *testing.T, s uint64) { samplesRound(t, s, mLines, 1) }},
	{"a mixture, one gateway", func(t *testing.T, s uint64) { mixtureRound(t, s, 1) }},
	{"samples of tar chunks, a cluster of 3", func(t *testing.T, s uint64) { samplesRound(t, s, mTar, 3) }},
	{"a token job balanced by cost, one gateway", func(t *testing.T, s uint64) { tokenRound(t, s, 1, true) }},
	{"samples in place, a cluster of 3", func(t *testing.T, s uint64) { samplesRound(t, s, mLines, 3) }},
	{"a mixture, a cluster of 3", func(t *testing.T, s uint64) { mixtureRound(t, s, 3) }},
	{"samples in place, one gateway, again", func(t *testing.T, s uint64) { samplesRound(t, s, mLines, 1) }},
	{"a token job, a cluster of 3", func(t *testing.T, s uint64) { tokenRound(t, s, 3, false) }},
	{"a vision job, one gateway or a cluster of 3", visionRound},
	{"a bucket job, one gateway or a cluster of 3", bucketRound},
	{"a bucketed mixture, one gateway or a cluster of 3", bucketMixRound},
}

// roundRand is a round's random source.
func roundRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6d6f64656c)) }

// newMJob is a job of samples over w's dataset ds (or, with comps, a
// mixture of them) served by nodes, its parameters drawn from r: seed,
// window 1 to 4, world 1 to 6, batch size up to 4 (a global batch of at
// most 24), drop_last, locality, balance=bytes once in three where
// the table allows it (no dataset served in place), and a pipeline once
// in two over the dataset served in place.
func newMJob(t *testing.T, r *rand.Rand, w *mWorld, nodes *mNodes, ds string, comps []string) *mJob {
	j := &mJob{t: t, r: r, w: w, nodes: nodes, ds: ds, comps: comps, q: url.Values{}, cache: map[uint64][]string{}}
	world := 1 + r.IntN(6)
	j.cut = jobmodel.Cut{B: 1 + r.IntN(4), World: world, DropLast: r.IntN(3) == 0}
	seed, window := r.Uint64()>>1, 1+r.IntN(4)
	j.q.Set("seed", strconv.FormatUint(seed, 10))
	j.q.Set("window", strconv.Itoa(window))
	locality := r.IntN(3) > 0
	if !locality {
		j.q.Set("locality", "false")
	}
	inPlace := ds == mLines
	for _, c := range comps {
		inPlace = inPlace || c == mLines
	}
	j.bytes = !inPlace && r.IntN(3) == 0
	if j.bytes {
		j.q.Set("balance", "bytes")
	}
	j.local = len(nodes.urls) > 1 && locality && world > 1 && !j.bytes
	if ds != "" {
		j.q.Set("dataset", ds)
		j.q.Set("job", fmt.Sprintf("run%d", r.IntN(1000)))
		if ds == mLines {
			j.q.Set("index", w.first(ds).id)
			// Once in two a pipeline: each rank's next batch is then made
			// ahead once its batch is served (its samples' text members
			// pass through it as stored), and every batch, made ahead or
			// not, is held to the model's epoch counts.
			if r.IntN(2) == 0 {
				j.q.Set("transform", "imagenet-eval")
			}
		}
		j.model = &jobmodel.Job{Counts: w.first(ds).counts, Seed: seed, Window: window}
		return j
	}
	m := &jobmodel.Mixture{Seed: seed, Window: window, Block: j.cut.G()}
	var mix string
	for i, c := range comps {
		wt := 1 + r.IntN(4)
		m.Counts = append(m.Counts, w.first(c).counts)
		m.Weights = append(m.Weights, uint64(wt))
		if i > 0 {
			mix += ","
		}
		mix += fmt.Sprintf("%s:%d", c, wt)
	}
	j.q.Set("mix", mix)
	if r.IntN(2) == 0 {
		m.Block = 1 + r.IntN(2*j.cut.G())
		j.q.Set("mix_block", strconv.Itoa(m.Block))
	}
	if r.IntN(2) == 0 {
		n := 0
		for _, c := range m.Counts {
			n += sumOf(c)
		}
		m.Samples = 1 + r.IntN(2*n)
		j.q.Set("mix_samples", strconv.Itoa(m.Samples))
	}
	if r.IntN(2) == 0 {
		j.q.Set("job", fmt.Sprintf("mix%d", r.IntN(1000)))
	}
	j.mix = m
	return j
}

// anyNode is a pick of a random node for each rank; onlyNode one node's.
func (j *mJob) anyNode(int) int    { return j.r.IntN(len(j.nodes.urls)) }
func onlyNode(k int) func(int) int { return func(int) int { return k } }
func (j *mJob) notNode(k int) func(int) int {
	return func(int) int {
		if len(j.nodes.urls) == 1 {
			return 0
		}
		return (k + 1 + j.r.IntN(len(j.nodes.urls)-1)) % len(j.nodes.urls)
	}
}

// samplesRound is a round of a named job of samples over ds served by a
// gateway (nodes 1) or a cluster (nodes 3): phases of batches served and
// edits tried, ahead of what was served and behind it; then every epoch
// the edits reach read whole and held to the model and to the rules'
// counts, every batch read before read again, the job resumed at another
// world size from a random position, a gateway started over the same
// stores serving the same, and the table's refusals of the job's stored
// edits under other features.
func samplesRound(t *testing.T, seed uint64, ds string, nodes int) {
	r := roundRand(seed)
	w := newMWorld(t, r)
	ns := startMNodes(t, w, nodes)
	j := newMJob(t, r, w, ns, ds, nil)
	t.Logf("job %s, %+v, assignment %s", j.q.Encode(), j.cut, j.assignment())
	kinds := []string{jobmodel.Exclude}
	if ds == mLines {
		kinds = append(kinds, jobmodel.Append)
	}
	// On a cluster the edits are posted to one node, taker, that serves
	// none of the job: every refusal of an edit behind comes from asking
	// the other members what they served.
	taker := 0
	phases := 1 + r.IntN(3)
	if nodes > 1 {
		taker, phases = r.IntN(nodes), 1
	}
	var e uint64
	m := 0
	for ph := range phases {
		for range 1 + r.IntN(j.cut.Batches(len(j.order(0)))+2) {
			if n := len(j.order(e)); m >= j.cut.Batches(n) {
				e, m = e+1, 0
				if e > 2 {
					break
				}
				continue
			}
			j.step(e, m, j.cut, j.notNode(taker))
			m++
		}
		attempts := 1 + r.IntN(3)
		if nodes > 1 {
			attempts = 2 + r.IntN(2)
		}
		for a := range attempts {
			kind := kinds[r.IntN(len(kinds))]
			if n := len(j.model.Chain); n > 0 && len(kinds) > 1 && r.IntN(3) > 0 {
				// The other kind than the last edit's: a chain of both.
				kind = kinds[1-slices.Index(kinds, j.model.Chain[n-1].Kind)]
			}
			// On a cluster the first attempt is behind, asking the
			// members; the round's last is ahead if none was made yet.
			ahead := r.IntN(3) > 0 && !(nodes > 1 && a == 0) || ph == phases-1 && a == attempts-1 && len(j.model.Chain) == 0
			j.edit(taker, kind, ahead)
		}
		if ph == phases-1 && len(kinds) > 1 {
			// A chain of both kinds, whatever the draws.
			for _, kind := range kinds {
				if !slices.ContainsFunc(j.model.Chain, func(x jobmodel.Edit) bool { return x.Kind == kind }) {
					j.edit(taker, kind, true)
				}
			}
		}
		// A batch after a phase's edits in the epoch being read.
		if n := len(j.order(e)); m < j.cut.Batches(n) && e <= 2 {
			j.step(e, m, j.cut, onlyNode(taker))
			m++
		}
	}
	t.Logf("chain: %d edits", len(j.model.Chain))
	if j.asked {
		// The members an edit asked hold the job's later positions for
		// editproto.Hold, and find the edit in the store within Refresh.
		time.Sleep(editproto.Hold + chain.Refresh)
	}
	last := uint64(1)
	for _, x := range j.model.Chain {
		last = max(last, x.Epoch+1)
	}
	phased := len(j.reads)
	for e := range last + 1 {
		j.epochInfo(j.anyNode(0), e, j.cut)
		keys := j.epoch(e, 0, j.cut, j.anyNode)
		if !j.cut.DropLast {
			j.countsAsRuled(e, keys)
		}
	}
	j.planAsServed(j.cut, 0, j.lengths(0, int(last)+1), j.resolved([]string{j.ds}))
	j.rereadFirst(phased)
	j.resume(last)
	j.restarted(last)
	j.refuseStored()
	j.refusePairs(seed)
	j.refuseRandom(6)
}

// rereadFirst reads the first n batches recorded again, each from a
// random node, and holds them to what was read: every batch served
// before an edit keeps its bytes and ETag.
func (j *mJob) rereadFirst(n int) {
	j.t.Helper()
	all := j.reads
	j.reads = all[:n]
	j.reread(-1, j.nodes.urls, len(j.nodes.urls) > 1)
	j.reads = all
}

// resume reads an epoch up to last from a random position on, at another
// world size and batch size (a mixture keeps its block), and holds every
// batch to the model.
func (j *mJob) resume(last uint64) {
	j.t.Helper()
	e := uint64(j.r.IntN(int(last) + 1))
	n := len(j.order(e))
	cut := jobmodel.Cut{B: 1 + j.r.IntN(4), World: 1 + j.r.IntN(6), Offset: j.r.IntN(n + 1), DropLast: j.r.IntN(2) == 0}
	saved := j.q
	if j.mix != nil {
		j.q = url.Values{}
		for k, v := range saved {
			j.q[k] = v
		}
		j.q.Set("mix_block", strconv.Itoa(j.mix.Block))
	}
	local := j.local
	j.local = len(j.nodes.urls) > 1 && j.q.Get("locality") != "false" && cut.World > 1 && !j.bytes
	j.t.Logf("resumed: epoch %d, %+v", e, cut)
	j.epochInfo(j.anyNode(0), e, cut)
	j.epoch(e, 0, cut, j.anyNode)
	j.q, j.local = saved, local
}

// restarted starts a gateway over the round's stores, which finds the
// job's chain there, and holds it to the model (one epoch whole) and to
// 48 batches read before, drawn at random (a batch laid out by locality
// on a cluster is laid out otherwise by one gateway: the model holds it
// instead).
func (j *mJob) restarted(last uint64) {
	j.t.Helper()
	fresh := startMNodes(j.t, j.w, 1)
	all := j.reads
	j.reads = nil
	for _, i := range j.r.Perm(len(all))[:min(48, len(all))] {
		j.reads = append(j.reads, all[i])
	}
	j.reread(0, fresh.urls, false)
	j.reads = all
	k := *j
	k.nodes, k.local, k.reads, k.served = fresh, false, nil, false
	e := uint64(j.r.IntN(int(last) + 1))
	k.epoch(e, 0, k.cut, onlyNode(0))
}

// mixtureRound is a round of a mixture of two datasets: three epochs
// whole, a resume at another world size, a restarted gateway, and the
// table's refusals.
func mixtureRound(t *testing.T, seed uint64, nodes int) {
	r := roundRand(seed)
	w := newMWorld(t, r)
	ns := startMNodes(t, w, nodes)
	pairs := [][]string{{mTar, mTar2}, {mTar2, mTar}, {mTar, mLines}, {mLines, mTar2}}
	j := newMJob(t, r, w, ns, "", pairs[r.IntN(len(pairs))])
	t.Logf("job %s, %+v, assignment %s", j.q.Encode(), j.cut, j.assignment())
	for e := range uint64(3) {
		j.epochInfo(j.anyNode(0), e, j.cut)
		j.epoch(e, 0, j.cut, j.anyNode)
	}
	j.planAsServed(j.cut, 0, j.lengths(0, 3), j.resolved(j.comps))
	j.rereadFirst(len(j.reads))
	j.resume(2)
	j.restarted(2)
	j.refusePairs(seed)
	j.refuseRandom(6)
}
