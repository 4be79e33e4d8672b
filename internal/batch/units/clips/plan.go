package clips

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/format/video/clips"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/tensorize"
	"github.com/brandgw/brand/internal/cache/gopcache"
	"github.com/brandgw/brand/internal/job/plans"
	"github.com/brandgw/brand/internal/job/query"
)

// DefaultFrameCPU is the CPU a decoded frame costs a plan that has
// measured none, at 640×360 (docs/transform.md §12.7: H.264 to RGB on
// this project's machine), scaled by a video's pixels.
const DefaultFrameCPU = 1220 * time.Microsecond

// maxClipPlan bounds a clip plan's work: the frames of every clip of
// every epoch planned.
const maxClipPlan = 1 << 26

// Plan answers /plan for a clip job (plans.UnitPlanner): the exact demand of its
// epochs — each global batch's clips drawn as the gateway draws them, the
// chunks holding their GOPs in first-use order — simulated through the
// plan's cache (the nodes' caches together on a cluster, whose nodes read
// each chunk once between them), and a "clips" section: per epoch its
// clips, the GOPs they need and those GOPs' bytes (the covering bytes),
// the store bytes the gateway's policy reads for them, and what decoding
// them takes on one node: each rank's batch of each global batch, in
// order, through the clip stage's rule (a gopcache.Book of the node's
// --gop-cache-bytes, each GOP a batch wants taken from it or decoded,
// tensorize.Entries, FillRuns), the GOPs decoded, the frames of their
// runs (all and a clip), the GOPs taken decoded, and the frames decoding
// each clip alone would pass through (a loader decoding per sample: the
// reuse is that over the frames decoded); and their CPU at this node's
// measured cost a frame (DecodeCost), or DefaultFrameCPU scaled by the
// frames' pixels before it has decoded any.
// Its epochs and batches_per_epoch are its clips' and batches', as
// /epoch/N counts them (api.PlanEpoch): an epoch of fewer clips than one
// global batch with drop_last serves none, and its plan reads nothing.
func (u *Unit) Plan(ctx context.Context, t plans.Tools, src layout.Source, q query.Query) (any, error) {
	ds := src.DS
	cs, err := u.Space(ds, q.Job.Clip.Key())
	if err != nil {
		return nil, err
	}
	d := cs.Dataset()
	epochs := q.Plan.Epochs
	if epochs == 0 {
		epochs = plans.DefaultEpochs
	}
	perClip := q.Job.Clip.Frames
	for _, w := range cs.Windows() {
		perClip += len(w.Deltas)
	}
	if work := int64(cs.Samples()) * int64(epochs) * int64(max(perClip, 1)); work > maxClipPlan {
		return nil, fmt.Errorf("%w: a plan of %d epochs of %d clips draws %d frames; a gateway plans at most %d", query.ErrBadRequest, epochs, cs.Samples(), work, int64(maxClipPlan))
	}
	perFrame, measured := DefaultFrameCPU, false
	if c, ok := t.DecodeCost(); ok {
		perFrame, measured = c, true
	}
	job := q.Job
	job.Offset = 0
	stream := layout.StreamOf(ds, job)
	cp := &api.ClipPlan{Kind: d.Kind, Clips: cs.Samples(), CPUPerFrameMs: float64(perFrame) / 1e6, Measured: measured,
		GOPWindow: q.Job.Clip.GOPWindow, GOPCacheBytes: u.cfg.GOPCacheBytes}
	book := gopcache.NewBook(u.cfg.GOPCacheBytes)
	var trace api.PlanTrace
	var served []api.PlanEpoch // the epochs' clips and batches, as /epoch/N's (its order's clips)
	// The orders of the epochs planned and of the one after: the use
	// table keys a chunk read earlier in an epoch by the next one's.
	for e := range epochs + 1 {
		epoch := uint64(q.Plan.FirstEpoch + e)
		ep, err := u.base.Epoch(stream, epoch)
		if err != nil {
			return nil, err
		}
		o := api.PlanOrder{Epoch: int(epoch), Samples: ep.NumSamples(), ChunkWindows: ep.ChunkWindow}
		for w := range ep.NumWindows() {
			o.WindowStarts = append(o.WindowStarts, ep.WindowStart(w))
		}
		trace.Orders = append(trace.Orders, o)
	}
	for e := range epochs {
		epoch := uint64(q.Plan.FirstEpoch + e)
		ep, err := u.base.Epoch(stream, epoch)
		if err != nil {
			return nil, err
		}
		var order []int
		for w := range ep.NumWindows() {
			order = append(order, ep.Window(w)...)
		}
		n := len(order)
		served = append(served, api.PlanEpoch{Epoch: int(epoch), Samples: n, Batches: job.NumBatches(n)})
		pe := api.ClipPlanEpoch{Epoch: int(epoch)}
		gops := map[clips.GOP]bool{}
		var pixels float64
		for g := range job.NumBatches(n) {
			shares, err := job.AppendShares(nil, n, g)
			if err != nil {
				return nil, err
			}
			start, end, err := job.GlobalBatch(n, g)
			if err != nil {
				return nil, err
			}
			batch := api.PlanBatch{Epoch: int(epoch), Start: start, End: end}
			seen := map[int]bool{}
			at := start
			for _, share := range shares {
				rank := make([]tensorize.ClipSample, 0, share)
				for i, s := range order[at : at+share] {
					c, err := cs.Clip(job.Seed, epoch, s)
					if err != nil {
						return nil, err
					}
					h, err := u.horizonOf(stream, epoch, at+i)
					if err != nil {
						return nil, err
					}
					rank = append(rank, tensorize.ClipSample{Clip: c, Pos: at + i, Horizon: h})
					if err := readOrder(d, c, func(ch int) {
						if !seen[ch] {
							seen[ch] = true
							batch.Chunks = append(batch.Chunks, int32(ch))
						}
					}); err != nil {
						return nil, err
					}
					for _, gp := range c.GOPs {
						if !gops[gp] {
							gops[gp] = true
							pe.CoveringBytes += d.Videos[gp.Video].Track.GOPs[gp.GOP].Bytes
						}
					}
					pe.Clips++
					pe.Frames += int64(clipFrames(c))
					alone, _, err := decodeAlone(d, c)
					if err != nil {
						return nil, err
					}
					pe.FramesDecodedAlone += alone
				}
				f, err := decodeBatch(d, book, rank)
				if err != nil {
					return nil, err
				}
				pe.GOPsDecoded += f.gops
				pe.FramesDecoded += f.frames
				pe.GOPHits += f.hits
				pixels += f.pixels
				at += share
			}
			if len(batch.Chunks) > 0 {
				trace.Batches = append(trace.Batches, batch)
			}
		}
		pe.GOPs = len(gops)
		if measured {
			pe.DecodeCPUSeconds = float64(pe.FramesDecoded) * perFrame.Seconds()
		} else {
			pe.DecodeCPUSeconds = pixels * perFrame.Seconds() / (640 * 360)
		}
		if pe.Clips > 0 {
			pe.DecodeCPUPerClip = pe.DecodeCPUSeconds * 1e3 / float64(pe.Clips)
			pe.FramesDecodedPerClip = float64(pe.FramesDecoded) / float64(pe.Clips)
		}
		if pe.FramesDecoded > 0 {
			pe.Reuse = float64(pe.FramesDecodedAlone) / float64(pe.FramesDecoded)
		}
		cp.Epochs = append(cp.Epochs, pe)
	}
	o := q.Plan
	if o.Nodes > 1 {
		// Each chunk has one owner, which reads it once for the cluster:
		// the nodes' caches together hold what one of their size would.
		o.CacheBytes *= int64(o.Nodes)
	}
	return t.Run(ctx, func(ctx context.Context) (any, error) {
		sim, err := t.Planner().TracePlan(ctx, plans.Data(ds), trace, o)
		if err != nil {
			return nil, err
		}
		store, err := storeBytes(sim)
		if err != nil {
			return nil, err
		}
		for i := range cp.Epochs {
			pe := &cp.Epochs[i]
			pe.StoreBytes = store[pe.Epoch]
			if pe.CoveringBytes > 0 {
				pe.StoreOverCovering = float64(pe.StoreBytes) / float64(pe.CoveringBytes)
			}
		}
		return map[string]any{"clips": cp, "simulation": sim, "cache_bytes": o.CacheBytes, "nodes": max(o.Nodes, 1),
			"epochs": served, "batches_per_epoch": served[0].Batches}, nil
	})
}

// readOrder calls read with each chunk clip c reads, in the order a
// batch's read asks the cache for them (layout's layoutClips): its GOPs'
// chunks, then a LeRobot sample's anchor row's and its windows' rows'.
func readOrder(d *video.Dataset, c clips.Clip, read func(chunk int)) error {
	for _, g := range c.GOPs {
		read(d.ChunkOf(g.Video, g.GOP))
	}
	l := d.LeRobot
	if l == nil {
		return nil
	}
	rows := []int{c.Row}
	for _, st := range c.Streams {
		if !st.Camera {
			rows = append(rows, st.Rows...)
		}
	}
	for _, r := range rows {
		ch, _, ok := l.Row(r)
		if !ok {
			return fmt.Errorf("%w: row %d of a clip has no chunk", ErrClips, r)
		}
		read(ch)
	}
	return nil
}

// clipFrames is the frames a clip holds: a tree's, or a LeRobot sample's
// cameras'.
func clipFrames(c clips.Clip) int {
	n := len(c.Frames)
	for _, st := range c.Streams {
		n += len(st.Frames)
	}
	return n
}

// decoded is what decoding a batch's clips took: the GOPs decoded and
// the frames (and pixels) of their runs, and the GOPs taken decoded.
type decoded struct {
	gops, frames, hits int64
	pixels             float64
}

// decodeBatch is what the clip stage decodes for a rank's batch of clips
// cs on a node whose decoded-GOP cache is book: each GOP the clips want
// (tensorize.Entries, in the stage's order) taken from the book or
// decoded (tensorize.FillRuns of the frames the book says), then the
// batch's positions served.
func decodeBatch(d *video.Dataset, book *gopcache.Book, cs []tensorize.ClipSample) (decoded, error) {
	var f decoded
	read := map[clips.GOP]bool{}
	for _, c := range cs {
		for _, g := range c.Clip.GOPs {
			read[g] = true
		}
	}
	for _, e := range tensorize.Entries(d, cs) {
		t := &d.Videos[e.Key.Video].Track
		frames := ownFrames(e.Own)
		var dec gopcache.Decision
		if e.Horizon != nil {
			can := tensorize.Decodable(d, e.Key.Video, func(g clips.GOP) bool { return read[g] })
			dec = book.Acquire(e.Horizon, e.Key, e.Own, can, e.FrameBytes)
			frames = dec.Frames
		}
		if dec.Hit {
			f.hits++
			book.Release(e.Key)
			continue
		}
		spans, err := tensorize.FillRuns(t, e.Key.GOP, frames)
		if err != nil {
			return f, fmt.Errorf("%s: %w", d.Videos[e.Key.Video].Key, err)
		}
		for _, sp := range spans {
			k := int64(sp.End - sp.Start)
			f.frames += k
			f.gops += int64(tensorize.SpanGOPs(t, sp))
			f.pixels += float64(k) * float64(t.Width*t.Height)
		}
		if dec.Keep {
			book.Filled(e.Key)
			book.Release(e.Key)
		}
	}
	served := map[*gopcache.Horizon][]int{}
	for _, c := range cs {
		if c.Horizon != nil {
			served[c.Horizon] = append(served[c.Horizon], c.Pos)
		}
	}
	// In the horizons' order, as the node's cache serves them
	// (gopcache.Cache.Decide).
	hs := slices.SortedFunc(maps.Keys(served), func(a, b *gopcache.Horizon) int { return strings.Compare(a.ID, b.ID) })
	for _, h := range hs {
		book.Served(h, served[h])
	}
	return f, nil
}

// decodeAlone is what decoding clip c alone takes, as a loader that
// decodes each sample's frames does: each GOP's runs from its keyframe
// to the clip's last frame of it.
func decodeAlone(d *video.Dataset, c clips.Clip) (frames int64, gops int64, err error) {
	for g, pts := range tensorize.GOPFrames(d, c) {
		t := &d.Videos[g.Video].Track
		spans, err := tensorize.FillRuns(t, g.GOP, pts)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", d.Videos[g.Video].Key, err)
		}
		for _, sp := range spans {
			frames += int64(sp.End - sp.Start)
			gops += int64(tensorize.SpanGOPs(t, sp))
		}
	}
	return frames, gops, nil
}

// ownFrames are the frames uses want, ascending, each once.
func ownFrames(uses []gopcache.Use) []int64 {
	var out []int64
	for _, u := range uses {
		out = append(out, u.Frames...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// storeBytes are the store bytes per epoch of the gateway's policy in a
// TracePlan answer (its JSON: {"policy": {"epochs": [{"epoch",
// "backend_bytes"}]}}).
func storeBytes(sim any) (map[int]int64, error) {
	b, err := json.Marshal(sim)
	if err != nil {
		return nil, err
	}
	var r struct {
		Policy struct {
			Epochs []struct {
				Epoch        int   `json:"epoch"`
				BackendBytes int64 `json:"backend_bytes"`
			} `json:"epochs"`
		} `json:"policy"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, err
	}
	out := map[int]int64{}
	for _, e := range r.Policy.Epochs {
		out[e.Epoch] = e.BackendBytes
	}
	return out, nil
}
