package lance

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/brandgw/brand/format"
)

// A caller's memory limit bounds every read: a manifest, a data file's
// metadata, a deletion file, a column's values (a zstd value's declared
// length among them). Past it a read is refused with ErrOverLimit
// (wrapping format.ErrInvalid), naming what it refused, before it
// allocates; under it the same read succeeds.
func TestMemoryLimit(t *testing.T) {
	ctx := context.Background()
	over := func(t *testing.T, err error, names string) {
		t.Helper()
		if !errors.Is(err, ErrOverLimit) || !errors.Is(err, format.ErrInvalid) || !strings.Contains(err.Error(), names) {
			t.Fatalf("%v: not over the memory limit naming %q", err, names)
		}
	}
	st, objs, ms := fixture(t, "basic")
	vs, err := Versions(objs)
	if err != nil {
		t.Fatal(err)
	}
	latest := vs[len(vs)-1]

	t.Run("manifest", func(t *testing.T) {
		_, err := Open(ctx, st, objs, 0, Options{MemoryLimit: latest.Size - 1})
		over(t, err, latest.Key)
		if _, err := Open(ctx, st, objs, 0, Options{MemoryLimit: latest.Size}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("data file metadata", func(t *testing.T) {
		key := "data/" + ms[0].Fragments[0].Files[0].Path
		_, err := ReadFile(ctx, st, key, "", sizeOf(t, objs, key), 100)
		over(t, err, key)
	})
	t.Run("deletion file", func(t *testing.T) {
		m := ms[len(ms)-1]
		for i := range m.Fragments {
			fr := &m.Fragments[i]
			if fr.Deletion == nil {
				continue
			}
			key := fr.Deletion.Path(fr.ID)
			size := sizeOf(t, objs, key)
			need := size + 8*int64(fr.Deletion.NumDeleted)
			_, err := ReadDeletions(ctx, st, fr, key, "", size, need-1)
			over(t, err, key)
			if _, err := ReadDeletions(ctx, st, fr, key, "", size, need); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatal("basic has no deletion file")
	})
	t.Run("a column's values", func(t *testing.T) {
		st, objs, _ := fixture(t, "images")
		d, err := Open(ctx, st, objs, 0, Options{})
		if err != nil {
			t.Fatal(err)
		}
		vals, _, err := d.Column(ctx, "image")
		if err != nil {
			t.Fatal(err)
		}
		// The images' values alone: the read needs more (the bytes read,
		// each value's bookkeeping), so it is refused.
		limit := int64(vals.Offsets[vals.Len()])
		d, _ = Open(ctx, st, objs, 0, Options{MemoryLimit: limit})
		_, _, err = d.Column(ctx, "image")
		over(t, err, "lance file data/")
		// Twice the values and a little: read.
		d, _ = Open(ctx, st, objs, 0, Options{MemoryLimit: 2*limit + 64<<10})
		if _, _, err := d.Column(ctx, "image"); err != nil {
			t.Fatal(err)
		}
	})
}
