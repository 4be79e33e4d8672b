package s3face

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"

	"github.com/brandgw/brand/s3backend"
)

// A file of a dataset served in place from a local store, changed since
// it was indexed (a byte of its middle rewritten: its identity, size and
// modification time, no longer the index's), is an error saying the
// store no longer matches the index — S3's InternalError, as for a
// replaced S3 object: S3 has no 502 — not the changed bytes, for a GET
// and a conditional GET alike, once the chunk it is read from is loaded
// again; a file untouched is served.
func TestInPlaceEdited(t *testing.T) {
	mc, want, store, _ := inPlaceFace(t, 4<<10) // a cache of two chunks
	ctx := context.Background()
	const edited, kept = "a/f1/7.txt", "a/f0/7.txt"
	st, err := mc.StatObject(ctx, "lines", edited, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Other chunks read since: the edited file's is no longer cached.
	for _, l := range []int{0, 10, 20, 29} {
		if _, err := getObject(mc, "lines", "a/f0/"+strconv.Itoa(l)+".txt", minio.GetObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	name := filepath.Join(store.Store.(*s3backend.Local).Dir(), "a", "f1.lines")
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x5a
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
	changed := func(err error) bool {
		r := minio.ToErrorResponse(err)
		return r.Code == "InternalError" && strings.Contains(r.Message, "store no longer matches")
	}
	if got, err := getObject(mc, "lines", edited, minio.GetObjectOptions{}); !changed(err) {
		t.Errorf("GET %s after the edit: %q, %v; want InternalError saying the store no longer matches", edited, got, err)
	}
	var opts minio.GetObjectOptions
	_ = opts.SetMatchETagExcept(st.ETag)
	if _, err := getObject(mc, "lines", edited, opts); !changed(err) {
		t.Errorf("GET %s after the edit, If-None-Match %s: %v; want InternalError saying the store no longer matches", edited, st.ETag, err)
	}
	if got, err := getObject(mc, "lines", kept, minio.GetObjectOptions{}); err != nil || string(got) != want["a/f0/7"] {
		t.Errorf("GET %s, of a file untouched: %q, %v", kept, got, err)
	}
}
