package gateway

import (
	"fmt"
	"strings"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/disktier"
	"github.com/brandgw/brand/internal/job/catalog"
)

// diskTier is the disk tier below the cache (--disk-cache), or noDisk.
type diskTier interface {
	// Stats are its figures for /stats; nil without a tier.
	Stats() *api.DiskStats
	// Prune removes the files that keep does not want.
	Prune(keep func(k chunkcache.Key, size int64) bool) (kept, removed int)
	Close()
}

// openDisk opens the disk tier cfg names, ordered by distance (nil: least
// recently used first), and returns it with the loader reading through
// it; without one, noDisk and the loader as it is.
func openDisk(cfg Config, distance func(chunkcache.Key) int64, loader catalog.Loader) (diskTier, catalog.Loader, error) {
	d := cfg.DiskCache
	if len(d.Dirs) == 0 {
		return noDisk{}, loader, nil
	}
	t, err := disktier.Open(disktier.Config{Dirs: d.Dirs, Capacity: d.Size, Distance: distance, WriteFile: d.WriteFile,
		Registry: cfg.Registry, Log: cfg.Logger})
	if err != nil {
		return nil, loader, fmt.Errorf("gateway: disk cache: %w", err)
	}
	st := t.Stats()
	cfg.Logger.Info().Strs("dirs", d.Dirs).Int64("capacity_bytes", st.Capacity).Int64("found_chunks", st.Chunks).
		Int64("found_bytes", st.Bytes).Msg("disk cache opened")
	return tier{t}, loader.WithDisk(t), nil
}

// tier is a disk tier.
type tier struct{ *disktier.Tier }

func (t tier) Stats() *api.DiskStats {
	st := t.Tier.Stats()
	return &st
}

// noDisk is a gateway's disk tier without --disk-cache: nothing kept.
type noDisk struct{}

func (noDisk) Stats() *api.DiskStats                                      { return nil }
func (noDisk) Prune(func(chunkcache.Key, int64) bool) (kept, removed int) { return 0, 0 }
func (noDisk) Close()                                                     {}

// pruneDisk removes the disk tier's files that name no chunk of the
// datasets loaded: a restarted gateway keeps what its indexes still
// describe (object, ETag and size) and reads only the rest from the store.
func (g *Gateway) pruneDisk(loaded []*catalog.Dataset) {
	byName := make(map[string]*catalog.Dataset, len(loaded))
	for _, ds := range loaded {
		byName[ds.Name] = ds
	}
	kept, removed := g.disk.Prune(func(k chunkcache.Key, size int64) bool {
		ds, ok := byName[k.Dataset]
		if !ok {
			return false
		}
		// A chunk decoded with some fields is kept for a view that jobs
		// may select again.
		v, err := ds.Select(selected(k.Select))
		if err != nil {
			return false
		}
		c, ok := v.ChunkOf(k)
		return ok && v.ChunkSize(c) == size
	})
	if kept+removed > 0 {
		g.log.Info().Int("kept_chunks", kept).Int("removed_chunks", removed).Msg("disk cache checked against the loaded indexes")
	}
}

// selected is the fields a key's Select names.
func selected(names string) []string {
	if names == "" {
		return nil
	}
	return strings.Split(names, ",")
}
