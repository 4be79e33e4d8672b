package catalog

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/imagesize"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/s3backend"
)

// putSizes stores sizes of index id beside a dataset, as `brand index
// --sizes` does; sample i is (i+1)×(2i+1), but every third has no image.
func putSizes(t *testing.T, st s3backend.Store, id string, n int) *imagesize.File {
	t.Helper()
	f := &imagesize.File{Index: id, Sizes: make([]imagesize.Size, n)}
	for i := range f.Sizes {
		if i%3 == 2 {
			if f.Bad == nil {
				f.Bad = map[int]string{}
			}
			f.Bad[i] = imagesize.NoImage
			continue
		}
		f.Sizes[i] = imagesize.Size{W: uint32(i + 1), H: uint32(2*i + 1)}
	}
	b, err := f.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(context.Background(), stored.SizesKey, bytes.NewReader(b), int64(len(b))); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestLoadSizes: a dataset without sizes, or with sizes of another index
// version, is ErrNoSizes (400), naming the flag that writes them, and
// holds none; its own are loaded once, kept when the file goes, and
// shared by its views of some fields.
func TestLoadSizes(t *testing.T) {
	ctx := context.Background()
	d, _ := inPlaceDataset(t)
	n := d.Index.NumSamples()
	_, err := d.LoadSizes(ctx)
	if !errors.Is(err, ErrNoSizes) || errkind.Of(err) != errkind.Invalid || !strings.Contains(err.Error(), "brand index --sizes") {
		t.Fatalf("no sizes: %v; want ErrNoSizes naming --sizes", err)
	}
	putSizes(t, d.Store, "0123456789abcdef", n)
	_, err = d.LoadSizes(ctx)
	if !errors.Is(err, ErrNoSizes) || !errors.Is(err, imagesize.ErrFile) || !strings.Contains(err.Error(), "brand index --sizes") {
		t.Fatalf("sizes of another version: %v; want ErrNoSizes naming --sizes", err)
	}
	putSizes(t, d.Store, d.Index.ID(), n+1)
	if _, err = d.LoadSizes(ctx); !errors.Is(err, ErrNoSizes) {
		t.Fatalf("sizes of another sample count: %v; want ErrNoSizes", err)
	}
	if d.Sizes() != nil {
		t.Fatal("a refused load left sizes")
	}
	want := putSizes(t, d.Store, d.Index.ID(), n)
	view, err := d.Select([]string{"txt"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := d.LoadSizes(ctx)
	if err != nil || !reflect.DeepEqual(f, want) {
		t.Fatalf("LoadSizes: %+v, %v; want %+v", f, err, want)
	}
	if err := d.Store.Delete(ctx, stored.SizesKey); err != nil {
		t.Fatal(err)
	}
	if again, err := d.LoadSizes(ctx); again != f || err != nil {
		t.Fatalf("loaded again: %p, %v; want the first load's", again, err)
	}
	if d.Sizes() != f || view.Sizes() != f {
		t.Fatalf("Sizes(): %p, the view's %p; want %p", d.Sizes(), view.Sizes(), f)
	}
}

// TestAncestorSizes: a job pinned to the version an append extended
// reads the new version's sizes of its samples: their prefix, as the
// sizes of its own index, loaded through the new version.
func TestAncestorSizes(t *testing.T) {
	ctx := context.Background()
	st, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var chunks []chunkindex.Chunk
	var keys []string
	for c := range 5 {
		chunks = append(chunks, chunkindex.Chunk{Key: fmt.Sprintf("f%d.parquet#0", c), Size: 1 << 10, ETag: fmt.Sprint(c), Samples: 4})
		for s := range 4 {
			keys = append(keys, fmt.Sprintf("f%d/%d", c, s))
		}
	}
	in := chunkindex.InPlace{Format: "parquet", Created: 1}
	old, err := chunkindex.NewDeferred(chunks[:3], keys[:12], in)
	if err != nil {
		t.Fatal(err)
	}
	ix, err := chunkindex.NewDeferred(chunks, keys, in)
	if err != nil {
		t.Fatal(err)
	}
	if ix, err = old.Lineage().Extend(ix); err != nil {
		t.Fatal(err)
	}
	d := NewDataset("d", "file:///d", st, ix)
	all := putSizes(t, st, ix.ID(), ix.NumSamples())
	a, ok := d.Ancestor(old.ID())
	if !ok {
		t.Fatal("no ancestor")
	}
	if a.Sizes() != nil {
		t.Fatal("an ancestor holds sizes before anything loaded them")
	}
	f, err := a.LoadSizes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if f.Index != old.ID() || !reflect.DeepEqual(f.Sizes, all.Sizes[:12]) || len(f.Bad) != 4 || d.Sizes() == nil {
		t.Fatalf("the ancestor's sizes: %+v; want the first 12 of %+v", f, all)
	}
	for id, why := range f.Bad {
		if all.Bad[id] != why || id >= 12 {
			t.Errorf("bad %d: %q", id, why)
		}
	}
	if b, _ := d.Ancestor(old.ID()); b.Sizes() != f {
		t.Error("the ancestor's sizes were not kept")
	}
}
