package catalog

import "sync"

// Ancestors: a dataset served in place to which files were appended
// (`brand index --append`) has an index that extends the one it was
// made from (chunkindex.Lineage.Extend): the old chunks first, every old
// sample under its ID. A job pinned to the old version is served it as a view
// of the new one — its chunks, samples, ID and owners on a cluster —
// so its order, bytes and ETags are what the old version gave, after
// the gateway has dropped that version (Catalog.Version).

// ancestorMemo holds the views of a dataset version's ancestors, one
// per ancestor, so that an ancestor is always the same *Dataset:
// streams, the schedule and the cache tell datasets apart by it. At most
// chunkindex.MaxAncestors of them.
type ancestorMemo struct {
	mu    sync.Mutex
	views map[string]*Dataset
}

// Ancestor returns the version id of the dataset that d extends, as a
// view of d: ok is false when d's index does not record id (or is
// partial: chunkindex.Lineage.AncestorIndex). The view reads d's store
// and chunks, with d's decoder for a dataset served in place; its chunks'
// cache keys are d's.
func (d *Dataset) Ancestor(id string) (*Dataset, bool) {
	m := d.ancestors
	m.mu.Lock()
	defer m.mu.Unlock()
	if a, ok := m.views[id]; ok {
		return a, true
	}
	ix, ok := d.Index.Lineage().AncestorIndex(id)
	if !ok {
		return nil, false
	}
	a := NewDataset(d.Name, d.URL, d.Store, ix)
	a.IndexETag, a.LoadedAt, a.Version, a.IndexModified = d.IndexETag, d.LoadedAt, d.Version, d.IndexModified
	a.partition, a.opened = d.partition, d.opened
	// Buffers of d's class: the view's chunks are d's, in one cache.
	a.MaxChunk = d.MaxChunk
	a.damaged = d.damaged[:ix.NumChunks()]
	a.sizes = &sizesMemo{of: d}
	if ip := d.InPlace; ip != nil {
		a.InPlace = &InPlace{Format: ip.Format, Decoder: ip.Decoder, Fields: ip.Fields, Data: ip.Data,
			views: &viewMemo{views: map[string]*Dataset{}}, grown: ip.grown[:ix.NumChunks()]}
	}
	if m.views == nil {
		m.views = map[string]*Dataset{}
	}
	m.views[id] = a
	return a, true
}
