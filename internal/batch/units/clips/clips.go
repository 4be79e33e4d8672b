// Package clips is the unit of a clip job (clip=, or delta_timestamps=
// or frames= over a LeRobot dataset): it reads a video dataset served in
// place (format/video) and serves clips. Its samples are those of the
// clip space package clips draws from the dataset's description and the
// job's parameters, numbered unit by unit (a tree's chunks, a LeRobot
// dataset's episodes). Its order is the shuffle of those units with
// their clips' counts (seed, epoch and window as any job's, the window
// counting units): a stream of items of its own (layout.Spaced), so a
// clip is a pure function of (dataset version, seed, epoch, sample) on
// every node and at every world size. A batch's clips name the GOPs their
// frames need (and, over a LeRobot dataset, the rows their windows read);
// its one part reads those GOPs and rows, each once, as ordinary samples
// — the cache, peers, prefetch and skip modes read them as they read any
// sample — and the clip stage decodes them (Make, through
// internal/batch/tensorize).
package clips

import (
	"context"
	"fmt"
	"slices"
	"strings"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/format/video/clips"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/shuffle"
)

// ErrClips marks a clip job its source cannot serve: a dataset that is
// not a video one, parameters its videos cannot make clips with (a clip
// longer than every video, a window of a key the dataset lacks). It is a
// bad request (400).
var ErrClips = fmt.Errorf("%w: clip job", query.ErrBadRequest)

// ClipSpace is a clip job's sample space over one dataset version: the
// space package clips draws from (Space), the dataset's description and
// decoder, and the job's clip parameters.
type ClipSpace struct {
	*clips.Space
	Video *video.Decoder
	Job   api.Clip
	ds    *catalog.Dataset // the dataset version it is of
}

// Dataset is the dataset's description.
func (c *ClipSpace) Dataset() *video.Dataset { return c.Video.Dataset() }

// videoOf is ds's video decoder, nil if ds is not a video dataset.
// IsVideo reports whether ds is a video dataset (a tree of videos or a
// LeRobot dataset, indexed in place), whose samples a clip job reads.
func IsVideo(ds *catalog.Dataset) bool { return videoOf(ds) != nil }

func videoOf(ds *catalog.Dataset) *video.Decoder {
	if ds.InPlace == nil {
		return nil
	}
	d, _ := ds.InPlace.Decoder.(*video.Decoder)
	return d
}

// maxMemoClipSpaces bounds the clip spaces kept: each costs a few words a
// sample and its units' chunks.
const maxMemoClipSpaces = 16

type clipSpaceKey struct{ id, clip string }

// Unit is the unit of a clip job: its epoch is the base order of its
// clips (SpaceOrder), a batch the rank's clips with one part reading the
// GOPs and rows they need. It holds the clip spaces of its jobs. Safe
// for concurrent use.
type Unit struct {
	base   layout.Base
	cfg    Config
	spaces *lru.Cache[clipSpaceKey, *ClipSpace]
	plans  *lru.Cache[windowPlanKey, *windowPlan]
}

// Config is what the node gives the unit.
type Config struct {
	// Stage decodes clip batches' clips (tensorize.Stage; nil: a clip
	// batch fails, naming the missing decoder), through the pipelines
	// Pipelines names.
	Stage     Stage
	Pipelines Pipelines
	// SkipDamaged (--on-damaged-chunk=skip, as the reader's) leaves out
	// the clips whose video's packets do not decode, named as those of a
	// chunk damaged or lost at rest are, instead of failing the batch.
	SkipDamaged bool
	// NoDecoder is why this node serves no clip job (a build without a
	// video decoder), nil where it serves them: every request that
	// resolves a clip job — its epochs, its plan, its batches — is
	// answered with it, where the job is first named (Unavailable).
	NoDecoder error
	// GOPCacheBytes is the node's decoded-GOP cache (the clip stage's,
	// --gop-cache-bytes): what /plan plans the decode with.
	GOPCacheBytes int64
	Log           zerolog.Logger
}

// New returns the unit over the orders' base b.
func New(b layout.Base, cfg Config) *Unit {
	c, _ := lru.New[clipSpaceKey, *ClipSpace](maxMemoClipSpaces)
	if cfg.Stage == nil {
		cfg.Stage = noStage{}
	}
	if cfg.Pipelines == nil {
		cfg.Pipelines = noPipelines{}
	}
	return &Unit{base: b, cfg: cfg, spaces: c, plans: newWindowPlans()}
}

func (*Unit) Feature() features.Feature { return features.Clips }

// Unavailable is why this node serves no clip job, nil if it does.
func (u *Unit) Unavailable(api.Job) error { return u.cfg.NoDecoder }

// View is the fields job names (columns=).
func (*Unit) View(_ context.Context, ds *catalog.Dataset, job api.Job) (*catalog.Dataset, error) {
	return ds.Select(job.Columns)
}

// Extent is the epoch's clips: its base order is of them.
func (u *Unit) Extent(src layout.Source, job api.Job, epoch uint64) (int, error) {
	e, err := u.base.Epoch(layout.StreamOf(src.DS, job), epoch)
	if err != nil {
		return 0, err
	}
	return e.NumSamples(), nil
}

// AppendKey names the job's clip parameters and the frames' layout.
func (*Unit) AppendKey(s []byte, job api.Job) []byte {
	return fmt.Appendf(s, "|clips=%s|clip_layout=%s", job.Clip.Key(), job.Clip.LayoutName())
}

// Describe adds the job's clip space to /epoch/N.
func (u *Unit) Describe(info *api.EpochInfo, src layout.Source, job api.Job, _ uint64) error {
	cs, err := u.Space(src.DS, job.Clip.Key())
	if err != nil {
		return err
	}
	info.Clips = clipInfo(cs)
	return nil
}

// Space returns the clip space of the job whose clip parameters' key is
// key (api.Clip.Key) over ds: computed once per dataset version and key,
// and kept. An error wraps ErrClips and says why ds cannot serve the
// job.
func (u *Unit) Space(ds *catalog.Dataset, key string) (*ClipSpace, error) {
	k := clipSpaceKey{ds.ID(), key}
	if cs, ok := u.spaces.Get(k); ok {
		return cs, nil
	}
	c, err := api.ParseClipKey(key)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrClips, err)
	}
	dec := videoOf(ds)
	if dec == nil {
		return nil, fmt.Errorf("%w: clip jobs read a video dataset (a tree of MP4/MOV files, or a LeRobot v3 dataset, indexed in place: docs/format.md §6.8), and %s is not one", ErrClips, ds.Name)
	}
	d := dec.Dataset()
	var sp *clips.Space
	switch {
	case d.LeRobot == nil && c.Frames == 0:
		return nil, fmt.Errorf("%w: %s is a tree of videos: give clip=T (delta_timestamps= and frames= are a LeRobot dataset's windows)", ErrClips, ds.Name)
	case d.LeRobot != nil && c.Frames > 0:
		return nil, fmt.Errorf("%w: %s is a LeRobot dataset, whose samples are its rows: give its windows with delta_timestamps= or frames=, not clip=", ErrClips, ds.Name)
	case d.LeRobot == nil:
		sp, err = clips.New(d, clips.Params{Frames: c.Frames, Stride: c.Stride, FPS: c.FPS, Step: c.Step, Fixed: c.First})
	default:
		var ws []clips.Window
		if ws, err = lerobotWindows(d.LeRobot, c.Windows); err == nil {
			sp, err = clips.NewLeRobot(d, ws, 0)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: dataset %s: %w", ErrClips, ds.Name, err)
	}
	cs := &ClipSpace{Space: sp, Video: dec, Job: c, ds: ds}
	u.spaces.Add(k, cs)
	return cs, nil
}

// lerobotWindows turns a job's windows into the clip space's: offsets in
// frames become seconds at the dataset's rate, and a window with no key
// is every camera's that has none of its own.
func lerobotWindows(l *video.LeRobot, ws []api.ClipWindow) ([]clips.Window, error) {
	var out []clips.Window
	var every *api.ClipWindow
	for i, w := range ws {
		if w.Key == "" {
			every = &ws[i]
			continue
		}
		out = append(out, clips.Window{Key: w.Key, Deltas: seconds(w, l.FPS)})
	}
	if every != nil {
		for _, cam := range l.Cameras {
			if !slices.ContainsFunc(ws, func(w api.ClipWindow) bool { return w.Key == cam }) {
				out = append(out, clips.Window{Key: cam, Deltas: seconds(*every, l.FPS)})
			}
		}
		if len(l.Cameras) == 0 {
			return nil, fmt.Errorf("a window for every camera, and the dataset has none")
		}
	}
	return out, nil
}

func seconds(w api.ClipWindow, fps int) []float64 {
	if !w.InFrames {
		return w.Offsets
	}
	out := make([]float64, len(w.Offsets))
	for i, f := range w.Offsets {
		out[i] = f / float64(fps)
	}
	return out
}

// clipOrder is a clip job's epoch order: the shuffle of its units (each
// with its clips' count), whose windows' chunks are exactly the chunks
// their clips need this epoch; with gop_window=, each window's clips in
// GOP-then-sample order (package gopshuffle).
type clipOrder struct {
	*shuffle.Epoch
	chunks [][]int // per window
	// gop is the job's gop_window (0: the shuffle's order); groups each
	// clip's group, first each unit's first clip (len units+1).
	gop         int
	groups      []uint64
	first       []int
	seed, epoch uint64
}

// WindowChunks are the layout chunks window w's clips need, ascending.
func (c *clipOrder) WindowChunks(w int) []int { return c.chunks[w] }

// SpaceOrder is the order of an epoch of a clip stream (layout.Spaced).
// Every clip of the epoch is drawn once here (O(clips × frames)), so that the schedule,
// prefetch and the planner see exactly the chunks the epoch's clips
// need, window by window — not every chunk a segment's clip might need
// in some epoch (clips.Space.Reach), about twice as many.
func (u *Unit) SpaceOrder(s layout.Stream, epoch uint64) (*layout.EpochOrder, error) {
	cs, err := u.Space(s.DS, s.Space)
	if err != nil {
		return nil, err
	}
	e, err := shuffle.NewEpoch(cs.Counts(), s.Seed, epoch, s.Window)
	if err != nil {
		return nil, err
	}
	co := &clipOrder{Epoch: e, chunks: make([][]int, e.NumWindows()), gop: cs.Job.GOPWindow, seed: s.Seed, epoch: epoch}
	var base []int
	if co.gop > 0 {
		co.groups = make([]uint64, cs.Samples())
		co.first = make([]int, len(cs.Counts())+1)
		for u, n := range cs.Counts() {
			co.first[u+1] = co.first[u] + n
		}
		base = gopBase(cs)
	}
	for w := range co.chunks {
		var chunks []int
		for _, n := range e.Window(w) {
			c, err := cs.Clip(s.Seed, epoch, n)
			if err != nil {
				return nil, fmt.Errorf("%w: %w", ErrClips, err)
			}
			chunks = append(chunks, c.Chunks...)
			if co.gop > 0 {
				co.groups[n] = gopGroup(base, c)
			}
		}
		slices.Sort(chunks)
		co.chunks[w] = slices.Compact(chunks)
	}
	eo := &layout.EpochOrder{Order: co, ChunkWindow: make([]int32, len(s.DS.Counts))}
	for c := range eo.ChunkWindow {
		eo.ChunkWindow[c] = -1
	}
	// A chunk two windows need (a clip that crosses into a chunk of
	// another unit) is keyed by the first: once that window is read it is
	// needed again when the later one comes, which its own reads ask for.
	for w := len(co.chunks) - 1; w >= 0; w-- {
		for _, c := range co.chunks[w] {
			eo.ChunkWindow[c] = int32(w)
		}
	}
	return eo, nil
}

// ClipBatch is what a clip job's batch adds to its layout: the space, the
// rank's clips in order, their keys, and where the GOPs and rows they
// need are in the batch's read (Batch.Take positions).
type ClipBatch struct {
	Space *ClipSpace
	Clips []clips.Clip
	// Pos are the clips' epoch positions, in the order of Clips; nil
	// for clips of no order of the clip unit's own (a clip bucket job's).
	Pos []int
	// Keys are the clips' sample keys in the tar: a tree's clip is its
	// video's key without its extension and its segment
	// ("train/abseiling/x/seg000003"); a LeRobot sample its anchor row's
	// key ("data/chunk-000/file-000/000123").
	Keys []string
	// GOPs and Rows are the read positions of the GOPs and of the
	// LeRobot rows the clips need.
	GOPs map[clips.GOP]int
	Rows map[int]int
	// Layout is the frames' array layout (api.Clip.LayoutName).
	Layout string
	// Bucketed is a clip bucket job's clips' geometry (Geometry); nil
	// for another clip job.
	Bucketed func(*ClipBatch) string
	// Comp is, for a batch of a mixture's (Mixed: a bucketed mixture's
	// step of a video source), the component its clips are of.
	Comp  int
	Mixed bool
}

// Geometry is a clip bucket job's clips' micro-conditioning, as its
// unit's Bucketed writes it (the Brand-Bucket-Geometry header), in the
// order of Clips; "" for another clip job.
func (cb *ClipBatch) Geometry(*layout.Batch) string {
	if cb.Bucketed == nil {
		return ""
	}
	return cb.Bucketed(cb)
}

// Lay lays out batch b of a clip job: the rank's cut of the epoch's
// clips, and one part reading the GOPs (and rows) they need, each once.
func (u *Unit) Lay(ctx context.Context, b *layout.Batch) error {
	s := layout.StreamOf(b.DS, b.Job)
	cs, err := u.Space(s.DS, s.Space)
	if err != nil {
		return err
	}
	e, err := u.base.Epoch(s, b.Epoch)
	if err != nil {
		return err
	}
	ns := u.base.AppendRange(nil, s, e, b.Epoch, b.Start, b.End)
	cl := make([]clips.Clip, len(ns))
	for i, n := range ns {
		if cl[i], err = cs.Clip(b.Job.Seed, b.Epoch, n); err != nil {
			return fmt.Errorf("%w: %w", ErrClips, err)
		}
	}
	cb, smp, err := ReadClips(ctx, cs, cl, b.Job.Clip.LayoutName())
	if err != nil {
		return err
	}
	cb.Pos = make([]int, len(cl))
	for i := range cb.Pos {
		cb.Pos[i] = b.Start + i
	}
	b.Parts = []layout.Part{{Stream: s, Epoch: b.Epoch, Samples: smp, First: b.Start, End: b.End, Share: b.Job.BatchSize * b.Job.World,
		EpochLen: b.EpochSamples}} // a clip stream's epoch is of clips
	b.Take = layout.TakeAll(len(smp.IDs))
	b.Content = cb
	return nil
}

// ReadClips is the content of a batch of clips cl drawn from cs, in
// that order, its frames in layout frames (api.Clip.LayoutName), and the
// samples it reads:
// the GOPs (and a LeRobot dataset's rows) the clips need, each once, in
// the order the clips first need them. A clip bucket job's unit lays its
// batches out with it too.
func ReadClips(ctx context.Context, cs *ClipSpace, cl []clips.Clip, frames string) (*ClipBatch, layout.Samples, error) {
	cb, ids, err := PlanClips(cs, cl, frames)
	if err != nil {
		return nil, layout.Samples{}, err
	}
	smp, err := layout.NewSamples(ctx, cs.ds, ids)
	if err != nil {
		return nil, layout.Samples{}, err
	}
	if d := cs.Dataset(); d.LeRobot != nil {
		// The anchor rows' keys are their samples' (format/parquet's).
		for i, c := range cb.Clips {
			cb.Keys[i] = smp.Info[cb.Rows[c.Row]].Key
		}
	}
	return cb, smp, nil
}

// PlanClips is ReadClips without the index's entries: the batch of clips
// cl, its GOPs' and rows' read positions their places in ids, the
// samples they read, each once, in the order the clips first need them.
// A LeRobot batch's keys are its anchor rows' samples' (ReadClips names
// them); a tree's its videos'.
func PlanClips(cs *ClipSpace, cl []clips.Clip, frames string) (*ClipBatch, []int, error) {
	d := cs.Dataset()
	ds := cs.ds
	cb := &ClipBatch{Space: cs, Clips: cl, Keys: make([]string, len(cl)),
		GOPs: map[clips.GOP]int{}, Rows: map[int]int{}, Layout: frames}
	var ids []int
	at := map[int]int{} // sample ID → read position
	read := func(chunk, sample int) int {
		first, _ := ds.Index.ChunkRange(chunk)
		id := first + sample
		k, ok := at[id]
		if !ok {
			k = len(ids)
			at[id] = k
			ids = append(ids, id)
		}
		return k
	}
	for i, c := range cl {
		for _, g := range c.GOPs {
			if _, ok := cb.GOPs[g]; ok {
				continue
			}
			ch := d.ChunkOf(g.Video, g.GOP)
			cb.GOPs[g] = read(ch, g.GOP-d.Chunks[d.Layout(ch)].First)
		}
		if l := d.LeRobot; l != nil {
			rows := []int{c.Row}
			for _, st := range c.Streams {
				if !st.Camera {
					rows = append(rows, st.Rows...)
				}
			}
			for _, r := range rows {
				if _, ok := cb.Rows[r]; ok {
					continue
				}
				ch, smp, ok := l.Row(r)
				if !ok {
					return nil, nil, fmt.Errorf("%w: row %d of clip %d has no chunk", ErrClips, r, c.Sample)
				}
				cb.Rows[r] = read(ch, smp)
			}
			continue
		}
		cb.Keys[i] = ClipKey(d, c)
	}
	return cb, ids, nil
}

// Served is the batch's clips.
func (cb *ClipBatch) Served() int { return len(cb.Clips) }

// Size is unknown before the read: a clip's tensors' sizes are the
// pipeline's draws.
func (cb *ClipBatch) Size() (int64, bool) { return 0, false }

// Components is nil: a clip job reads one video dataset.
func (cb *ClipBatch) Components() []int {
	if !cb.Mixed {
		return nil
	}
	out := make([]int, len(cb.Clips))
	for i := range out {
		out[i] = cb.Comp
	}
	return out
}

// ClipKey is the tar key of a tree's clip: its video's key without its
// extension, "/seg" and its segment's number in the video, six digits.
func ClipKey(d *video.Dataset, c clips.Clip) string {
	key := d.Videos[c.Video].Key
	if i := strings.LastIndexByte(key, '.'); i > strings.LastIndexByte(key, '/') {
		key = key[:i]
	}
	return fmt.Sprintf("%s/seg%06d", key, c.Segment)
}

// Without returns clip batch b, whose content is old, served without the
// clips that need a GOP or row at read positions missing (ascending: its
// chunk is damaged at rest), with its content. Its Missing are the clips'
// positions, MissingKeys their keys; its ETag is a partial one
// (layout.Batch.Partial).
func (old *ClipBatch) Without(b *layout.Batch, missing []int) (*layout.Batch, *ClipBatch) {
	if len(missing) == 0 {
		return b, old
	}
	gone := make(map[int]bool, len(missing))
	for _, pos := range missing {
		gone[pos] = true
	}
	cb := *old
	cb.Clips, cb.Keys, cb.Pos = nil, nil, nil
	var lost []int
	var keys []string
	for i, c := range old.Clips {
		out := false
		for _, g := range c.GOPs {
			out = out || gone[old.GOPs[g]]
		}
		if c.Row >= 0 {
			out = out || gone[old.Rows[c.Row]]
			for _, st := range c.Streams {
				for _, r := range st.Rows {
					if k, ok := old.Rows[r]; ok && !st.Camera {
						out = out || gone[k]
					}
				}
			}
		}
		if out {
			lost = append(lost, i)
			keys = append(keys, old.Keys[i])
			continue
		}
		cb.Clips = append(cb.Clips, c)
		cb.Keys = append(cb.Keys, old.Keys[i])
		if old.Pos != nil {
			cb.Pos = append(cb.Pos, old.Pos[i])
		}
	}
	return b.Partial(&cb, lost, keys), &cb
}

// WithoutAt returns clip batch b, whose content is old, served without
// also its clips at indexes at (of old.Clips, ascending): clips whose
// video did not decode (skip mode). Their positions in the batch as laid
// out join Missing, in order, with their keys; its ETag is a partial one,
// as Without's.
func (old *ClipBatch) WithoutAt(b *layout.Batch, at []int) *layout.Batch {
	if len(at) == 0 {
		return b
	}
	type left struct {
		pos int
		key string
	}
	out := make([]left, 0, len(b.Missing)+len(at))
	was := make(map[int]bool, len(b.Missing))
	for k, p := range b.Missing {
		out = append(out, left{p, b.MissingKeys[k]})
		was[p] = true
	}
	cb := *old
	cb.Clips, cb.Keys, cb.Pos = nil, nil, nil
	pos := 0 // the batch position of old's clip i: the i-th not missing
	for i, c := range old.Clips {
		for was[pos] {
			pos++
		}
		if _, drop := slices.BinarySearch(at, i); drop {
			out = append(out, left{pos, old.Keys[i]})
		} else {
			cb.Clips = append(cb.Clips, c)
			cb.Keys = append(cb.Keys, old.Keys[i])
			if old.Pos != nil {
				cb.Pos = append(cb.Pos, old.Pos[i])
			}
		}
		pos++
	}
	slices.SortFunc(out, func(x, y left) int { return x.pos - y.pos })
	missing, keys := make([]int, len(out)), make([]string, len(out))
	for k, l := range out {
		missing[k], keys[k] = l.pos, l.key
	}
	return b.Partial(&cb, missing, keys)
}

// clipInfo describes a clip job's epoch in /epoch/N.
func clipInfo(cs *ClipSpace) *api.ClipInfo {
	d := cs.Dataset()
	ci := &api.ClipInfo{Kind: d.Kind, Units: len(cs.Counts()), Videos: len(d.Videos), Frames: cs.Job.Frames, Layout: cs.Job.LayoutName()}
	for _, w := range cs.Windows() {
		ci.Windows = append(ci.Windows, api.ClipWindowInfo{Key: w.Key, Camera: d.LeRobot != nil && slices.Contains(d.LeRobot.Cameras, w.Key), Deltas: w.Deltas})
	}
	return ci
}
