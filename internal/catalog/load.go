package catalog

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/s3backend"
)

// Spec names a dataset to serve.
type Spec struct {
	Name  string
	URL   string          // s3://bucket/prefix, file:///dir or a directory
	Store s3backend.Store // optional; used instead of opening URL (tests, embedding)
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
		ix, err := dataset.ReadIndex(ctx, store)
		if err == nil {
			d := NewDataset(spec.Name, spec.URL, store, ix)
			d.IndexETag = info.ETag
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
