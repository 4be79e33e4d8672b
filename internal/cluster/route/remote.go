package route

import (
	"context"
	"sync"

	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cluster/transport"
)

// ReadRemote fills data[i] for the positions of smp whose chunk's source
// is another node, one request per node, and returns the positions this
// node reads itself and those their owner left out (their chunk is
// damaged at rest). A node that fails is skipped and its samples asked of
// the next node of their chunks' rankings, ending with this node, which
// reads the store: a peer's loss costs time, never the read. Samples
// fetched before the read (fetched, by position; see TakeNext) are used first.
func (r *Router) ReadRemote(ctx context.Context, smp layout.Samples, origin *transport.Origin, fetched [][]byte, data [][]byte) (local, missing []int, err error) {
	skip := map[int]bool{}
	skipped := func(k int) bool { return skip[k] }
	src := make([]int, len(smp.Chunks))
	remote := false
	for i, c := range smp.Chunks {
		src[i] = r.Source(smp.DS, c, skipped)
		remote = remote || src[i] != r.self
	}
	if remote && len(fetched) == len(data) {
		n := 0
		for i, d := range fetched {
			if d != nil {
				data[i] = d
				n++
			}
		}
		r.nextUsed.Add(int64(n))
	}
	gone := make([]bool, len(data)) // left out by their owner
	for remote {
		failed := r.fetchFrom(ctx, smp, origin, src, data, gone)
		if len(failed) == 0 {
			break
		}
		if err := ctx.Err(); err != nil {
			return nil, nil, err
		}
		for k := range failed {
			skip[k] = true
		}
		for i, c := range smp.Chunks {
			if failed[src[i]] {
				src[i] = r.Source(smp.DS, c, skipped)
			}
		}
	}
	for i := range data {
		switch {
		case gone[i]:
			missing = append(missing, i)
		case src[smp.Slot[i]] == r.self:
			local = append(local, i)
		}
	}
	return local, missing, nil
}

// fetchFrom asks each source node, at once, for the samples at positions
// of smp it is the source of and that data lacks, and returns the nodes
// whose fetch failed. Positions whose owner left the sample out are
// marked in gone.
func (r *Router) fetchFrom(ctx context.Context, smp layout.Samples, origin *transport.Origin, src []int, data [][]byte, gone []bool) (failed map[int]bool) {
	type fetch struct {
		req transport.Request
		pos [][]int // per requested ID, the positions it fills
	}
	byNode := map[int]*fetch{}
	at := map[int]int{} // sample ID → its index in its node's request
	for i, id := range smp.IDs {
		k := src[smp.Slot[i]]
		if k == r.self || data[i] != nil || gone[i] {
			continue
		}
		f := byNode[k]
		if f == nil {
			f = &fetch{req: transport.Request{DS: smp.DS, Origin: origin}}
			byNode[k] = f
		}
		// A sample drawn twice (importance) is asked for once.
		j, ok := at[id]
		if !ok {
			j = len(f.req.IDs)
			at[id] = j
			f.req.IDs = append(f.req.IDs, id)
			f.req.Info = append(f.req.Info, smp.Info[i])
			f.pos = append(f.pos, nil)
		}
		f.pos[j] = append(f.pos[j], i)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k, f := range byNode {
		f.req.Origin = r.originFor(k, origin, len(f.req.IDs))
		wg.Go(func() {
			rep, err := r.peers.Fetch(ctx, k, f.req)
			if err != nil {
				mu.Lock()
				if failed == nil {
					failed = map[int]bool{}
				}
				failed[k] = true
				mu.Unlock()
				return
			}
			for j, ps := range f.pos {
				for _, i := range ps {
					data[i] = rep.Data[j]
					gone[i] = rep.Data[j] == nil
				}
			}
		})
	}
	wg.Wait()
	return failed
}

// Fetch is one part of a next batch to fetch: its samples and the job
// stream and position they are for.
type Fetch struct {
	Samples layout.Samples
	Origin  *transport.Origin
}

// FetchNext starts fetching, in the background, the remote samples of
// the batch next lays out (the same rank's next batch), part by part, to
// be found under key by TakeNext; nothing if they are being fetched
// already. The key is claimed before FetchNext returns, so that a read
// of that batch that starts before the fetch ends waits for it rather
// than fetching the same samples again. Failures are left to the read,
// which fetches what is missing with failover.
//
// Laying the batch out is bounded by the peer timeout; each fetch by its
// own (transport.Nodes.Fetch), so that a peer that does not answer in
// time is counted, logged and held down as on a batch's read — a bound
// of the whole around the fetches would end them first and leave the
// peer to fail every batch in turn.
func (r *Router) FetchNext(key string, next func(ctx context.Context) ([]Fetch, error)) {
	c, ok := r.next.Claim(key)
	if !ok {
		return
	}
	started := r.part.Go(func(ctx context.Context) {
		var data [][][]byte
		var size int64
		lctx, cancel := context.WithTimeout(ctx, r.timeout)
		parts, err := next(lctx)
		cancel()
		if err == nil {
			data = make([][][]byte, len(parts))
			none := func(int) bool { return false }
			for p, f := range parts {
				smp := f.Samples
				src := make([]int, len(smp.Chunks))
				for i, c := range smp.Chunks {
					src[i] = r.Source(smp.DS, c, none)
				}
				data[p] = make([][]byte, len(smp.IDs))
				r.fetchFrom(ctx, smp, f.Origin, src, data[p], make([]bool, len(smp.IDs)))
				for _, d := range data[p] {
					size += int64(len(d))
				}
			}
		}
		r.next.Finish(c, data, size)
	})
	if !started {
		r.next.Abandon(c)
	}
}

// TakeNext returns the samples fetched under key (FetchNext), per part of the
// batch, waiting for a fetch still under way (until ctx ends); nil if
// there are none.
func (r *Router) TakeNext(ctx context.Context, key string) [][][]byte {
	data, _, _ := r.next.Take(ctx, key)
	return data
}
