package catalogtest_test

import (
	"testing"

	"github.com/brandgw/brand/imagesize"
	"github.com/brandgw/brand/internal/testsupport/catalogtest"
)

// The layout Dataset's doc promises, which the tests using it rely on.
func TestDataset(t *testing.T) {
	ds := catalogtest.Dataset(t, "d", 3, 4)
	ix := ds.Index
	if ds.Name != "d" || ix.NumChunks() != 3 || ix.NumSamples() != 12 {
		t.Fatalf("%q: %d chunks, %d samples; want d, 3, 12", ds.Name, ix.NumChunks(), ix.NumSamples())
	}
	ch := ix.Chunk(2)
	if ch.Key != "c0002.tar" || ch.ETag != "2" || ch.Size != 4*catalogtest.SampleSize || ch.Samples != 4 {
		t.Errorf("chunk 2: %+v", ch)
	}
	s := ix.Sample(9) // chunk 2, sample 1
	if s.Key != "d/2/1" || s.Chunk != 2 || s.Offset != catalogtest.SampleSize || s.Length != catalogtest.SampleSize {
		t.Errorf("sample 9: %+v", s)
	}
}

// Sized's chunks have the sizes given, their samples where Dataset's
// are.
func TestSized(t *testing.T) {
	ds := catalogtest.Sized(t, "s", []int64{4096, 8192}, 4)
	ix := ds.Index
	if ix.NumChunks() != 2 || ix.NumSamples() != 8 || ix.Chunk(1).Size != 8192 || ix.Chunk(0).Size != 4096 {
		t.Fatalf("%d chunks, %d samples, sizes %d, %d", ix.NumChunks(), ix.NumSamples(), ix.Chunk(0).Size, ix.Chunk(1).Size)
	}
	if s := ix.Sample(7); s.Key != "s/1/3" || s.Offset != 3*catalogtest.SampleSize {
		t.Errorf("sample 7: %+v", s)
	}
}

// Grown's versions each extend the one before, every sample of a
// version under its ID and key in the next.
func TestGrown(t *testing.T) {
	vs := catalogtest.Grown(t, "g", nil, 3, 2, 4, 5)
	for v, want := range []int{2, 4, 5} {
		ix := vs[v].Index
		if !ix.Deferred() || ix.NumChunks() != want || ix.NumSamples() != 3*want {
			t.Fatalf("version %d: %d chunks, %d samples, deferred %t; want %d, %d, true", v, ix.NumChunks(), ix.NumSamples(), ix.Deferred(), want, 3*want)
		}
		if v == 0 {
			continue
		}
		if a, ok := ix.Lineage().AncestorIndex(vs[v-1].ID()); !ok || a.NumSamples() != vs[v-1].Index.NumSamples() {
			t.Fatalf("version %d does not extend version %d", v, v-1)
		}
		if got := ix.SampleKey(4); got != vs[v-1].Index.SampleKey(4) || got != "g/1/1" {
			t.Fatalf("version %d: sample 4 is %q", v, got)
		}
	}
}

// WithSizes's dataset holds its sizes loaded: a zero size is a sample
// without an image.
func TestWithSizes(t *testing.T) {
	ix := catalogtest.Dataset(t, "d", 2, 2).Index
	sizes := []imagesize.Size{{W: 640, H: 480}, {}, {W: 3, H: 4000}, {W: 1, H: 1}}
	ds := catalogtest.WithSizes(t, "d", "file:///d", ix, sizes)
	f := ds.Sizes()
	if f == nil || f.Index != ix.ID() {
		t.Fatalf("sizes %+v", f)
	}
	for id, want := range sizes {
		if got, ok := f.Of(id); got != want || ok != (want != imagesize.Size{}) {
			t.Errorf("sample %d: %v, %v; want %v", id, got, ok, want)
		}
	}
	if f.Bad[1] != imagesize.NoImage {
		t.Errorf("sample 1's reason %q", f.Bad[1])
	}
}
