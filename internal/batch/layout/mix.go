package layout

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/shuffle"
)

// Mixed is a mixture resolved against the datasets a gateway serves: its
// components' dataset versions and the order that interleaves them.
type Mixed struct {
	Mix api.Mix
	// Schedule is the schedule the mixture follows (mix_schedule=), nil
	// for a mixture of fixed weights; Mix is then its first phase.
	Schedule api.Schedule
	DS       []*catalog.Dataset // per component
	Order    *MixOrder
	key      string
	text     string // Mix.String()
	schedule string // Schedule.String(), "" for fixed weights
	ids      string // the components' index IDs, comma-separated
	// paces are, for a schedule, its components' (Stream.Pace), made
	// once on first use.
	paceOnce sync.Once
	paces    []*Pace
	// tokens marks a mixture of token datasets (Orders.Mixture of a Packer unit): its
	// positions are sequences, its streams' documents; comps are then
	// its components as packed passes, and unit makes the unit a batch
	// of it starts from.
	tokens bool
	comps  []tokenComponent
	unit   func() (Content, error)
	// held are, per component, the epoch order and window its last part
	// read (made on first use): a mixture of more sources than the
	// Orders' memo tables hold (maxMemoEpochs, maxMemoWindows) would
	// otherwise build every part's epoch and window anew.
	heldOnce sync.Once
	held     []atomic.Pointer[heldOrder]
}

// heldOrder is a component stream's epoch order, and a window of it.
type heldOrder struct {
	key epochKey
	e   *EpochOrder
	w   int
	ids []int // window w's samples; nil: none yet
}

// heldSlot is component i's held order.
func (m *Mixed) heldSlot(i int) *atomic.Pointer[heldOrder] {
	m.heldOnce.Do(func() { m.held = make([]atomic.Pointer[heldOrder], len(m.DS)) })
	return &m.held[i]
}

// mixtures makes, memoises and lays out the Orders' mixtures: of samples
// as stored (Mixed of samples), or of a unit whose items are packed
// sequences (tokens, vision: a Packer), whose components are passes
// of packed sequences. Safe for concurrent use.
type mixtures struct {
	base   *epochs
	units  *units
	asg    *assigner
	memo   *lru.Cache[[sha256.Size]byte, *Mixed] // by their keys' digests
	flight singleflight.Group                    // a mixture's construction, once however many ask
	spans  *mixSpans                             // spans of mixtures' epoch orders
}

func newMixtures(base *epochs, u *units, asg *assigner) *mixtures {
	return &mixtures{base: base, units: u, asg: asg, memo: newMixtureMemo(), spans: newMixSpans()}
}

// A Packer is a unit whose items are sequences packed from its
// datasets' documents (tokens, vision), and which mixes as passes of
// them: its components of a mixture over ds, and the content a batch of
// the mixture starts from. A mixture's epoch is then its components'
// packed sequences, not their samples.
type Packer interface {
	components(ds []*catalog.Dataset, job api.Job) ([]tokenComponent, func() (Content, error), error)
}

// Mixture returns the mixture of datasets ds (in mix's order) that a job
// reads: of its unit's packed sequences when its unit packs them (a
// token or vision job: a token mixture), else of samples as stored.
func (o *Orders) Mixture(mix api.Mix, ds []*catalog.Dataset, job api.Job) (*Mixed, error) {
	return o.MixtureOf(o.units.of(features.Requested(job)), mix, ds, job)
}

// MixtureOf is Mixture for a job whose unit is un, chosen already
// (UnitOf): a resolved request asks the table's features once.
func (o *Orders) MixtureOf(un Unit, mix api.Mix, ds []*catalog.Dataset, job api.Job) (*Mixed, error) {
	if p, ok := un.(Packer); ok {
		return o.mixes.packed(mix, ds, job, un, p)
	}
	return o.mixes.samples(mix, ds, job)
}

// lay lays out a mixture's batch b.
func (x *mixtures) lay(ctx context.Context, b *Batch) error {
	if b.Mix.comps != nil {
		return x.layPacked(ctx, b)
	}
	return x.layParts(ctx, b)
}

// heldEpoch is the base order of component i's stream s, from the
// component's held order when it is that epoch's.
func (x *mixtures) heldEpoch(m *Mixed, i int, s Stream, epoch uint64) (*heldOrder, error) {
	slot := m.heldSlot(i)
	k := epochKey{s.Order(), epoch}
	if h := slot.Load(); h != nil && h.key == k {
		return h, nil
	}
	e, err := x.base.epoch(s, epoch)
	if err != nil {
		return nil, err
	}
	h := &heldOrder{key: k, e: e, w: -1}
	slot.Store(h)
	return h, nil
}

// appendHeldRange is appendRange over a component's held order, whose
// last window read it keeps in its slot.
func (x *mixtures) appendHeldRange(dst []int, m *Mixed, i int, h *heldOrder, start, end int) ([]int, *heldOrder) {
	e := h.e
	for pos := start; pos < end; {
		w := e.WindowOf(pos)
		ws := e.WindowStart(w)
		var win []int
		if h.w == w && h.ids != nil {
			win = h.ids
		} else {
			win = x.base.window(h.key.Stream, h.key.epoch, e, w)
			h = &heldOrder{key: h.key, e: e, w: w, ids: win}
			m.heldSlot(i).Store(h)
		}
		take := min(end, ws+len(win)) - pos
		dst = append(dst, win[pos-ws:pos-ws+take]...)
		pos += take
	}
	return dst, h
}

// Text returns the mixture as its requests name it (Mix.String), made
// once.
func (m *Mixed) Text() string { return m.text }

// ScheduleText returns the schedule the mixture follows as
// api.Schedule.String writes it ("" for fixed weights), made once: every
// response names it (Brand-Mix-Schedule).
func (m *Mixed) ScheduleText() string { return m.schedule }

// Key names the mixture's order: its components' versions, weights,
// block and length.
func (m *Mixed) Key() string { return m.key }

// IndexIDs returns the components' index IDs, comma-separated.
func (m *Mixed) IndexIDs() string { return m.ids }

// Stream is component i's stream for a job: the order its passes read,
// in windows of the job's window split by weight.
func (m *Mixed) Stream(i int, job api.Job) Stream {
	return Stream{DS: m.DS[i], Seed: job.Seed, Window: m.Order.ComponentWindow(i, job.Window), Name: job.Name, Mix: m.key, Pace: m.pace(i)}
}

// pace is component i's Pace under the schedule, nil for fixed weights.
// A token component's stream is read by document positions while the
// schedule counts its packed sequences: its Pace is in documents,
// estimated from its documents per sequence (NewTokenPace).
func (m *Mixed) pace(i int) *Pace {
	s := m.Order.Schedule()
	if s == nil {
		return nil
	}
	m.paceOnce.Do(func() {
		m.paces = make([]*Pace, len(m.DS))
		for c := range m.paces {
			if m.tokens {
				m.paces[c] = NewTokenPace(s, c, m.Order.Size(c), m.DS[c].Index.NumSamples(), 0)
				continue
			}
			m.paces[c] = NewPace(s, c, m.Order.Size(c), 0)
		}
	})
	return m.paces[i]
}

// samples returns the mixture of datasets ds (in mix's order) that a
// job of samples reads, memoised by the mixture as the request writes it (asked on
// every request, it is found without parsing the weights); its key names
// it by the weights reduced to integers, so that 0.5,0.5 and 1,1 are one
// order. Requests that ask for the same new mixture at once share one
// construction (shuffle.NewMixture, within shuffle.MaxMixWork), and a
// mixture whose order is over a bound is refused with shuffle.ErrInvalid
// naming it.
func (x *mixtures) samples(mix api.Mix, ds []*catalog.Dataset, job api.Job) (*Mixed, error) {
	block := job.Block()
	// Found by the key's digest, hashed as it is written: every request
	// of a mixture of many sources names them all, and the key's text
	// each time was its garbage.
	kh := keyHash{h: sha256.New(), b: make([]byte, 0, 2*keyHashFlush)}
	for i, d := range ds {
		kh.b = append(append(append(append(kh.b, d.Name...), '@'), d.ID()...), ':')
		kh.b = append(append(kh.b, mix[i].Weight...), ',')
		kh.flush()
	}
	kh.b = strconv.AppendInt(append(kh.b, "|block="...), int64(block), 10)
	kh.b = strconv.AppendInt(append(kh.b, "|samples="...), int64(job.MixSamples), 10)
	if len(job.Schedule) > 0 {
		kh.b = append(kh.b, "|schedule="...)
		kh.schedule(job.Schedule)
	}
	memo := kh.sum()
	if m, ok := x.memo.Get(memo); ok {
		return m, nil
	}
	v, err, _ := x.flight.Do(string(memo[:]), func() (any, error) {
		if m, ok := x.memo.Get(memo); ok {
			return m, nil
		}
		m, err := x.newMixed(mix, job.Schedule, ds, block, job.MixSamples)
		if err != nil {
			return nil, err
		}
		x.memo.Add(memo, m)
		return m, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Mixed), nil
}

// newMixed builds the mixture of datasets ds with mixing blocks of block
// samples and epochs of samples (0: the datasets' summed): with sched,
// the schedule of those datasets (sched's first phase is mix).
func (x *mixtures) newMixed(mix api.Mix, sched api.Schedule, ds []*catalog.Dataset, block, samples int) (*Mixed, error) {
	var phases []shuffle.SchedulePhase
	var weights []uint64
	var err error
	if len(sched) > 0 {
		if phases, err = sched.Phases(); err != nil {
			return nil, err
		}
		weights = phases[0].Weights
	} else if weights, err = mix.IntWeights(); err != nil {
		return nil, err
	}
	var sb strings.Builder
	sizes := make([]int, len(ds))
	for i, d := range ds {
		sizes[i] = d.Index.NumSamples()
		fmt.Fprintf(&sb, "%s@%s:%d,", d.Name, d.ID(), weights[i])
		if sel := d.Selected(); sel != "" {
			fmt.Fprintf(&sb, "[%s],", sel)
		}
	}
	fmt.Fprintf(&sb, "|block=%d|samples=%d", block, samples)
	var mo *shuffle.Mixture
	var sc *shuffle.Schedule
	if phases != nil {
		// The schedule by its integer weights, so that 0.5,0.5 and 1,1
		// are one order, as for a mixture.
		for _, p := range phases {
			fmt.Fprintf(&sb, "|%d~%d:%v", p.Step, p.End, p.Weights)
		}
		passes := make([]shuffle.Passes, len(sizes))
		for i, n := range sizes {
			passes[i] = shuffle.EqualPasses(n)
		}
		if sc, err = shuffle.NewSchedule(phases, passes, block, samples); err != nil {
			return nil, err
		}
		if mo, err = sc.Epoch(0); err != nil {
			return nil, err
		}
	} else if mo, err = shuffle.NewMixture(weights, sizes, block, samples); err != nil {
		return nil, err
	}
	if err := checkSpan(mo); err != nil {
		return nil, err
	}
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID()
	}
	key := sb.String()
	return &Mixed{Mix: mix, Schedule: sched, DS: ds, Order: newMixOrder(mo, sc, key, x.spans), key: key,
		text: mix.String(), schedule: sched.String(), ids: strings.Join(ids, ",")}, nil
}

func newMixtureMemo() *lru.Cache[[sha256.Size]byte, *Mixed] {
	c, _ := lru.New[[sha256.Size]byte, *Mixed](maxMemoMixtures)
	return c
}

// keyHash hashes a memo key as it is written in b, a piece at a time.
type keyHash struct {
	h hash.Hash
	b []byte
}

// keyHashFlush is how much of a key keyHash buffers before hashing it.
const keyHashFlush = 256

func (k *keyHash) flush() {
	if len(k.b) >= keyHashFlush {
		k.h.Write(k.b)
		k.b = k.b[:0]
	}
}

func (k *keyHash) sum() (out [sha256.Size]byte) {
	k.h.Write(k.b)
	k.h.Sum(out[:0])
	return out
}

// schedule writes s as api.Schedule.String does.
func (k *keyHash) schedule(s api.Schedule) {
	for n, p := range s {
		if n > 0 {
			k.b = append(k.b, ';')
		}
		k.b = strconv.AppendUint(k.b, p.Step, 10)
		if p.End > p.Step {
			k.b = strconv.AppendUint(append(k.b, '~'), p.End, 10)
		}
		k.b = append(k.b, ':')
		for i, c := range p.Mix {
			if i > 0 {
				k.b = append(k.b, ',')
			}
			k.b = append(append(append(k.b, c.Dataset...), ':'), c.Weight...)
			k.flush()
		}
	}
}

// maxMemoMixtures bounds the memoised mixtures: each holds its block
// counts' checkpoints, O(blocks of an epoch / 64 × components), at most
// 512 KiB within shuffle.MaxMixWork.
const maxMemoMixtures = 16

// maxPass is the last pass of a component a mixture reads: passes are
// the component's epochs, which statistics and the planner keep in 31
// bits (query.MaxEpoch).
const maxPass = 1<<31 - 1

// layParts lays out a mixture of samples' batch's parts: its draws — the rank's slice
// of the mixture's epoch positions, or on a cluster with locality its
// assigned share of the global batch (docs/shuffle.md §11) — grouped by
// component pass, each pass's sample IDs read from its order.
func (x *mixtures) layParts(ctx context.Context, b *Batch) error {
	m, job := b.Mix, b.Job
	draws, _, bal, err := x.draws(ctx, b)
	if err != nil {
		return err
	}
	b.Balanced = bal
	b.Take = make([]Take, len(draws))
	global := job.BatchSize * job.World
	sum := m.weightSum()
	// The parts' positions in their passes, in served order: each draw's
	// part first, then in one array grouped by part.
	partOf := make([]int32, len(draws))
	var n []int // per part: its draws
	for i, d := range draws {
		if d.Pass > maxPass {
			return fmt.Errorf("%w: epoch %d of the mixture reads pass %d of %s, past the last epoch number (%d)",
				ErrOutOfRange, b.Epoch, d.Pass, m.DS[d.Component].Name, maxPass)
		}
		// A batch has a part or two per component: a scan finds it.
		p := 0
		for p < len(b.Parts) && (b.Parts[p].Comp != d.Component || b.Parts[p].Epoch != d.Pass) {
			p++
		}
		if p == len(b.Parts) {
			if b.Parts == nil {
				b.Parts = make([]Part, 0, min(len(draws), 2*len(m.DS)))
			}
			b.Parts = append(b.Parts, Part{Comp: d.Component, Epoch: d.Pass, Stream: m.Stream(d.Component, job),
				First: d.Index, End: d.Index + 1, Share: m.shareOf(d.Component, global, sum), EpochLen: m.DS[d.Component].Index.NumSamples()})
			n = append(n, 0)
		}
		part := &b.Parts[p]
		part.First, part.End = min(part.First, d.Index), max(part.End, d.Index+1)
		b.Take[i] = Take{Part: p, At: n[p]}
		n[p]++
		partOf[i] = int32(p)
	}
	at := make([]int, len(b.Parts)+1) // part p's positions are xs[at[p]:at[p+1]]
	for p := range b.Parts {
		at[p+1] = at[p] + n[p]
	}
	xs := make([]int, len(draws))
	fill := slices.Clone(at[:len(b.Parts)])
	for i, d := range draws {
		p := partOf[i]
		xs[fill[p]] = d.Index
		fill[p]++
	}
	for p := range b.Parts {
		part := &b.Parts[p]
		h, err := x.heldEpoch(m, part.Comp, part.Stream, part.Epoch)
		if err != nil {
			return err
		}
		xs := xs[at[p]:at[p+1]]
		ids := make([]int, 0, len(xs))
		for i := 0; i < len(xs); {
			// Runs of consecutive positions (a plain cut is one run)
			// are read as ranges.
			j := i + 1
			for j < len(xs) && xs[j] == xs[j-1]+1 {
				j++
			}
			ids, h = x.appendHeldRange(ids, m, part.Comp, h, xs[i], xs[j-1]+1)
			i = j
		}
		if part.Samples, err = NewSamples(ctx, part.Stream.DS, ids); err != nil {
			return err
		}
	}
	return nil
}

// share is component i's share of a global batch of global samples, as
// the schedule's clock counts a stream's progress per batch.
func (m *Mixed) share(i, global int) int { return m.shareOf(i, global, m.weightSum()) }

// shareOf is share, given the weights' sum.
func (m *Mixed) shareOf(i, global int, sum uint64) int {
	return max(1, int(uint64(global)*m.Order.Weights()[i]/sum))
}

// weightSum is the sum of the mixture's weights.
func (m *Mixed) weightSum() uint64 {
	var sum uint64
	for _, a := range m.Order.Weights() {
		sum += a
	}
	return sum
}

// MixETag names a mixture batch's bytes: every component's index and
// weight, the block and length, every parameter that selects the batch,
// and the membership version it was assigned under ("" for a plain cut;
// see batchETag).
func MixETag(m *Mixed, job api.Job, epoch, b uint64, members string) string {
	s := fmt.Appendf(nil, "brand-mix-batch-v1|%s|%d|%d|%d|%d|%d|%t|%d|%d|offset=%d",
		m.key, job.Seed, job.Window, job.BatchSize, job.World, job.Rank, job.DropLast, epoch, b, job.Offset)
	if members != "" {
		s = fmt.Appendf(s, "|members=%s", members)
	}
	s = appendTransform(s, job)
	s = appendBalance(s, job)
	h := sha256.Sum256(s)
	return `"` + hex.EncodeToString(h[:16]) + `"`
}

// FormatComponents writes each sample's component number,
// comma-separated (the Brand-Mix-Components header).
func FormatComponents(comps []int) string {
	b := make([]byte, 0, 3*len(comps))
	for i, c := range comps {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, int64(c), 10)
	}
	return string(b)
}
