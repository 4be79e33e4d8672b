package stored_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/s3backend"
)

// A missing index or manifest says how to build one; garbage in their
// place is an error, never a dataset.
func TestReadIndexAndManifestMissing(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = stored.ReadIndex(ctx, st)
	if !errors.Is(err, s3backend.ErrNotFound) || !strings.Contains(err.Error(), "brand pack") || !strings.Contains(err.Error(), "brand index") {
		t.Fatalf("stored.ReadIndex: %v", err)
	}
	if _, err := stored.ReadManifest(ctx, st); !errors.Is(err, s3backend.ErrNotFound) {
		t.Fatalf("stored.ReadManifest: %v", err)
	}
	for key, b := range map[string]string{chunkindex.IndexKey: "BRANDIDX but not really", chunkindex.ManifestKey: `{"format":"something else"}`} {
		if _, err := st.Put(ctx, key, strings.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := stored.ReadIndex(ctx, st); err == nil || errors.Is(err, s3backend.ErrNotFound) {
		t.Fatalf("stored.ReadIndex of garbage: %v", err)
	}
	if _, err := stored.ReadManifest(ctx, st); !errors.Is(err, chunkindex.ErrCorrupt) {
		t.Fatalf("stored.ReadManifest of garbage: %v", err)
	}
}
