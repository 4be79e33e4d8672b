// Package tokens is the unit of a token job (seq=): it reads a token
// dataset's documents and serves them packed into sequences (package
// seqpack). Its batch's items are sequences, everything that counts
// samples for an ordinary job counts sequences, and the batch's one part
// reads the documents the sequences' pieces name, each once, as ordinary
// samples — the cache, peers and skip modes read them as they read any
// sample. The pack stage (internal/batch/sequences) writes the sequences
// from them (Make), and /plan plans the documents it reads (Plan). It
// mixes as passes of packed sequences (internal/batch/units/mixture), a
// text component of which the vision unit mixes too.
package tokens

import (
	"context"
	"fmt"
	"math"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/sequences"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/seqpack"
)

// ErrTokens marks a token job its source cannot serve: a dataset that is
// not a token dataset, tokens of a dtype that is not an integer's, a pad
// or EOS ID the dataset's dtype cannot hold, concat without an EOS. It is
// a bad request (400).
var ErrTokens = fmt.Errorf("%w: token job", query.ErrBadRequest)

// TokenSpec is what a token job packs and writes: the packing, the pad
// and EOS IDs, and the dataset's token dtype and field.
type TokenSpec struct {
	Pack     seqpack.Spec
	Pad, EOS int32 // EOS: Concat only
	// DType is the NumPy dtype of the documents' members ("uint16", ...)
	// and Field the field that holds them.
	DType, Field string
	Vocabulary   string
}

// tokenRange is the IDs each token dtype holds; a pad or EOS outside it
// is refused. Float dtypes are no token IDs.
var tokenRange = map[string][2]int64{
	"uint8": {0, math.MaxUint8}, "int8": {0, math.MaxInt8},
	"uint16": {0, math.MaxUint16}, "int16": {0, math.MaxInt16},
	"uint32": {0, math.MaxInt32}, "int32": {0, math.MaxInt32},
	"uint64": {0, math.MaxInt32}, "int64": {0, math.MaxInt32},
}

// TokensOf is the token spec of job over ds, or an error wrapping
// ErrTokens that says why ds cannot serve it.
func TokensOf(ds *catalog.Dataset, job api.Job) (TokenSpec, error) {
	tok := tokensOf(ds)
	if tok == nil {
		return TokenSpec{}, fmt.Errorf("%w: seq= packs the documents of a token dataset (Megatron .bin/.idx, or Parquet or MDS indexed with --tokens or --text: docs/format.md §6.7), and %s is not one", ErrTokens, ds.Name)
	}
	mode, err := seqpack.ParseMode(job.PackMode())
	if err != nil {
		return TokenSpec{}, fmt.Errorf("%w: %w", ErrTokens, err)
	}
	spec := TokenSpec{Pack: seqpack.Spec{Seq: job.Seq, Mode: mode}, Pad: int32(job.Pad), DType: tok.TokenType(), Field: tok.TokenField(),
		Vocabulary: tok.Vocabulary()}
	if err := spec.Pack.Validate(); err != nil {
		return TokenSpec{}, fmt.Errorf("%w: %w", ErrTokens, err)
	}
	r, ok := tokenRange[spec.DType]
	if !ok {
		return TokenSpec{}, fmt.Errorf("%w: dataset %s holds tokens of dtype %s; a token job serves integer token IDs", ErrTokens, ds.Name, spec.DType)
	}
	check := func(name string, id int) error {
		if int64(id) < r[0] || int64(id) > r[1] {
			return fmt.Errorf("%w: %s=%d does not fit dataset %s's tokens (%s: IDs %d..%d)", ErrTokens, name, id, ds.Name, spec.DType, r[0], r[1])
		}
		return nil
	}
	if err := check(api.ParamPad, job.Pad); err != nil {
		return TokenSpec{}, err
	}
	if mode == seqpack.Concat {
		eos, known := job.EOS, job.EOSSet
		if sp, ok := tok.(format.TokenSpecials); ok && !known {
			// A text dataset's SentencePiece model knows its EOS.
			var id int32
			id, known = sp.EOS()
			eos = int(id)
		}
		if !known {
			return TokenSpec{}, fmt.Errorf("%w: pack=concat puts an EOS token after every document, and dataset %s does not say which ID that is: give eos=ID", ErrTokens, ds.Name)
		}
		if err := check(api.ParamEOS, eos); err != nil {
			return TokenSpec{}, err
		}
		spec.EOS = int32(eos)
	}
	return spec, nil
}

// tokensOf is ds's token decoder, nil if ds is not a token dataset.
func tokensOf(ds *catalog.Dataset) format.Tokens {
	if ds.InPlace == nil {
		return nil
	}
	tok, _ := ds.InPlace.Decoder.(format.Tokens)
	return tok
}

// Holds reports whether ds is a token dataset (format.Tokens):
// in a vision mixture, a text component rather than the image-text one.
func Holds(ds *catalog.Dataset) bool { return tokensOf(ds) != nil }

// TokenView is the dataset a token job over ds reads: ds with only its
// token field selected, so that a dataset of several fields reads the
// tokens alone. It is ErrTokens for a dataset that is not a token one.
func TokenView(ds *catalog.Dataset) (*catalog.Dataset, error) {
	tok := tokensOf(ds)
	if tok == nil {
		return nil, fmt.Errorf("%w: seq= packs the documents of a token dataset (Megatron .bin/.idx, or Parquet or MDS indexed with --tokens or --text: docs/format.md §6.7), and %s is not one", ErrTokens, ds.Name)
	}
	return ds.Select([]string{tok.TokenField()})
}

// epochKey names one epoch of a stream's order.
type epochKey struct {
	s     layout.Stream // its Order
	epoch uint64
}

// packKey names a packed epoch: the order's epoch and the packing.
type packKey struct {
	epochKey
	spec seqpack.Spec
}

type packWindowKey struct {
	packKey
	w int
}

// Bounds of the memoised packings: a packed epoch costs O(windows), a
// packed window its sequences' pieces.
const (
	maxMemoPacked        = 32
	maxMemoPackedWindows = 64
	maxMemoDocTokens     = 16
)

// Unit is the unit of a token job: an epoch is its base order's
// documents packed into sequences (Packed), and a batch the rank's
// sequences with one part reading the documents they name. It holds the
// packed epochs, their windows and the datasets' document token counts:
// pure functions of their keys, as the base orders. Safe for concurrent
// use.
type Unit struct {
	base    layout.Base
	stage   Stage
	epochs  *lru.Cache[packKey, *seqpack.Packing]
	windows *lru.Cache[packWindowKey, []seqpack.Sequence]
	counts  *lru.Cache[string, []uint32] // per index ID: every document's tokens, by sample ID
}

// New returns the unit over the orders' base b, its batches' sequences
// written by stage (nil: a token batch fails, naming the missing stage).
func New(b layout.Base, stage Stage) *Unit {
	e, _ := lru.New[packKey, *seqpack.Packing](maxMemoPacked)
	w, _ := lru.New[packWindowKey, []seqpack.Sequence](maxMemoPackedWindows)
	c, _ := lru.New[string, []uint32](maxMemoDocTokens)
	if stage == nil {
		stage = noStage{}
	}
	return &Unit{base: b, stage: stage, epochs: e, windows: w, counts: c}
}

func (*Unit) Feature() features.Feature { return features.Tokens }

// View is ds's token field alone (TokenView).
func (*Unit) View(_ context.Context, ds *catalog.Dataset, _ api.Job) (*catalog.Dataset, error) {
	return TokenView(ds)
}

// Extent is the epoch's sequences.
func (u *Unit) Extent(src layout.Source, job api.Job, epoch uint64) (int, error) {
	p, err := u.Epoch(src.DS, job, epoch)
	if err != nil {
		return 0, err
	}
	return p.NumSequences(), nil
}

// Lay lays out the rank's sequences of b.
func (u *Unit) Lay(ctx context.Context, b *layout.Batch) error {
	spec, err := TokensOf(b.DS, b.Job)
	if err != nil {
		return err
	}
	s := layout.StreamOf(b.DS, b.Job)
	p, err := u.PackedEpoch(s, b.Epoch, spec.Pack)
	if err != nil {
		return err
	}
	return u.lay(ctx, b, spec, p, s)
}

// AppendKey names the sequences' length, the packing, the pad and
// concat's EOS.
func (*Unit) AppendKey(s []byte, job api.Job) []byte {
	s = fmt.Appendf(s, "|seq=%d|pack=%s|pad=%d", job.Seq, job.PackMode(), job.Pad)
	if job.EOSSet {
		s = fmt.Appendf(s, "|eos=%d", job.EOS)
	}
	return s
}

// Describe adds the epoch's packing to /epoch/N.
func (u *Unit) Describe(info *api.EpochInfo, src layout.Source, job api.Job, epoch uint64) error {
	p, err := u.Epoch(src.DS, job, epoch)
	if err != nil {
		return err
	}
	info.Tokens = tokenInfo(p, job)
	return nil
}

// DocTokens is every document's token count of ds, by sample ID, from
// its index (format.Tokens.DocTokens).
func (u *Unit) DocTokens(ds *catalog.Dataset) ([]uint32, error) {
	if n, ok := u.counts.Get(ds.ID()); ok {
		return n, nil
	}
	tok := tokensOf(ds)
	if tok == nil {
		return nil, fmt.Errorf("%w: dataset %s is not a token dataset", ErrTokens, ds.Name)
	}
	n := make([]uint32, ds.Index.NumSamples())
	for c := range ds.Index.NumChunks() {
		first, k := ds.Index.ChunkRange(c)
		d := tok.DocTokens(c)
		if len(d) != k {
			return nil, fmt.Errorf("dataset %s: chunk %d has %d samples and %d document token counts", ds.Name, c, k, len(d))
		}
		copy(n[first:first+k], d)
	}
	u.counts.Add(ds.ID(), n)
	return n, nil
}

// Windows is a stream's epoch order as packages seqpack and vision read
// it: its windows from the base orders' memo.
type Windows struct {
	Base  layout.Base
	S     layout.Stream
	Epoch uint64
	E     *layout.EpochOrder
}

func (w Windows) NumWindows() int    { return w.E.NumWindows() }
func (w Windows) Window(i int) []int { return w.Base.Window(w.S, w.Epoch, w.E, i) }

// Packed is one epoch of a stream packed into sequences, with the order
// it was packed from.
type Packed struct {
	*seqpack.Packing
	Order *layout.EpochOrder
	key   packKey
}

// PackedEpoch returns epoch epoch of stream s packed as spec says: computed
// once per (dataset version, seed, window, epoch, spec) and kept.
func (u *Unit) PackedEpoch(s layout.Stream, epoch uint64, spec seqpack.Spec) (*Packed, error) {
	e, err := u.base.Epoch(s, epoch)
	if err != nil {
		return nil, err
	}
	k := packKey{epochKey{s.Order(), epoch}, spec}
	if pe, ok := u.epochs.Get(k); ok {
		return &Packed{Packing: pe, Order: e, key: k}, nil
	}
	counts, err := u.DocTokens(s.DS)
	if err != nil {
		return nil, err
	}
	pe, err := seqpack.NewPacking(Windows{u.base, s.Order(), epoch, e}, func(d int) int { return int(counts[d]) }, spec, s.Seed, epoch)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrTokens, err)
	}
	u.epochs.Add(k, pe)
	return &Packed{Packing: pe, Order: e, key: k}, nil
}

// Sequences appends sequences [start, end) of a packed epoch to dst, from
// its memoised windows.
func (u *Unit) Sequences(dst []seqpack.Sequence, p *Packed, start, end int) []seqpack.Sequence {
	for s := start; s < end; {
		w := p.WindowOf(s)
		ws, we := p.WindowStart(w), p.WindowStart(w+1)
		k := packWindowKey{p.key, w}
		seqs, ok := u.windows.Get(k)
		if !ok {
			seqs = p.Window(w)
			u.windows.Add(k, seqs)
		}
		hi := min(end, we)
		dst = append(dst, seqs[s-ws:hi-ws]...)
		s = hi
	}
	return dst
}

// docPosition is where sequence s of a packed epoch is in its order's
// document positions, by linear interpolation within its window: what
// the use table follows the stream by. Exact at window boundaries.
func docPosition(p *Packed, s int) int {
	if s >= p.NumSequences() {
		return p.Order.NumSamples()
	}
	w := p.WindowOf(s)
	ws, we := p.WindowStart(w), p.WindowStart(w+1)
	ds, de := p.Order.WindowStart(w), p.Order.NumSamples()
	if w+1 < p.Order.NumWindows() {
		de = p.Order.WindowStart(w + 1)
	}
	if we == ws {
		return ds
	}
	return ds + (s-ws)*(de-ds)/(we-ws)
}

// TokenBatch is what a token job's batch adds to its layout: the spec,
// the rank's sequences in order, and for each of their pieces the read
// position (in Batch.Take) of the document it is cut from.
type TokenBatch struct {
	Spec TokenSpec
	Seqs []seqpack.Sequence
	// Pos is each sequence's position in the epoch, which keys it
	// (sequences.Key): under balance= a rank's sequences come from
	// anywhere in its global batch.
	Pos []int
	At  [][]int // per sequence, per piece: its document's position in Take
	// NonPad is the sequences' tokens that are not pad; Split the pieces
	// that are part of a document (a piece shorter than its document).
	NonPad, Split int
	split         []int // per sequence: its pieces that are part of a document
	// Comps is, in a mixture's batch, each sequence's component.
	Comps []int
}

// lay lays out batch b of a token job over one dataset: the rank's cut
// of the epoch's sequences, and one part reading the documents they
// name, each once.
func (u *Unit) lay(ctx context.Context, b *layout.Batch, spec TokenSpec, p *Packed, s layout.Stream) error {
	seqs, pos, bal, err := u.sequencesOf(b, p)
	if err != nil {
		return err
	}
	b.Balanced = bal
	start, end := b.Start, b.End // what the stream is followed at: a balanced rank's, its global batch
	if bal != nil {
		if _, start, end, err = layout.GlobalBatch(b.Job, b.EpochSamples, int(b.Batch)); err != nil {
			return err
		}
	}
	tb := &TokenBatch{Spec: spec, Seqs: seqs, Pos: pos, At: make([][]int, len(seqs)), split: make([]int, len(seqs))}
	counts, err := u.DocTokens(s.DS)
	if err != nil {
		return err
	}
	at := make(map[int]int)
	var ids []int
	for i, q := range seqs {
		tb.At[i] = make([]int, len(q.Pieces))
		for j, pc := range q.Pieces {
			k, ok := at[pc.Doc]
			if !ok {
				k = len(ids)
				at[pc.Doc] = k
				ids = append(ids, pc.Doc)
			}
			tb.At[i][j] = k
			tb.NonPad += pc.Len
			if pc.Offset > 0 || pc.Len < int(counts[pc.Doc])+boolInt(pc.EOS) {
				tb.Split++
				tb.split[i]++
			}
		}
	}
	smp, err := layout.NewSamples(ctx, s.DS, ids)
	if err != nil {
		return err
	}
	first, last := docPosition(p, start), docPosition(p, end)
	global := b.Job.BatchSize * b.Job.World
	share := max(1, int(int64(global)*int64(p.Order.NumSamples())/int64(max(1, p.NumSequences()))))
	b.Parts = []layout.Part{{Stream: s, Epoch: b.Epoch, Samples: smp, First: first, End: max(last, first), Share: share, EpochLen: s.DS.Index.NumSamples()}}
	b.Take = layout.TakeAll(len(ids))
	b.Content = tb
	return nil
}

// sequencesOf is the sequences b's rank takes of its global batch of
// packed epoch p and each one's position in the epoch: its plain cut's,
// or its balanced share of the global batch.
func (u *Unit) sequencesOf(b *layout.Batch, p *Packed) ([]seqpack.Sequence, []int, *layout.Balanced, error) {
	job := b.Job
	if b.Assignment(job) == api.AssignPlain {
		seqs := u.Sequences(nil, p, b.Start, b.End)
		return seqs, layout.Span(b.Start, len(seqs)), nil, nil
	}
	shares, gstart, gend, err := layout.GlobalBatch(job, b.EpochSamples, int(b.Batch))
	if err != nil {
		return nil, nil, nil, err
	}
	seqs := u.Sequences(make([]seqpack.Sequence, 0, gend-gstart), p, gstart, gend)
	places, info, err := u.base.Assign(b, layout.Global{Shares: shares,
		Costs: func() ([]uint64, error) {
			costs := make([]uint64, len(seqs))
			for i, q := range seqs {
				costs[i] = Cost(job.Balance, q)
			}
			return costs, nil
		}})
	if err != nil {
		return nil, nil, nil, err
	}
	mine, pos := make([]seqpack.Sequence, len(places)), make([]int, len(places))
	for k, at := range places {
		mine[k], pos[k] = seqs[at], gstart+at
	}
	return mine, pos, info, nil
}

// Served is the batch's sequences.
func (tb *TokenBatch) Served() int { return len(tb.Seqs) }

// Size is the sequences' tar bytes: every sequence's members are as long
// as seq says.
func (tb *TokenBatch) Size() (int64, bool) {
	return int64(len(tb.Seqs)) * sequences.SequenceBytes(tb.Spec.Pack.Seq), true
}

// Components is a mixture's sequences' components (nil for one dataset).
func (tb *TokenBatch) Components() []int { return tb.Comps }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Without returns token batch b, whose content is tb, served without the
// sequences that need a document at read positions missing (ascending:
// its chunk is damaged at rest), with its content. Its Missing are the
// sequences' positions, MissingKeys the documents' keys; its ETag is a
// partial one (layout.Batch.Partial).
func (tb *TokenBatch) Without(b *layout.Batch, missing []int) (*layout.Batch, *TokenBatch) {
	if len(missing) == 0 {
		return b, tb
	}
	gone := make(map[int]bool, len(missing))
	keys := make([]string, 0, len(missing))
	for _, pos := range missing {
		gone[pos] = true
		t := b.Take[pos]
		keys = append(keys, b.Parts[t.Part].Samples.Info[t.At].Key)
	}
	old := tb
	nt := *old
	nt.Seqs, nt.Pos, nt.At, nt.split, nt.Comps, nt.NonPad, nt.Split = nil, nil, nil, nil, nil, 0, 0
	var lost []int
	for i, q := range old.Seqs {
		out := false
		for _, k := range old.At[i] {
			out = out || gone[k]
		}
		if out {
			lost = append(lost, i)
			continue
		}
		nt.Seqs = append(nt.Seqs, q)
		nt.Pos = append(nt.Pos, old.Pos[i])
		nt.At = append(nt.At, old.At[i])
		nt.split = append(nt.split, old.split[i])
		if old.Comps != nil {
			nt.Comps = append(nt.Comps, old.Comps[i])
		}
		nt.Split += old.split[i]
		for _, pc := range q.Pieces {
			nt.NonPad += pc.Len
		}
	}
	return b.Partial(&nt, lost, keys), &nt
}

// Epoch is the packed epoch of a token job over ds.
func (u *Unit) Epoch(ds *catalog.Dataset, job api.Job, epoch uint64) (*Packed, error) {
	spec, err := TokensOf(ds, job)
	if err != nil {
		return nil, err
	}
	return u.PackedEpoch(layout.StreamOf(ds, job), epoch, spec.Pack)
}

// tokenInfo describes a packed epoch in /epoch/N.
func tokenInfo(p *Packed, job api.Job) *api.TokenInfo {
	n := p.NumSequences()
	ti := &api.TokenInfo{Seq: job.Seq, Pack: job.PackMode(), Pad: job.Pad, Documents: p.Order.NumSamples(),
		Tokens: int64(p.NumTokens()), Split: p.Split()}
	if job.EOSSet {
		eos := job.EOS
		ti.EOS = &eos
	}
	if n > 0 {
		ti.Fill = float64(p.NumTokens()) / (float64(n) * float64(job.Seq))
	}
	return ti
}

// Cost is a packed sequence's cost under kind: its attention
// (the sum of its pieces' squared lengths) or its tokens.
func Cost(kind string, q seqpack.Sequence) uint64 {
	var c uint64
	for _, pc := range q.Pieces {
		if kind == api.BalanceAttention {
			c += uint64(pc.Len) * uint64(pc.Len)
		} else {
			c += uint64(pc.Len)
		}
	}
	return c
}
