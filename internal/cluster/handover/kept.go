package handover

import (
	"maps"
	"sync"
	"sync/atomic"

	"github.com/brandgw/brand/internal/job/catalog"
)

// Kept is an old owner's side of the gains left to the batches (package
// doc, step 5): the chunks it read for the jobs before a membership
// change that their new owners will ask it for when a batch first needs
// them. After the flip such a copy is no longer one of this node's
// chunks, and the use table keys only those (usetable.Config.Local): a
// copy nobody had said was awaited went first, and a node that gained
// chunks in the same epoch (a leave) could evict it before its new owner
// asked, who then read the store. The use table keys the chunks Kept
// holds as this node's own (usetable.Config.Keep), by when the jobs
// need them, until their new owner asks for them (Taken) or tells the
// node it no longer will (Keep with a list without them).
//
// Safe for concurrent use. Holds takes no lock: the use table calls it
// for every chunk of every stream at each rebuild.
type Kept struct {
	mu sync.Mutex
	// by is, per gainer (its URL) and dataset version, the chunks it
	// awaits.
	by map[string]map[*catalog.Dataset]map[int]bool
	// set is every awaited chunk, rebuilt on each change (read by Holds
	// without the lock); nil when none is.
	set atomic.Pointer[map[dsChunk]bool]
}

// dsChunk is a chunk of a dataset version.
type dsChunk struct {
	ds *catalog.Dataset
	c  int
}

// NewKept returns an empty Kept.
func NewKept() *Kept {
	return &Kept{by: map[string]map[*catalog.Dataset]map[int]bool{}}
}

// Keep records that the node at url awaits chunks of ds from this node:
// those, and no others of ds, replacing what it said before.
func (k *Kept) Keep(url string, ds *catalog.Dataset, chunks []int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	byDS := k.by[url]
	if len(chunks) == 0 {
		if byDS == nil {
			return
		}
		delete(byDS, ds)
		if len(byDS) == 0 {
			delete(k.by, url)
		}
		k.publishLocked()
		return
	}
	if byDS == nil {
		byDS = map[*catalog.Dataset]map[int]bool{}
		k.by[url] = byDS
	}
	cs := make(map[int]bool, len(chunks))
	for _, c := range chunks {
		cs[c] = true
	}
	byDS[ds] = cs
	k.publishLocked()
}

// Taken records that the node at url asked for chunk c of ds: given or
// not, it does not ask again.
func (k *Kept) Taken(url string, ds *catalog.Dataset, c int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	cs := k.by[url][ds]
	if !cs[c] {
		return
	}
	delete(cs, c)
	if len(cs) == 0 {
		delete(k.by[url], ds)
		if len(k.by[url]) == 0 {
			delete(k.by, url)
		}
	}
	k.publishLocked()
}

// publishLocked rebuilds the set Holds reads; k.mu is held.
func (k *Kept) publishLocked() {
	if len(k.by) == 0 {
		k.set.Store(nil)
		return
	}
	set := map[dsChunk]bool{}
	for _, byDS := range k.by {
		for ds, cs := range byDS {
			for c := range maps.Keys(cs) {
				set[dsChunk{ds, c}] = true
			}
		}
	}
	k.set.Store(&set)
}

// Holds reports whether some node awaits chunk c of ds from this node.
func (k *Kept) Holds(ds *catalog.Dataset, c int) bool {
	set := k.set.Load()
	return set != nil && (*set)[dsChunk{ds, c}]
}

// Len is the number of chunks awaited, a chunk awaited by two nodes
// counted once.
func (k *Kept) Len() int {
	if set := k.set.Load(); set != nil {
		return len(*set)
	}
	return 0
}
