package lance

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/brandgw/brand/format"
)

// dirStore is a format.Store over a directory, counting the bytes read.
type dirStore struct {
	root string
	read int64
}

func (d *dirStore) ReadRange(_ context.Context, key, _ string, off int64, p []byte) error {
	f, err := os.Open(filepath.Join(d.root, filepath.FromSlash(key)))
	if err != nil {
		return err
	}
	defer f.Close()
	n, err := f.ReadAt(p, off)
	d.read += int64(n)
	if err != nil {
		return fmt.Errorf("%s: %d bytes at %d: %w", key, len(p), off, err)
	}
	return nil
}

// listing lists the directory root as a store lists a dataset's root.
func listing(t testing.TB, root string) []format.Object {
	t.Helper()
	var objs []format.Object
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		objs = append(objs, format.Object{Key: filepath.ToSlash(rel), Size: info.Size()})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// fixture opens the dataset testdata/NAME.lance: its store, its listing
// and its versions' manifests, oldest first.
func fixture(t testing.TB, name string) (*dirStore, []format.Object, []*Manifest) {
	t.Helper()
	st := &dirStore{root: filepath.Join("testdata", name+".lance")}
	objs := listing(t, st.root)
	vs, err := Versions(objs)
	if err != nil {
		t.Fatal(err)
	}
	var ms []*Manifest
	for _, v := range vs {
		m, err := ReadManifest(context.Background(), st, v, 1<<30)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	return st, objs, ms
}

// sizeOf is the size of key in a listing.
func sizeOf(t testing.TB, objs []format.Object, key string) int64 {
	t.Helper()
	for _, o := range objs {
		if o.Key == key {
			return o.Size
		}
	}
	t.Fatalf("no %s in the listing", key)
	return 0
}
