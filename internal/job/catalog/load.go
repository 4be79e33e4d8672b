package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/s3backend"
)

// Spec names a dataset to serve.
type Spec struct {
	Name  string
	URL   string          // s3://bucket/prefix, file:///dir or a directory
	Store s3backend.Store // optional; used instead of opening URL (tests, embedding)
	// Partition places the gateway in a cluster, where it keeps in memory
	// only its own chunks' sample tables; the zero value (a single
	// gateway) keeps them all.
	Partition Partition
	// Formats are the formats of datasets served in place this gateway
	// reads (package format); a dataset whose index names another fails
	// to load, saying so.
	Formats []format.Format
}

// opening is how a dataset was opened, which a reload repeats.
type opening struct {
	formats []format.Format
	backend s3backend.Config
}

// open builds the loaded form of ix: for a dataset served in place, with
// its format's decoder (openInPlace).
func open(ctx context.Context, sp opening, name, url string, store s3backend.Store, ix *chunkindex.Index) (*Dataset, error) {
	d := NewDataset(name, url, store, ix)
	d.opened = sp
	if !ix.Deferred() {
		return d, nil
	}
	ip, err := openInPlace(ctx, sp, store, ix)
	if err != nil {
		return nil, fmt.Errorf("dataset %s: %w", name, err)
	}
	d.InPlace = ip
	return d, nil
}

// Partition is a gateway's place in a cluster, as far as its indexes are
// concerned. On a cluster (Members of more than one) a node opens each
// index partially (chunkindex.Open): it keeps the chunk-level data every
// node needs, the sample tables of the chunks it owns under Members
// (Dataset.Owners), and a cache of other chunks' tables read when a batch
// needs them, bounded by TableCacheBytes. The membership is the one the
// node knew when it read the index: after the cluster changes, the tables
// of chunks it gained are read on demand like any other's until the next
// reload. docs/scale-out.md sizes it.
type Partition struct {
	Self    string // this node's URL among Members
	Members *cluster.Membership
	// TableCacheBytes bounds the tables of chunks this node does not own
	// kept after use; 0 is chunkindex.DefaultTableCacheBytes.
	TableCacheBytes int64
	// Guard, if set, bounds the reads of other chunks' tables from the
	// stored index (a remote store's: Loader.WithGuard).
	Guard StoreGuard
}

// partial reports whether p keeps only some tables.
func (p Partition) partial() bool { return p.Members != nil && p.Members.Len() > 1 }

// readIndex reads a dataset's index as p says: whole, or partially with
// the tables of the chunks node p.Self owns.
func readIndex(ctx context.Context, store s3backend.Store, p Partition) (*chunkindex.Index, error) {
	if !p.partial() {
		return stored.ReadIndex(ctx, store)
	}
	info, err := store.Stat(ctx, chunkindex.IndexKey)
	if errors.Is(err, s3backend.ErrNotFound) {
		return nil, fmt.Errorf("dataset: no %s in the store (build the dataset with `brand pack` or `brand index`): %w", chunkindex.IndexKey, err)
	}
	if err != nil {
		return nil, fmt.Errorf("dataset: stat %s: %w", chunkindex.IndexKey, err)
	}
	// Every read, at load and later, is pinned to the version streamed.
	r := chunkindex.RangeReaderFunc(func(ctx context.Context, off int64, b []byte) error {
		return guarded(ctx, p.Guard, func(ctx context.Context) error {
			return store.ReadRange(ctx, chunkindex.IndexKey, info.ETag, off, b)
		})
	})
	ix, err := chunkindex.Open(ctx, r, info.Size, chunkindex.OpenOptions{
		CacheBytes: p.TableCacheBytes,
		Resident: func(ix *chunkindex.Index) []int {
			var own []int
			self := p.Members.Index(p.Self)
			for c, k := range p.Members.Owners(cluster.IndexKey(ix.Lineage().Root()), ix.SampleCounts()) {
				if k == self {
					own = append(own, c)
				}
			}
			return own
		},
	})
	if err != nil {
		return nil, fmt.Errorf("dataset: opening %s: %w", chunkindex.IndexKey, err)
	}
	return ix, nil
}

// Load opens a dataset's store and reads its index. Transient store
// errors are retried with backoff until ctx ends; a missing or invalid
// index fails at once, since waiting will not fix it.
func Load(ctx context.Context, spec Spec, bcfg s3backend.Config, log zerolog.Logger) (*Dataset, error) {
	store := spec.Store
	if store == nil {
		var err error
		if store, err = s3backend.Open(ctx, spec.URL, bcfg); err != nil {
			return nil, fmt.Errorf("dataset %s: %w", spec.Name, err)
		}
	}
	backoff := 250 * time.Millisecond
	for {
		// The ETag first: if the index changes in between, the next
		// poll sees a newer ETag and reads it again. Without one (a
		// failed Stat), the first poll reads the index again.
		info, _ := store.Stat(ctx, chunkindex.IndexKey)
		ix, err := readIndex(ctx, store, spec.Partition)
		var d *Dataset
		if err == nil {
			d, err = open(ctx, opening{formats: spec.Formats, backend: bcfg}, spec.Name, spec.URL, store, ix)
		}
		if err == nil {
			d.IndexETag, d.IndexModified, d.partition = info.ETag, info.ModTime, spec.Partition
			return d, nil
		}
		if !errors.Is(err, s3backend.ErrUnavailable) {
			return nil, fmt.Errorf("dataset %s (%s): %w", spec.Name, spec.URL, err)
		}
		log.Warn().Err(err).Str("dataset", spec.Name).Float64("retry_in_ms", millis(backoff)).Msg("index not reachable yet")
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("dataset %s: %w (last error: %w)", spec.Name, ctx.Err(), err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 10*time.Second)
	}
}

// millis is d in milliseconds. Logged durations are fields named *_ms
// holding this, rather than zerolog's Dur, whose unit is a package-level
// setting any code in the process may change.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
