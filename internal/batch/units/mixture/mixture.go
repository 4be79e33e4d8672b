// Package mixture is the unit of a job over several datasets (mix=,
// mix_schedule=, a stored schedule): a unit made of the unit of its
// items (a Mixable kind: samples as stored, token sequences, image-text
// sequences), whose epoch interleaves passes of those items over each
// component dataset by weight (shuffle.Mixture, shuffle.Schedule), and
// whose batch reads, for each draw, the documents of the component
// pass's item it names. It is a layout.Composite: a source of it reads
// its components' versions, and its batches' parts are their passes.
//
// # One path for every kind
//
// A mixture asks its kind only for its components (Mixable) — how a
// stream's passes are cut into items, which documents an item reads, what
// it costs under balance= and how it goes into the batch's content — and
// lays out every mixture's batch with the one function lay: a mixture of
// samples is a mixture of items of one document each.
//
// # Keys
//
// A mixture of components whose passes are their datasets' samples,
// whatever the seed (Component.Len >= 0), is one order for every seed
// and window, named by its weights reduced to integers (0.5,0.5 and 1,1
// are one order); one whose passes are packed (a token mixture) is one
// per seed, window and packing. Either key names its batches' ETags
// (ETag), as it always has.
package mixture

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"net/http"
	"strconv"
	"strings"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"golang.org/x/sync/singleflight"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/jobstream"
	"github.com/brandgw/brand/shuffle"
)

// A Mixable unit can be the kind of a mixture's items: a mixture of its
// datasets interleaves passes of its items over each.
type Mixable interface {
	layout.Unit
	// Components returns each of ds (viewed by the unit: View) as a
	// component of a mixture of job, and the content a batch of the
	// mixture starts from (nil: the batch serves the samples it reads).
	// Components a mixture of the kind cannot hold together (two token
	// datasets of other dtypes) are refused, naming both.
	Components(ds []*catalog.Dataset, job api.Job) ([]Component, func() (layout.Content, error), error)
}

// A Stepped unit's items are its steps' ranks' batches, a step's world
// items consecutive (a bucket job's): a mixture of it mixes whole steps,
// each of one component, by the mixture's rule over blocks of one step
// (docs/shuffle.md §11 with K = 1), every rank taking its item of the
// component's step. Its components' passes are counted in steps, and the
// mixture is of the job's world.
type Stepped interface {
	Stepped() bool
	// Resumed is the job's global steps taken before this run, at other
	// worlds (a resume point's): the run serves the steps after them.
	Resumed(job api.Job) (int, error)
}

// An EpochSized component fixes a stepped mixture's epoch length: its
// pass 0's steps at the job's first world, whatever world a run resumes
// at, so that a global step is in the same epoch at every world.
type EpochSized interface {
	EpochSteps(s layout.Stream) (int, error)
}

// stepped reports whether un's mixtures mix whole steps.
func stepped(un layout.Unit) bool {
	s, ok := un.(Stepped)
	return ok && s.Stepped()
}

// A Streamed component reads its passes over a stream of its own kind
// (a video source's over its clip space): Stream is the stream the
// mixture names it, made its own.
type Streamed interface {
	Stream(s layout.Stream) layout.Stream
}

// An Extents pass's items read documents from across its epoch's order
// (a bucket step's images): Extent is the positions item i's documents
// span, what the use table follows the part by, where DocPosition is a
// count of progress.
type Extents interface {
	Extent(i int) (first, end int)
}

// A Described component adds what its kind says of a pass to the
// component's part of /epoch/N (a bucketed source's buckets).
type Described interface {
	Describe(ci *api.MixComponentInfo, s layout.Stream, pass uint64) error
}

// A Finisher content is made the batch's once its items are added (a
// bucketed mixture's: the one step's images or clips, and the pipeline
// of its bucket).
type Finisher interface {
	Finish(b *layout.Batch) error
}

// A Component is one dataset of a mixture as its kind passes over it.
type Component interface {
	// Pass is pass p of the component over stream s (the component's
	// stream, Mixed.Stream): computed once per stream and pass, and
	// kept.
	Pass(s layout.Stream, p uint64) (Pass, error)
	// Len is every pass's length when it is the dataset's samples
	// whatever the seed and window (samples as stored), or -1 when each
	// pass has a length of its own (a packing's sequences).
	Len() int
}

// A Pass is one pass of a component: its items, in order.
type Pass interface {
	// Len is the pass's items: its length in the mixture.
	Len() int
	// Docs is the documents (samples) of the pass's stream's epoch
	// order, and DocPosition where item i is among them: what the use
	// table follows the stream by. DocPosition(Len()) is Docs().
	Docs() int
	DocPosition(i int) int
	// AppendDocs appends the documents item i reads to dst, in its
	// order.
	AppendDocs(dst []int, i int) []int
	// AddTo adds item i to a batch's content c (nil for samples as
	// read) as component comp's at epoch position pos, its documents
	// read at positions at (in Batch.Take, one per document).
	AddTo(c layout.Content, i, comp, pos int, at []int) error
	// Costs weighs items of the pass under balance= kind.
	Costs(ctx context.Context, kind string, items []int) ([]uint64, error)
}

// Mixtures makes, memoises and composes the Orders' mixtures (the
// Orders' layout.Composer). Safe for concurrent use.
type Mixtures struct {
	base   layout.Base
	memo   *lru.Cache[[sha256.Size]byte, *Mixed] // by their keys' digests
	flight singleflight.Group                    // a mixture's construction, once however many ask
	spans  *mixSpans                             // spans of mixtures' epoch orders
}

// New returns the mixtures over the orders' base b.
func New(b layout.Base) *Mixtures {
	c, _ := lru.New[[sha256.Size]byte, *Mixed](maxMemoMixtures)
	return &Mixtures{base: b, memo: c, spans: newMixSpans()}
}

// maxMemoMixtures bounds the memoised mixtures: each holds its block
// counts' checkpoints, O(blocks of an epoch / 64 × components), at most
// 512 KiB within shuffle.MaxMixWork.
const maxMemoMixtures = 16

// maxPass is the last pass of a component a mixture reads: passes are
// the component's epochs, which statistics and the planner keep in 31
// bits (query.MaxEpoch).
const maxPass = 1<<31 - 1

// ErrNotMixable refuses a mixture of a kind that does not mix (400).
var ErrNotMixable = fmt.Errorf("%w: this kind of batch does not mix", shuffle.ErrInvalid)

// Compose returns the mixture of datasets ds (in job.Mix's order, each
// viewed by un) that a job of unit un reads: memoised by the mixture as
// the request writes it (asked on every request, it is found without
// parsing the weights). Requests that ask for the same new mixture at
// once share one construction (within shuffle.MaxMixWork), and a
// mixture whose order is over a bound is refused with shuffle.ErrInvalid
// naming it.
func (x *Mixtures) Compose(un layout.Unit, ds []*catalog.Dataset, job api.Job) (layout.Composite, error) {
	mx, ok := un.(Mixable)
	if !ok {
		return nil, fmt.Errorf("%w: a job of %s", ErrNotMixable, un.Feature())
	}
	comps, content, err := mx.Components(ds, job)
	if err != nil {
		return nil, err
	}
	fixed := true
	for _, c := range comps {
		fixed = fixed && c.Len() >= 0
	}
	var memo [sha256.Size]byte
	var key string
	if fixed {
		memo = fixedMemo(ds, job)
	} else {
		key = packedKey(un, ds, job)
		memo = sha256.Sum256([]byte(key))
	}
	if m, ok := x.memo.Get(memo); ok && m.inner == un {
		return m, nil
	}
	v, err, _ := x.flight.Do(string(memo[:]), func() (any, error) {
		if m, ok := x.memo.Get(memo); ok && m.inner == un {
			return m, nil
		}
		m, err := x.newMixed(job, ds, comps, fixed, key, stepped(un))
		if err != nil {
			return nil, err
		}
		m.inner, m.content = un, content
		x.memo.Add(memo, m)
		return m, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*Mixed), nil
}

// fixedMemo is the memo key of a mixture of fixed passes, hashed as it
// is written: every request of a mixture of many sources names them all,
// and the key's text each time was its garbage.
func fixedMemo(ds []*catalog.Dataset, job api.Job) [sha256.Size]byte {
	kh := keyHash{h: sha256.New(), b: make([]byte, 0, 2*keyHashFlush)}
	for i, d := range ds {
		kh.b = append(append(append(append(kh.b, d.Name...), '@'), d.ID()...), ':')
		kh.b = append(append(kh.b, job.Mix[i].Weight...), ',')
		kh.flush()
	}
	kh.b = strconv.AppendInt(append(kh.b, "|block="...), int64(job.Block()), 10)
	kh.b = strconv.AppendInt(append(kh.b, "|samples="...), int64(job.MixSamples), 10)
	if len(job.Schedule) > 0 {
		kh.b = append(kh.b, "|schedule="...)
		kh.schedule(job.Schedule)
	}
	return kh.sum()
}

// packedKey is the key of a mixture of packed passes: its components'
// versions and weights as written, its block and length, and the seed,
// window and unit's parameters its passes are packed under.
func packedKey(un layout.Unit, ds []*catalog.Dataset, job api.Job) string {
	var kb strings.Builder
	for i, d := range ds {
		fmt.Fprintf(&kb, "%s@%s:%s,", d.Name, d.ID(), job.Mix[i].Weight)
	}
	fmt.Fprintf(&kb, "|block=%d|samples=%d|seed=%d|window=%d%s", job.Block(), job.MixSamples, job.Seed, job.Window, un.AppendKey(nil, job))
	if stepped(un) {
		// Its components' steps are of the job's world.
		fmt.Fprintf(&kb, "|world=%d", max(job.World, 1))
	}
	if len(job.Schedule) > 0 {
		kb.WriteString("|schedule=" + job.Schedule.String())
	}
	return kb.String()
}

// newMixed builds the mixture of components comps of datasets ds a job
// reads (with its schedule, if any: its first phase is job.Mix): of
// fixed passes, keyed by its integer weights, or of packed ones, keyed by
// key.
func (x *Mixtures) newMixed(job api.Job, ds []*catalog.Dataset, comps []Component, fixed bool, key string, step bool) (*Mixed, error) {
	block, group := job.Block(), 1
	if step {
		// Blocks of one step, each step's world items from one
		// component.
		if job.MixBlock > 0 {
			return nil, fmt.Errorf("%w: mix_block= with buckets=: a bucketed mixture mixes whole steps, one source a step, and has no block (a client that is given a batch_size pins one: give a bucket job none)", shuffle.ErrInvalid)
		}
		block, group = 1, max(job.World, 1)
	}
	var phases []shuffle.SchedulePhase
	var weights []uint64
	var err error
	if len(job.Schedule) > 0 {
		if phases, err = job.Schedule.Phases(); err != nil {
			return nil, err
		}
		weights = phases[0].Weights
	} else if weights, err = job.Mix.IntWeights(); err != nil {
		return nil, err
	}
	passes := make([]shuffle.Passes, len(ds))
	epochLen := step && job.MixSamples == 0
	if fixed {
		var sb strings.Builder
		for i, d := range ds {
			passes[i] = shuffle.EqualPasses(comps[i].Len())
			fmt.Fprintf(&sb, "%s@%s:%d,", d.Name, d.ID(), weights[i])
			if sel := d.Selected(); sel != "" {
				fmt.Fprintf(&sb, "[%s],", sel)
			}
		}
		fmt.Fprintf(&sb, "|block=%d|samples=%d", block, job.MixSamples)
		// A schedule by its integer weights, so that 0.5,0.5 and 1,1
		// are one order, as for a mixture.
		for _, p := range phases {
			fmt.Fprintf(&sb, "|%d~%d:%v", p.Step, p.End, p.Weights)
		}
		key = sb.String()
	} else {
		var sum uint64
		for _, w := range weights {
			sum += w
		}
		for i, d := range ds {
			// The component's stream as Mixed.Stream names it: the
			// job's window split by weight (shuffle.Mixture.ComponentWindow).
			win := int(max((uint64(max(job.Window, 1))*weights[i]+sum-1)/sum, 1))
			s := streamOf(comps[i], layout.Stream{DS: d, Seed: job.Seed, Window: win})
			passes[i] = &passLens{s: s, c: comps[i], group: group}
			if _, err := comps[i].Pass(s, 0); err != nil {
				return nil, err
			}
			if es, ok := comps[i].(EpochSized); ok && epochLen {
				// A stepped mixture's epoch: every component's pass 0
				// at the job's first world.
				n, err := es.EpochSteps(s)
				if err != nil {
					return nil, err
				}
				job.MixSamples += n
			}
		}
		if epochLen {
			job.MixSamples = max(job.MixSamples, 1)
		}
	}
	var mo *shuffle.Mixture
	var sc *shuffle.Schedule
	switch {
	case phases != nil:
		if sc, err = shuffle.NewSchedule(phases, passes, block, job.MixSamples); err != nil {
			return nil, err
		}
		if mo, err = sc.Epoch(0); err != nil {
			return nil, err
		}
	case fixed:
		sizes := make([]int, len(comps))
		for i, c := range comps {
			sizes[i] = c.Len()
		}
		if mo, err = shuffle.NewMixture(weights, sizes, block, job.MixSamples); err != nil {
			return nil, err
		}
	default:
		if mo, err = shuffle.NewMixtureOf(weights, passes, block, job.MixSamples); err != nil {
			return nil, err
		}
	}
	if err := checkSpan(mo); err != nil {
		return nil, err
	}
	ids := make([]string, len(ds))
	for i, d := range ds {
		ids[i] = d.ID()
	}
	return &Mixed{Mix: job.Mix, Schedule: job.Schedule, DS: ds, Order: newMixOrder(mo, sc, key, x.spans, group), base: x.base, comps: comps,
		key: key, text: job.Mix.String(), schedule: job.Schedule.String(), ids: strings.Join(ids, ",")}, nil
}

// passLens is a component's pass lengths: pass p is its stream's epoch p
// as the component passes over it, Len long. Each is computed once.
type passLens struct {
	s     layout.Stream
	c     Component
	group int // items a step (Stepped): a pass's length is in steps
	mu    sync.Mutex
	lens  []int
}

// PassLen returns pass p's items, at least 1 (a pass of none, or one
// that fails, counts 1: the mixture needs a positive length, and its
// layout then finds the pass out of range).
func (p *passLens) PassLen(pass uint64) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pass < uint64(len(p.lens)) {
		return p.lens[pass]
	}
	for uint64(len(p.lens)) <= pass {
		n := 1
		if pe, err := p.c.Pass(p.s, uint64(len(p.lens))); err == nil {
			n = max(pe.Len()/max(p.group, 1), 1)
		}
		p.lens = append(p.lens, n)
	}
	return p.lens[pass]
}

// Mixed is a mixture resolved against the datasets a gateway serves: its
// components' dataset versions, the order that interleaves them, and the
// unit of its items (Unwrap). It is the unit of a job over them
// (layout.Composite).
type Mixed struct {
	Mix api.Mix
	// Schedule is the schedule the mixture follows (mix_schedule=), nil
	// for a mixture of fixed weights; Mix is then its first phase.
	Schedule api.Schedule
	DS       []*catalog.Dataset // per component
	Order    *MixOrder
	base     layout.Base
	inner    layout.Unit
	comps    []Component
	// content makes the content a batch starts from, nil for samples as
	// read.
	content  func() (layout.Content, error)
	key      string
	text     string // Mix.String()
	schedule string // Schedule.String(), "" for fixed weights
	ids      string // the components' index IDs, comma-separated
	// paces are, for a schedule, its components' (Stream.Pace), made
	// once on first use.
	paceOnce sync.Once
	paces    []*jobstream.Pace
}

// Feature is the feature of the mixture's items' unit.
func (m *Mixed) Feature() features.Feature { return m.inner.Feature() }

// Unwrap is the unit of the mixture's items.
func (m *Mixed) Unwrap() layout.Unit { return m.inner }

// View is the inner unit's view.
func (m *Mixed) View(ctx context.Context, ds *catalog.Dataset, job api.Job) (*catalog.Dataset, error) {
	return m.inner.View(ctx, ds, job)
}

// Extent is the mixture's epoch: the same length every epoch; a stepped
// mixture's resumed run's, the steps after those it resumed from.
func (m *Mixed) Extent(_ layout.Source, job api.Job, epoch uint64) (int, error) {
	off, err := m.resumedIn(job, epoch)
	if err != nil {
		return 0, err
	}
	n := m.Order.NumSamples() - off
	if job.Offset > n {
		return 0, fmt.Errorf("%w: offset %d is past the end of the mixture's epoch, which has %d samples", layout.ErrOutOfRange, job.Offset, n)
	}
	return n, nil
}

// AppendKey names the inner unit's parameters.
func (m *Mixed) AppendKey(s []byte, job api.Job) []byte { return m.inner.AppendKey(s, job) }

// Describe adds each component's share of the epoch to /epoch/N.
func (m *Mixed) Describe(info *api.EpochInfo, _ layout.Source, job api.Job, epoch uint64) error {
	info.Mix = &api.MixInfo{Block: pinnedBlock(m)}
	mo, err := m.Order.At(epoch) // the epoch's own counts and stream starts
	if err != nil {
		return err
	}
	g := m.Order.Group()
	for i, c := range m.Mix {
		ds := m.DS[i]
		info.Chunks += ds.Index.NumChunks()
		start := mo.Start(i, epoch)
		ci := api.MixComponentInfo{Dataset: c.Dataset, Weight: c.Weight, IndexID: ds.ID(),
			Samples: mo.Size(i) * g, EpochSamples: mo.EpochSamples(i) * g, Window: mo.ComponentWindow(i, job.Window),
			FirstPass: start.Pass, FirstIndex: start.Index * g}
		if d, ok := m.comps[i].(Described); ok {
			if err := d.Describe(&ci, m.Stream(i, job), start.Pass); err != nil {
				return err
			}
		}
		if stepped(m.inner) {
			// Every pass the epoch draws steps of is laid out: one that
			// makes no step (a later stage whose buckets hold none of its
			// images) refuses the epoch, as it refuses its steps.
			need, s := start.Index+mo.EpochSamples(i), m.Stream(i, job)
			for p := start.Pass; need > 0; p++ {
				ps, err := m.comps[i].Pass(s, p)
				if err != nil {
					return err
				}
				need -= max(ps.Len()/max(g, 1), 1)
			}
		}
		info.Mix.Components = append(info.Mix.Components, ci)
	}
	return nil
}

// Component is component i as its kind made it (Mixable.Components).
func (m *Mixed) Component(i int) Component { return m.comps[i] }

// resumedIn is how many of epoch epoch's items a stepped mixture's run
// does not serve: those of the steps its resume point took (0 for another
// mixture's).
func (m *Mixed) resumedIn(job api.Job, epoch uint64) (int, error) {
	st, ok := m.inner.(Stepped)
	if !ok || !st.Stepped() {
		return 0, nil
	}
	k, err := st.Resumed(job)
	if err != nil || k == 0 {
		return 0, err
	}
	steps := uint64(m.Order.Mixture.NumSamples()) // an epoch's steps
	before := epoch * steps
	if uint64(k) <= before {
		return 0, nil
	}
	return int(min(uint64(k)-before, steps)) * m.Order.Group(), nil
}

// Datasets are the components' versions.
func (m *Mixed) Datasets() []*catalog.Dataset { return m.DS }

// Name is the mixture as its requests name it (Mix.String), made once.
func (m *Mixed) Name() string { return m.text }

// Key names the mixture's order: its components' versions, weights,
// block and length.
func (m *Mixed) Key() string { return m.key }

// Stream is component i's stream for a job: the order its passes read,
// in windows of the job's window split by weight.
func (m *Mixed) Stream(i int, job api.Job) layout.Stream {
	return streamOf(m.comps[i], layout.Stream{DS: m.DS[i], Seed: job.Seed, Window: m.Order.ComponentWindow(i, job.Window), Name: job.Name, Mix: m.key, Pace: m.pace(i)})
}

// streamOf is s as component c reads it (Streamed).
func streamOf(c Component, s layout.Stream) layout.Stream {
	if sc, ok := c.(Streamed); ok {
		return sc.Stream(s)
	}
	return s
}

// pace is component i's Pace under the schedule, nil for fixed weights:
// in its stream's positions, documents, while the schedule counts its
// items (jobstream.NewTokenPace, exact where an item is a document).
func (m *Mixed) pace(i int) *jobstream.Pace {
	s := m.Order.Schedule()
	if s == nil {
		return nil
	}
	m.paceOnce.Do(func() {
		m.paces = make([]*jobstream.Pace, len(m.DS))
		for c := range m.paces {
			m.paces[c] = jobstream.NewTokenPace(s, c, m.Order.Size(c), m.DS[c].Index.NumSamples(), 0)
		}
	})
	return m.paces[i]
}

// share is component i's share of a global batch of global samples, as
// the schedule's clock counts a stream's progress per batch.
func (m *Mixed) share(i, global int) int {
	var sum uint64
	for _, a := range m.Order.Weights() {
		sum += a
	}
	return max(1, int(uint64(global)*m.Order.Weights()[i]/sum))
}

// ETag names a mixture batch's bytes: every component's index and
// weight, the block and length, every parameter that selects the batch,
// and the membership version it was assigned under ("" for a plain cut).
func (m *Mixed) ETag(src layout.Source, job api.Job, epoch, b uint64) string {
	members := src.AssignedUnder(job)
	s := fmt.Appendf(nil, "brand-mix-batch-v1|%s|%d|%d|%d|%d|%d|%t|%d|%d|offset=%d",
		m.key, job.Seed, job.Window, job.BatchSize, job.World, job.Rank, job.DropLast, epoch, b, job.Offset)
	if members != "" {
		s = fmt.Appendf(s, "|members=%s", members)
	}
	s = layout.AppendTransform(s, job)
	s = layout.AppendBalance(s, job)
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

var (
	_ layout.Composer  = (*Mixtures)(nil)
	_ layout.Composite = (*Mixed)(nil)
	_ layout.Tagger    = (*Mixed)(nil)
	_ layout.Wrapper   = (*Mixed)(nil)
)

// pinnedBlock is the mixing block m's clients pin (MixInfo.Block,
// Brand-Mix-Block), so that a job resumed at another world keeps its
// order: 0 for a mixture of whole steps (Stepped), whose blocks are its
// steps at every world, with no block to pin.
func pinnedBlock(m *Mixed) int {
	if stepped(m.inner) {
		return 0
	}
	return m.Order.Block()
}

// SourceHeaders names the mixture a job reads (the gateway's headers):
// its text, block and components' index versions, and its schedule.
func (m *Mixed) SourceHeaders(h http.Header) {
	h.Set(api.HeaderMix, m.text)
	h.Set(api.HeaderMixBlock, strconv.Itoa(pinnedBlock(m)))
	h.Set(api.HeaderMixIndex, m.ids)
	if len(m.Schedule) > 0 {
		h.Set(api.HeaderMixSchedule, m.schedule)
	}
}

// BatchHeaders names each of a mixture batch's samples' component, and
// what the unit of its items names of a batch (a bucketed mixture's
// step: its images' geometry).
func (m *Mixed) BatchHeaders(h http.Header, b *layout.Batch) {
	h.Set(api.HeaderMixComponents, FormatComponents(b.Components()))
	if bh, ok := m.inner.(interface {
		BatchHeaders(h http.Header, b *layout.Batch)
	}); ok {
		bh.BatchHeaders(h, b)
	}
}
