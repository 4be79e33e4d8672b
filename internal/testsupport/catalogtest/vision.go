package catalogtest

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/vision"
)

// WithVisionFacts returns a dataset named name (at url) over index ix whose
// image-text facts are facts (one a sample), tokenized by the Hugging
// Face golden tokenizer of package tokenize's tests: stored beside the
// index in a local store of its own, as `brand index --tokenizer` writes
// them, and loaded (catalog.Dataset.LoadVision).
func WithVisionFacts(t testing.TB, name, url string, ix *chunkindex.Index, facts []vision.Facts) *catalog.Dataset {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	tok, err := os.ReadFile(filepath.Join(filepath.Dir(here), "../../../tokenize/testdata/hf-golden-tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := (&vision.FactsFile{Index: ix.ID(), Tokenizer: tok, Samples: facts}).MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(context.Background(), stored.VisionFactsKey, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	ds := catalog.NewDataset(name, url, st, ix)
	if _, err := ds.LoadVision(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ds
}
