package reader

import (
	"context"
	"errors"

	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cache/assembly"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
)

// A read whose chunks do not fit in the cache at once — a small cache, a
// large batch, a batch across a window boundary — is assembled in parts:
// its chunks are pinned a group at a time, each group no larger than half
// the cache (or one chunk, if a chunk is larger than that: package
// assembly's rule, which the planner simulates too), and the samples are
// copied out of each group into one buffer before the next is pinned. A
// chunk larger than the whole cache is read through, into a buffer of
// the Through budget (the memory manager's decodes) held until its
// samples are copied out, and checked as any load is. The read is complete and
// verified before it returns, as every read is: slower, and it costs a
// copy, but never partial.
//
// Room to assemble (Config.Assemblers reads at once) is held only while
// the read assembles; the copy counts against the copy budget until the
// response carrying it is written, so a client that stops reading holds
// memory, bounded, but never another client's turn to assemble.

// assemble reads the samples sub (at positions pos of the request) a
// group of chunks at a time into one buffer, and points data into it.
func (r *Reader) assemble(ctx context.Context, sub layout.Samples, pos []int, data [][]byte, res *Result, skip, count bool) (missing []int, err error) {
	leave, err := r.assembly.Acquire(ctx, 1)
	if err != nil {
		return nil, err
	}
	defer leave()
	copyOut, err := r.copier(ctx, sub, pos, data, res)
	if err != nil {
		return nil, err
	}
	res.InParts = true
	r.inParts.Inc()
	dropped := make([]bool, len(sub.Chunks))
	capacity := r.cache.Capacity()
	size := func(i int) int64 { return sub.DS.ChunkSize(sub.Chunks[i]) }
	for g := range assembly.Groups(len(sub.Chunks), size, capacity) {
		if err := r.assembleGroup(ctx, sub, g.From, g.To, g.Bytes > capacity, dropped, copyOut, skip, res); err != nil {
			return nil, err
		}
		res.Chunks = append(res.Chunks, sub.Chunks[g.From:g.To]...)
	}
	for s, d := range dropped {
		if !d {
			continue
		}
		var at []int
		for j := range sub.IDs {
			if sub.Slot[j] == s {
				missing = append(missing, pos[j])
				at = append(at, j)
			}
		}
		if count {
			r.skippedLog(sub.Pick(at))
		}
	}
	return missing, nil
}

// readThrough reads chunk slot s of sub, larger than the whole cache,
// into a buffer of the Through budget held while its samples are copied
// out. With skip a chunk damaged at rest is marked dropped.
func (r *Reader) readThrough(ctx context.Context, sub layout.Samples, s int, dropped []bool,
	copyOut func(s int, chunk []byte) error, skip bool, res *Result) error {
	req := sub.DS.ChunkRequest(sub.Chunks[s])
	buf, release, below, err := r.loadThrough(ctx, req)
	if errors.Is(err, catalog.ErrGrown) {
		// Sized anew: read it through again, once.
		req = sub.DS.ChunkRequest(sub.Chunks[s])
		buf, release, below, err = r.loadThrough(ctx, req)
	}
	if _, ok := damaged(err, sub, skip); ok {
		dropped[s] = true
		return nil
	}
	if err != nil {
		return err
	}
	defer release()
	res.Loads++
	res.LoadedBytes += req.Size
	if below {
		res.DiskBytes += req.Size
	} else {
		res.StoreBytes += sub.DS.StoreSize(sub.Chunks[s])
		res.StoreGETs += int64(sub.DS.StoreGETs(sub.Chunks[s]))
	}
	return copyOut(s, buf)
}

// loadThrough reads the chunk req names into a buffer of the Through
// budget, reserved before a byte is read; on success release gives it
// back, on error nothing is held.
//
// A load that takes memory of the same budget beside the buffer (a chunk
// served in place, decoded as it is read: workingLoader) has it reserved
// here with the buffer, at once, and is told so: asked by the load while
// the buffer's room was held, the two waited on each other.
func (r *Reader) loadThrough(ctx context.Context, req chunkcache.Request) (buf []byte, release func(), below bool, err error) {
	var extra int64
	if wl, ok := r.loader.(workingLoader); ok {
		extra = wl.Working(req.Key)
	}
	if extra > 0 {
		release, err = r.through.Reserve(ctx, req.Size+extra)
		if err != nil {
			return nil, nil, false, err
		}
		buf = make([]byte, req.Size)
		ctx = catalog.WithWorkingHeld(ctx)
	} else {
		buf, release, err = r.through.Buffer(ctx, req.Size)
		if err != nil {
			return nil, nil, false, err
		}
		buf = buf[:req.Size]
	}
	if tl, ok := r.loader.(chunkcache.TieredLoader); ok {
		below, err = tl.LoadTiered(ctx, req.Key, buf)
	} else {
		err = r.loader.Load(ctx, req.Key, buf)
	}
	if err != nil {
		release()
		return nil, nil, false, err
	}
	return buf, release, below, nil
}

// unbounded is a Through budget of no bound: a fresh buffer each time.
type unbounded struct{}

func (unbounded) Buffer(_ context.Context, n int64) ([]byte, func(), error) {
	return make([]byte, 0, n), func() {}, nil
}

func (unbounded) Reserve(context.Context, int64) (func(), error) { return func() {}, nil }

// copier returns what copies the samples of sub's chunk slot s out of its
// bytes into the copy budget, pointing data at them. Samples whose sizes
// the index holds take one buffer, of the budget's bytes, before any chunk
// is pinned; samples of chunks decoded in place are sized once decoded,
// so each chunk's take a buffer of their own when it is.
func (r *Reader) copier(ctx context.Context, sub layout.Samples, pos []int, data [][]byte, res *Result) (func(s int, chunk []byte) error, error) {
	if sub.DS.Index.Deferred() {
		return func(s int, chunk []byte) error {
			var n int64
			for j, in := range sub.Info {
				if sub.Slot[j] == s {
					_, l, _ := format.Entry(chunk, int(in.Offset))
					n += l
				}
			}
			buf, release, err := r.copies.Buffer(ctx, n)
			if err != nil {
				return err
			}
			res.release = append(res.release, release)
			for j, in := range sub.Info {
				if sub.Slot[j] == s {
					start := len(buf)
					buf = append(buf, sampleBytes(chunk, in, true)...)
					data[pos[j]] = buf[start:len(buf):len(buf)]
				}
			}
			return nil
		}, nil
	}
	n := sub.Bytes
	buf, release, err := r.copies.Buffer(ctx, n)
	if err != nil {
		return nil, err
	}
	buf = buf[:n]
	res.release = append(res.release, release)
	at := make([]int64, len(sub.IDs)) // each sample's offset in buf
	var off int64
	for j, in := range sub.Info {
		at[j] = off
		off += in.Length
	}
	return func(s int, chunk []byte) error {
		for j, in := range sub.Info {
			if sub.Slot[j] == s {
				o, length := in.Offset, in.Length
				b := buf[at[j] : at[j]+length : at[j]+length]
				copy(b, chunk[o:o+length])
				data[pos[j]] = b
			}
		}
		return nil
	}, nil
}

// assembleGroup pins chunk slots [from, to) of sub, or reads the one chunk
// through when it is larger than the whole cache, and copies their
// samples out. With skip a chunk damaged at rest is marked dropped and
// the rest of the group pinned again.
func (r *Reader) assembleGroup(ctx context.Context, sub layout.Samples, from, to int, through bool, dropped []bool,
	copyOut func(s int, chunk []byte) error, skip bool, res *Result) error {
	if through {
		return r.readThrough(ctx, sub, from, dropped, copyOut, skip, res)
	}
	for grown := 0; ; {
		var slots []int
		for s := from; s < to; s++ {
			if !dropped[s] {
				slots = append(slots, s)
			}
		}
		if len(slots) == 0 {
			return nil
		}
		reqs := make([]chunkcache.Request, len(slots))
		for i, s := range slots {
			reqs[i] = sub.DS.ChunkRequest(sub.Chunks[s])
		}
		lease, err := r.cache.Acquire(ctx, reqs)
		if err != nil {
			if s, ok := damaged(err, sub, skip); ok && !dropped[s] {
				dropped[s] = true
				continue
			}
			if errors.Is(err, catalog.ErrGrown) && grown < maxGrown {
				grown++
				continue
			}
			return err
		}
		n, nb := lease.Loaded()
		_, db := lease.Below()
		res.Loads += n
		res.LoadedBytes += nb
		res.DiskBytes += db
		for i := range lease.StoreLoads(0, len(slots)) {
			res.StoreBytes += sub.DS.StoreSize(sub.Chunks[slots[i]])
			res.StoreGETs += int64(sub.DS.StoreGETs(sub.Chunks[slots[i]]))
		}
		defer lease.Release()
		for i, s := range slots {
			if err := copyOut(s, lease.Bytes(i)); err != nil {
				return err
			}
		}
		return nil
	}
}
