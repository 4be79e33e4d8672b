package reader

import (
	"context"
	"fmt"
	"net"

	"github.com/brandgw/brand/internal/cache/chunkcache"
)

// ReadEntries pins raw cache entries — blocks of objects a store serves as
// they are (chunkcache.Object keys), which no index describes and so no
// sample layout slices — and returns their bytes, each entry's whole, in
// the order of reqs. It is a read as Read's are, under the same bounds:
// the read bound (Config.MaxBytes), the loads in turn of a cache several
// jobs share, the queue for room (chunkcache.ErrBusy), and Relieve, which
// copies what a slow client has not read yet out of the pinned entries
// under the copy budget. An entry is read by this node: entries have no
// owner in a cluster.
func (r *Reader) ReadEntries(ctx context.Context, reqs []chunkcache.Request) (*Result, error) {
	var n int64
	for _, q := range reqs {
		n += q.Size
	}
	if n > r.maxBytes {
		return nil, fmt.Errorf("%w: %d cache entries of %d bytes in all, over the server's --max-batch-bytes (%d)", ErrTooLarge, len(reqs), n, r.maxBytes)
	}
	lease, err := r.acquire(ctx, reqs)
	if err != nil {
		return nil, err
	}
	res := &Result{r: r, Bytes: n, pinned: n > 0, release: []func(){lease.Release}}
	res.Parts = make(net.Buffers, len(reqs))
	for i := range reqs {
		res.Parts[i] = lease.Bytes(i)
	}
	res.Loads, res.LoadedBytes = lease.Loaded()
	return res, nil
}
