package gateway

import (
	"sync/atomic"

	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/memory"
)

// readiness says whether the gateway takes work now, from the parts
// whose state decides it: the catalog (indexes loaded), the cache, the
// reader and the memory manager (requests let through), the node (its
// cluster settled), and leaving, which Leave sets. /readyz asks
// notReady, the S3 face refusing, the peers servingNotReady.
type readiness struct {
	catalog *catalog.Catalog
	cache   *chunkcache.Cache
	reader  *reader.Reader
	mem     *memory.Manager
	node    node
	leaving atomic.Bool
}

// notReady is why the gateway should not be sent new work, or nil: it
// refuses work (refusing), or, on a cluster's start, it and its peers
// have yet to see each other up (node.Settled) — a reason for a load
// balancer or a job to wait, not for a request that comes to be refused.
func (r *readiness) notReady() error {
	if err := r.refusing(); err != nil {
		return err
	}
	return r.node.Settled()
}

// refusing is why the gateway refuses a client's request now, or nil: it
// is leaving its cluster (Gateway.Leave), or cannot serve
// (servingNotReady).
func (r *readiness) refusing() error {
	if r.leaving.Load() {
		return errLeaving
	}
	return r.servingNotReady()
}

// servingNotReady is why the gateway cannot serve now, or nil: the
// indexes are not loaded yet, or requests wait for the cache, or for
// room to assemble or copy a batch, and none has been let through for
// stallNotReady. A node leaving its cluster still serves its peers: their
// probes of its state ask this.
func (r *readiness) servingNotReady() error {
	if err := r.catalog.NotReady(); err != nil {
		return err
	}
	if r.cache.Stalled(stallNotReady) || r.reader.Stalled(stallNotReady) || r.mem.Stalled(stallNotReady) {
		return errStalled
	}
	return nil
}
