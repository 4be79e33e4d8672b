package reader

import (
	"context"
	"errors"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cluster/peerreq"
	"github.com/brandgw/brand/internal/cluster/transport"
)

// Figures are what this node's cache did for a read, or for one part of a
// batch's: the samples served, the distinct chunks read through it (in
// first-use order), how many of them it loaded and their bytes in the
// cache, DiskBytes of those from the disk tier, the rest from the store;
// StoreBytes is what the loads from the store read from it — their
// chunks' store sizes (catalog.Dataset.StoreSize), which for a dataset
// served in place are their store extents, not the decoded bytes, and
// StoreGETs the requests they sent (catalog.Dataset.StoreGETs).
type Figures struct {
	Samples     int
	Chunks      []int
	Loads       int
	LoadedBytes int64
	DiskBytes   int64
	StoreBytes  int64
	StoreGETs   int64
}

// ReadBatch reads a batch — of one dataset, or a mixture's several parts
// — and returns its samples in the batch's order, complete and verified,
// but for those of chunks damaged at rest in skip mode: Result.MissingPos
// names their batch positions, Result.PerPart what each part's read cost.
//
// One part is read as Read reads it. Several parts are read, on a gateway
// without peers, under one pin of the cache (ReadTogether), as one
// dataset's batch is: no part is copied out. When that cannot be done —
// on a cluster, when the parts' chunks do not fit in the cache together,
// or when one of them is damaged at rest — the parts are read one at a
// time, each through Read (peers, the disk tier and damage handling
// included), and every part but the largest is copied out before the next
// is read, so that a batch never holds one part's pins while it waits for
// room for another's. The largest is written from the cache. The other
// parts' chunks that this node reads start loading before the first part
// is read (Config.Preload), so that the parts' loads overlap as one batch's
// do.
func (r *Reader) ReadBatch(ctx context.Context, b *layout.Batch) (*Result, error) {
	switch {
	case len(b.Parts) == 0: // an empty slice of a short final batch
		return &Result{r: r, Parts: make([][]byte, 0, 1)}, nil
	case len(b.Parts) == 1:
		res, err := r.Read(ctx, Request{Samples: b.Parts[0].Samples, Origin: OriginOf(b, 0), Fetched: r.takeFetched(ctx, b).part(0)})
		if err != nil {
			return nil, err
		}
		f := res.Figures
		f.Samples = len(b.Parts[0].Samples.IDs) - len(res.MissingPos)
		res.PerPart = []Figures{f}
		return res, nil // one part: its positions are the batch's
	}
	if r.remote.Nodes() < 2 {
		res, err := r.readTogether(ctx, b)
		if !errors.Is(err, ErrNotTogether) {
			return res, err
		}
	}
	return r.readInTurn(ctx, b)
}

// fetched are a batch's samples fetched from peers before its read, per part.
type fetched [][][]byte

func (f fetched) part(p int) [][]byte {
	if p < len(f) {
		return f[p]
	}
	return nil
}

// takeFetched takes the samples fetched from peers for b while the batch
// before it was read (route's next batch), if some part reads a chunk another node is the source of (a fetch of none is
// not waited for).
func (r *Reader) takeFetched(ctx context.Context, b *layout.Batch) fetched {
	if r.remote.Nodes() < 2 {
		return nil
	}
	for _, part := range b.Parts {
		for _, c := range part.Samples.Chunks {
			if !r.remote.Local(part.Samples.DS, c) {
				return r.remote.TakeNext(ctx, b.ETag)
			}
		}
	}
	return nil
}

// OriginOf is the job stream and position part p's samples are for, told
// to the nodes they are fetched from: for this batch's read and for the
// next batch's samples fetched ahead of it (visit).
func OriginOf(b *layout.Batch, p int) *transport.Origin {
	part := b.Parts[p]
	return &transport.Origin{Stream: peerreq.Stream(part.Stream), Epoch: part.Epoch, Pos: part.First, Weight: b.Job.Weight, Transform: TransformOf(b)}
}

// TransformOf is the pipeline a batch's samples are asked of their nodes
// through: its job's, for samples served as stored or transformed; none
// for a batch whose content is made from what it reads (layout.Content:
// GOPs or documents, which this node's clip or pack stage reads as
// stored).
func TransformOf(b *layout.Batch) transport.Transform {
	if b.Content != nil {
		return transport.Transform{}
	}
	return transport.Transform{Name: b.Job.Transform, Fingerprint: b.Job.TransformFingerprint}
}

// readTogether reads a batch's parts under one pin (ReadTogether) and
// puts their samples in the batch's order.
func (r *Reader) readTogether(ctx context.Context, b *layout.Batch) (*Result, error) {
	reqs := make([]Request, len(b.Parts))
	for p, part := range b.Parts {
		reqs[p] = Request{Samples: part.Samples}
	}
	res, parts, err := r.ReadTogether(ctx, reqs)
	if err != nil {
		return nil, err
	}
	body := make([][]byte, len(b.Take), len(b.Take)+1)
	for i, t := range b.Take {
		body[i] = parts[t.Part].Parts[t.At]
	}
	res.Parts = body
	res.PerPart = make([]Figures, len(parts))
	for p, part := range parts {
		res.PerPart[p] = Figures{Samples: len(b.Parts[p].Samples.IDs), Chunks: part.Chunks, Loads: part.Loads,
			LoadedBytes: part.LoadedBytes, DiskBytes: part.DiskBytes, StoreBytes: part.StoreBytes, StoreGETs: part.StoreGETs}
	}
	return res, nil
}

// readInTurn reads a batch's parts one at a time (see ReadBatch).
func (r *Reader) readInTurn(ctx context.Context, b *layout.Batch) (*Result, error) {
	// The largest part is read last and written from the cache; the
	// others are copied out.
	seq := make([]int, len(b.Parts))
	last := 0
	for p := range b.Parts {
		seq[p] = p
		if b.Parts[p].Samples.Bytes > b.Parts[last].Samples.Bytes {
			last = p
		}
	}
	seq[last], seq[len(seq)-1] = seq[len(seq)-1], seq[last]
	r.warm(b, seq[0])
	fetched := r.takeFetched(ctx, b)
	out := &Result{r: r, PerPart: make([]Figures, len(b.Parts))}
	data := make([][][]byte, len(b.Parts)) // per part, per sample: its bytes (nil: missing)
	for k, p := range seq {
		part := b.Parts[p]
		res, err := r.Read(ctx, Request{Samples: part.Samples, Origin: OriginOf(b, p), Fetched: fetched.part(p)})
		if err != nil {
			out.Release()
			return nil, err
		}
		f := res.Figures
		f.Samples = len(part.Samples.IDs) - len(res.MissingPos)
		out.PerPart[p] = f
		out.Loads += f.Loads
		out.LoadedBytes += f.LoadedBytes
		out.DiskBytes += f.DiskBytes
		out.StoreBytes += f.StoreBytes
		out.StoreGETs += f.StoreGETs
		d := make([][]byte, len(part.Samples.IDs))
		j, m := 0, 0
		for i := range d {
			if m < len(res.MissingPos) && res.MissingPos[m] == i {
				m++
				continue
			}
			d[i] = res.Parts[j]
			j++
		}
		if k < len(seq)-1 {
			// Copied out, and the pins given back, before the next part.
			if err := r.copyOut(ctx, d, res, out); err != nil {
				out.Release()
				return nil, err
			}
		} else {
			out.release = append(out.release, res.release...)
			res.release = nil
			out.pinned = res.pinned
		}
		data[p] = d
	}
	out.Parts = make([][]byte, 0, len(b.Take)+1)
	for i, t := range b.Take {
		if d := data[t.Part][t.At]; d != nil {
			out.Parts = append(out.Parts, d)
			out.Bytes += int64(len(d))
		} else {
			out.MissingPos = append(out.MissingPos, i)
		}
	}
	return out, nil
}

// copyOut copies a part's samples d out of the result res holds, within
// the copy budget, points d into the copy, releases res and gives out the
// copy to release.
func (r *Reader) copyOut(ctx context.Context, d [][]byte, res *Result, out *Result) error {
	var n int64
	for _, s := range d {
		n += int64(len(s))
	}
	buf, release, err := r.copies.Buffer(ctx, n)
	if err != nil {
		res.Release()
		return err
	}
	for i, s := range d {
		if s != nil {
			buf = append(buf, s...)
			d[i] = buf[len(buf)-len(s) : len(buf) : len(buf)]
		}
	}
	res.Release()
	out.release = append(out.release, release)
	r.partsCopied.Inc()
	return nil
}

// warm starts loading, without pinning them, the chunks this node reads
// of every part of b but first, so that each part's read finds its chunks
// resident or loading. A chunk with no free slot to load in is left to
// the part's own read; what a warm load reads counts as prefetched for
// its part's stream.
func (r *Reader) warm(b *layout.Batch, first int) {
	for p, part := range b.Parts {
		if p == first {
			continue
		}
		ds := part.Stream.DS
		for _, c := range part.Samples.Chunks {
			if !r.remote.Local(ds, c) {
				continue
			}
			r.preload.Load(ds.ChunkRequest(c), func(res chunkcache.PrefetchResult) {
				if res == chunkcache.PrefetchLoaded || res == chunkcache.PrefetchLoadedBelow {
					r.tally.Prefetched(part.Stream, part.Epoch, c, ds.ChunkSize(c), res == chunkcache.PrefetchLoadedBelow)
				}
			})
		}
	}
}
