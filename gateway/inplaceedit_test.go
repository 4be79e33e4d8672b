package gateway_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/s3backend"
)

// A same-size edit in the middle of a file of a dataset served in place
// on a local store — a byte of a Parquet value, of an MDS sample, of a
// Megatron document, of a token job's sequence — is never served: a
// gateway that reads the file afterwards answers 502, and a conditional
// GET with the batch's ETag, answered 304 before the edit, is not
// answered 304. A gateway that read the
// file before the edit may serve the bytes it holds, which are the
// indexed ones: a batch's ETag never names other bytes. (The
// reproduction: the edited bytes served as 200 under the old ETag, and
// If-None-Match with it answered 304; the file's content ETag covers its
// first and last 64 KiB only, and the index holds no checksum of it.)
func TestInPlaceEditedInTheMiddle(t *testing.T) {
	for _, files := range []inPlaceFiles{parquetFiles(t), mdsFiles(t), megatronFiles(0), megatronFiles(256)} {
		t.Run(files.name, func(t *testing.T) {
			st := files.store(t, dataset.InPlaceOptions{})
			batch := "/epoch/0/batch/0?" + files.all
			before := files.serve(t, st)
			resp, indexed := get(t, before+batch)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("before the edit: %s %s", resp.Status, indexed)
			}
			etag := resp.Header.Get("ETag")
			if resp, body := get(t, files.serve(t, st)+batch, "If-None-Match", etag); resp.StatusCode != http.StatusNotModified || len(body) != 0 {
				t.Fatalf("before the edit, If-None-Match %s: %s, %d bytes, want 304", etag, resp.Status, len(body))
			}

			editMiddle(t, st, files.file, files.middle)
			after := files.serve(t, st)
			resp, body := get(t, after+batch)
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("after the edit: %s (ETag %s, was %s; the same bytes: %t), want 502", resp.Status,
					resp.Header.Get("ETag"), etag, bytes.Equal(body, indexed))
			}
			resp, body = get(t, after+batch, "If-None-Match", etag)
			if resp.StatusCode != http.StatusBadGateway {
				t.Errorf("after the edit, If-None-Match %s: %s %s, want 502", etag, resp.Status, body)
			}
			// The gateway that read the file before holds the indexed
			// bytes, if anything.
			resp, body = get(t, before+batch)
			if resp.StatusCode == http.StatusOK && (!bytes.Equal(body, indexed) || resp.Header.Get("ETag") != etag) ||
				resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusBadGateway {
				t.Errorf("the gateway that read the file before the edit: %s, ETag %s, the indexed bytes: %t",
					resp.Status, resp.Header.Get("ETag"), bytes.Equal(body, indexed))
			}
		})
	}
}

// How a file of a dataset served in place is pinned, as a careful user
// meets it. Indexed without checksums, a local file is named by its size
// and modification time: a copy that keeps its times (cp -p, rsync -a)
// serves the same bytes, and a touch, a copy with new times or an edit of
// its middle is a 502 until it is indexed again. Indexed with checksums
// (brand index --checksums), its bytes are checked instead: a touch and
// a copy with new times serve the same bytes, an edit of the middle is a
// 502.
func TestInPlaceFileVersions(t *testing.T) {
	touch := func(t testing.TB, st *s3backend.Local, key string, _ int64) {
		later := time.Now().Add(time.Second)
		if err := os.Chtimes(filepath.Join(st.Dir(), filepath.FromSlash(key)), later, later); err != nil {
			t.Fatal(err)
		}
	}
	copied := func(keepTimes bool) func(testing.TB, *s3backend.Local, string, int64) {
		return func(t testing.TB, st *s3backend.Local, key string, _ int64) {
			name := filepath.Join(st.Dir(), filepath.FromSlash(key))
			fi, err := os.Stat(name)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name+".copy", b, 0o644); err != nil {
				t.Fatal(err)
			}
			mtime := fi.ModTime().Add(time.Second)
			if keepTimes {
				mtime = fi.ModTime()
			}
			if err := os.Chtimes(name+".copy", mtime, mtime); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(name+".copy", name); err != nil {
				t.Fatal(err)
			}
		}
	}
	scenarios := []struct {
		name      string
		checksums bool
		change    func(testing.TB, *s3backend.Local, string, int64)
		status    int
	}{
		{"copied keeping times", false, copied(true), http.StatusOK},
		{"copied with new times", false, copied(false), http.StatusBadGateway},
		{"touched", false, touch, http.StatusBadGateway},
		{"checksums, touched", true, touch, http.StatusOK},
		{"checksums, copied with new times", true, copied(false), http.StatusOK},
		{"checksums, middle edited", true, editMiddle, http.StatusBadGateway},
	}
	for _, files := range []inPlaceFiles{parquetFiles(t), mdsFiles(t), megatronFiles(0), megatronFiles(256)} {
		for _, sc := range scenarios {
			t.Run(files.name+"/"+sc.name, func(t *testing.T) {
				st := files.store(t, dataset.InPlaceOptions{Checksums: sc.checksums})
				batch := "/epoch/0/batch/0?" + files.all
				resp, indexed := get(t, files.serve(t, st)+batch)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("before: %s %s", resp.Status, indexed)
				}
				sc.change(t, st, files.file, files.middle)
				after := files.serve(t, st)
				resp, body := get(t, after+batch)
				if resp.StatusCode != sc.status || sc.status == http.StatusOK && !bytes.Equal(body, indexed) {
					t.Fatalf("after: %s (the indexed bytes: %t), want %d", resp.Status, bytes.Equal(body, indexed), sc.status)
				}
				if sc.status == http.StatusBadGateway && !bytes.Contains(body, []byte("store no longer matches")) && !bytes.Contains(body, []byte("checksum")) {
					t.Fatalf("after: %s", body)
				}
			})
		}
	}
}

// The S3 face over a dataset served in place from a local store follows
// the same rule: a file of a sample whose bytes were edited in the middle
// of their file since it was indexed is an error saying the store no
// longer matches the index (S3's InternalError, as for a replaced S3
// object: S3 has no 502), not the edited bytes, for a GET and a
// conditional GET alike. (The reproduction: the edited bytes served.)
func TestS3FaceInPlaceEdited(t *testing.T) {
	for _, tt := range []struct {
		files  inPlaceFiles
		object string
	}{
		{parquetFiles(t), fmt.Sprintf("data/train-00000/%03d.bin", inPlaceRows/2)},
		{mdsFiles(t), fmt.Sprintf("shard.00000/%06d.bin", inPlaceRows/2)},
	} {
		t.Run(tt.files.name, func(t *testing.T) {
			st := tt.files.store(t, dataset.InPlaceOptions{})
			mutate := func(c *gateway.Config) { c.Datasets[0].Formats = tt.files.formats }
			_, mc, _ := startS3(t, st, mutate)
			obj, err := mc.StatObject(context.Background(), "test", tt.object, minio.StatObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if b := readObject(t, mc, tt.object, minio.GetObjectOptions{}); !bytes.Equal(b, rowBytes(inPlaceRows/2)) {
				t.Fatalf("%s before the edit: not the row's value", tt.object)
			}
			editMiddle(t, st, tt.files.file, tt.files.middle)
			_, mc, _ = startS3(t, st, mutate)
			b, err := readObjectErr(mc, tt.object, minio.GetObjectOptions{})
			if err == nil {
				t.Fatalf("%s after the edit: %d bytes (the row's value: %t), want an error", tt.object, len(b), bytes.Equal(b, rowBytes(inPlaceRows/2)))
			}
			changed := func(err error) bool {
				resp := minio.ToErrorResponse(err)
				return resp.Code == "InternalError" && strings.Contains(resp.Message, "store no longer matches")
			}
			if !changed(err) {
				t.Errorf("%s after the edit: %v, want InternalError saying the store no longer matches", tt.object, err)
			}
			var opts minio.GetObjectOptions
			opts.SetMatchETagExcept(obj.ETag)
			if _, err := readObjectErr(mc, tt.object, opts); !changed(err) {
				t.Errorf("%s after the edit, If-None-Match %s: %v, want InternalError saying the store no longer matches", tt.object, obj.ETag, err)
			}
		})
	}
}
