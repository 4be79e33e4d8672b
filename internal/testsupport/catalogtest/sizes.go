package catalogtest

import (
	"bytes"
	"context"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/imagesize"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/s3backend"
)

// WithSizes returns a dataset named name (at url) over index ix whose
// samples' image sizes are sizes (one a sample; a zero size is a sample
// without an image, imagesize.NoImage): stored beside the index in a
// local store of its own, as `brand index --sizes` writes them, and
// loaded (catalog.Dataset.LoadSizes).
func WithSizes(t testing.TB, name, url string, ix *chunkindex.Index, sizes []imagesize.Size) *catalog.Dataset {
	t.Helper()
	f := &imagesize.File{Index: ix.ID(), Sizes: sizes}
	for id, s := range sizes {
		if s.W == 0 || s.H == 0 {
			if f.Bad == nil {
				f.Bad = map[int]string{}
			}
			f.Bad[id] = imagesize.NoImage
		}
	}
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(context.Background(), stored.SizesKey, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	ds := catalog.NewDataset(name, url, st, ix)
	if _, err := ds.LoadSizes(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ds
}
