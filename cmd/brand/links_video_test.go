package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/video"
	"github.com/brandgw/brand/internal/testsupport/videotest"
	"github.com/brandgw/brand/s3backend"
)

// TestIndexVideoLinks is issue 66's reproduction of symbolic links in a
// tree of videos: one rule for links to files and to folders. A folder
// linked inside the tree is indexed as a file linked inside it is (each
// under the link's name); a file linked from out of the tree refuses the
// index, naming the link and nothing of the file. Before, the linked
// folder was left out without a word, and the file out of the tree was
// followed: a video there was indexed and served, and a file that is no
// video refused with its first bytes quoted in the error.
func TestIndexVideoLinks(t *testing.T) {
	made := videotest.Make(t, t.TempDir(), "h264.mp4")
	movie, err := os.ReadFile(made["h264.mp4"])
	if err != nil {
		t.Fatal(err)
	}
	data, outside := t.TempDir(), t.TempDir()
	for _, p := range []string{filepath.Join(data, "pool", "a.mp4"), filepath.Join(outside, "b.mp4")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, movie, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(outside, "passwd")
	if err := os.WriteFile(secret, []byte("root:x:0:0:root:/root:/bin/bash\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{"cat", "dog"} {
		if err := os.MkdirAll(filepath.Join(data, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, filepath.Join(data, name)); err != nil {
			t.Fatal(err)
		}
	}
	link("../pool", "cat/pool")
	link("../pool/a.mp4", "cat/a.mp4")

	ctx := context.Background()
	store, err := s3backend.NewLocal(data)
	if err != nil {
		t.Fatal(err)
	}
	index := func() (*dataset.Result, error) {
		return dataset.IndexInPlace(ctx, store, store, dataset.InPlaceOptions{Formats: []format.Format{video.Format{}}})
	}
	res, err := index()
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for i := range res.Index.NumSamples() {
		keys = append(keys, res.Index.SampleKey(i))
	}
	if got := strings.Join(keys, " "); !strings.Contains(got, "cat/pool/a") || !strings.Contains(got, "cat/a") || !strings.Contains(got, "pool/a") {
		t.Fatalf("indexed %v; want the file, the file linked and the file in the folder linked inside the tree", keys)
	}

	for _, tc := range []struct{ target, name string }{
		{filepath.Join(outside, "b.mp4"), "dog/b.mp4"},
		{secret, "dog/passwd.mp4"},
		{outside, "dog/out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			link(tc.target, tc.name)
			defer os.Remove(filepath.Join(data, tc.name))
			_, err := index()
			if err == nil || !strings.Contains(err.Error(), tc.name) || !strings.Contains(err.Error(), "out of the store's directory") {
				t.Fatalf("%v; want a refusal naming %s as a link out of the tree", err, tc.name)
			}
			if strings.Contains(err.Error(), "root") || strings.Contains(err.Error(), outside) {
				t.Fatalf("%v quotes what the link leads to", err)
			}
		})
	}
}
