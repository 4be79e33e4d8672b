package reader

import (
	"context"
	"errors"
	"fmt"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
)

// ErrNotTogether marks reads ReadTogether leaves to the caller to make one
// at a time: their chunks do not fit in the cache together, one of them
// is damaged at rest, or together they exceed the read bound.
var ErrNotTogether = errkind.New(errkind.Internal, "not read together")

// Part is what a read made together read of one batch part
// (layout.Part: one request of ReadTogether): its samples' bytes, in its
// order, and what the cache did for it (as Result has them).
type Part struct {
	Parts       [][]byte
	Bytes       int64
	Chunks      []int
	Loads       int
	LoadedBytes int64
	DiskBytes   int64
	StoreBytes  int64
	StoreGETs   int64
}

// ReadTogether reads several requests' samples — a mixture batch's parts,
// each of its own dataset — through this node's cache under one
// acquisition, as one batch's chunks are acquired: the cache pins all
// their chunks at once, so no request holds pins while it waits for
// another's room, and no request's samples are copied out to make room
// for the next. It reads every sample on this node: it is for a gateway
// without peers, whose reads Read would make through its cache alone.
//
// The Result holds the pins of all the parts (its Parts are theirs, back
// to back, in the requests' order; Relieve copies what is left of them
// out); each Part has one request's samples and figures. When the reads
// cannot be made together — their chunks do not fit in the cache
// together, one of them is damaged at rest, or together they exceed the
// read bound — it returns an error wrapping ErrNotTogether, holding
// nothing, and the caller reads them one at a time with Read, which
// copes with each of those.
func (r *Reader) ReadTogether(ctx context.Context, reqs []Request) (*Result, []Part, error) {
	var n, total int
	var bytes int64
	for _, q := range reqs {
		n += len(q.Samples.IDs)
		total += len(q.Samples.Chunks)
		bytes += q.Samples.Bytes
	}
	if bytes > r.maxBytes {
		return nil, nil, fmt.Errorf("%w: %d bytes, over the server's --max-batch-bytes (%d)", ErrNotTogether, bytes, r.maxBytes)
	}
	creqs := make([]chunkcache.Request, 0, total)
	base := make([]int, len(reqs)+1) // request k's chunks are creqs[base[k]:base[k+1]]
	for k, q := range reqs {
		base[k] = len(creqs)
		creqs = append(creqs, requests(q.Samples)...)
	}
	base[len(reqs)] = len(creqs)
	lease, err := r.acquire(ctx, creqs)
	_, atRest := catalog.AtRest(err)
	switch {
	case errors.Is(err, chunkcache.ErrTooLarge) || atRest || errors.Is(err, catalog.ErrGrown):
		return nil, nil, fmt.Errorf("%w: %w", ErrNotTogether, err)
	case err != nil:
		return nil, nil, err
	}
	all := make([][]byte, 0, n+1) // room for a trailer, as Read's
	parts := make([]Part, len(reqs))
	for k, q := range reqs {
		s := q.Samples
		from := len(all)
		for j, in := range s.Info {
			all = append(all, sampleBytes(lease.Bytes(base[k]+s.Slot[j]), in, s.DS.Index.Deferred()))
		}
		p := &parts[k]
		p.Parts, p.Bytes, p.Chunks = all[from:len(all):len(all)], s.Bytes, s.Chunks
		if s.DS.Index.Deferred() {
			for _, d := range p.Parts {
				if _, ok := format.SampleDamage(d); ok {
					// A sample damaged at rest: Read fails or skips it.
					lease.Release()
					return nil, nil, fmt.Errorf("%w: a sample of dataset %s is damaged at rest", ErrNotTogether, s.DS.Name)
				}
			}
			// Sized once decoded: here.
			bytes -= s.Bytes
			p.Bytes = 0
			for _, d := range p.Parts {
				p.Bytes += int64(len(d))
			}
			bytes += p.Bytes
		}
		p.Loads, p.LoadedBytes, _, p.DiskBytes = lease.LoadedIn(base[k], base[k+1])
		p.StoreBytes, p.StoreGETs = storeBytes(lease, base[k], s)
	}
	if bytes > r.maxBytes {
		lease.Release()
		return nil, nil, fmt.Errorf("%w: %d bytes, over the server's --max-batch-bytes (%d)", ErrNotTogether, bytes, r.maxBytes)
	}
	res := &Result{r: r, Parts: all, Bytes: bytes, release: []func(){lease.Release}, pinned: bytes > 0}
	res.Loads, res.LoadedBytes = lease.Loaded()
	_, res.DiskBytes = lease.Below()
	for _, p := range parts {
		res.StoreBytes += p.StoreBytes
		res.StoreGETs += p.StoreGETs
	}
	r.remote.Delivered(bytes, 0)
	return res, parts, nil
}
