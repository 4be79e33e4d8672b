package s3face

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// TestDatasetView reads a dataset as the files it was packed from,
// through minio-go: every file listed with its size, read byte for byte,
// each chunk read from the store once however many of its files are
// asked for; ranges, conditionals, unknown keys and writes answered as
// S3 does; and each counted.
func TestDatasetView(t *testing.T) {
	d := packTar(t, t.TempDir(), 6, 10, true)
	cs := s3test.Wrap(d.store)
	face := startTarFace(t, cs, Config{ReadAhead: -1}, zerolog.Nop())
	mc, ctx := face.mc, context.Background()

	buckets, err := mc.ListBuckets(ctx)
	if err != nil || len(buckets) != 1 || buckets[0].Name != "test" {
		t.Fatalf("ListBuckets: %v %+v", err, buckets)
	}
	var names []string
	for o := range mc.ListObjects(ctx, "test", minio.ListObjectsOptions{Recursive: true, MaxKeys: 7}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		want, ok := d.content[o.Key]
		if !ok || o.Size != int64(len(want)) {
			t.Fatalf("listed %s, %d bytes; the source has %d (%v)", o.Key, o.Size, len(want), ok)
		}
		names = append(names, o.Key)
	}
	if len(names) != 2*60 || !slices.IsSorted(names) {
		t.Fatalf("listed %d objects (want 120), sorted %v", len(names), slices.IsSorted(names))
	}
	// One level, as a file browser lists it: class0/ class1/ class2/.
	var dirs []string
	for o := range mc.ListObjects(ctx, "test", minio.ListObjectsOptions{}) {
		dirs = append(dirs, o.Key)
	}
	if !slices.Equal(dirs, []string{"class0/", "class1/", "class2/"}) {
		t.Fatalf("top level: %v", dirs)
	}

	var served int
	for _, n := range names {
		got, err := getObject(mc, "test", n, minio.GetObjectOptions{})
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if !bytes.Equal(got, d.content[n]) {
			t.Fatalf("%s: %d bytes differ from the source's %d", n, len(got), len(d.content[n]))
		}
		served += len(got)
	}
	for c := range 6 {
		if n := cs.Total()[fmt.Sprintf("chunks/%06d.tar", c)].Reads; n != 1 {
			t.Fatalf("chunk %d read %d times for its files; want once", c, n)
		}
	}

	// Ranges and conditionals, as S3 answers them.
	n := names[3]
	key, _ := chunkindex.SplitKey(n)
	src := d.content[n]
	st, err := mc.StatObject(ctx, "test", n, minio.StatObjectOptions{})
	if err != nil || st.Size != int64(len(src)) || st.ETag == "" {
		t.Fatalf("StatObject: %v %+v", err, st)
	}
	opts := minio.GetObjectOptions{}
	_ = opts.SetRange(5, 14)
	if got, err := getObject(mc, "test", n, opts); err != nil || !bytes.Equal(got, src[5:15]) {
		t.Fatalf("range 5-14: %q %v", got, err)
	}
	opts = minio.GetObjectOptions{}
	_ = opts.SetMatchETagExcept(st.ETag)
	if _, err := getObject(mc, "test", n, opts); minio.ToErrorResponse(err).StatusCode != http.StatusNotModified {
		t.Fatalf("If-None-Match of the ETag: %v", err)
	}
	opts = minio.GetObjectOptions{}
	_ = opts.SetMatchETag(`"0000000000000000"`)
	if _, err := getObject(mc, "test", n, opts); s3Code(err) != "PreconditionFailed" {
		t.Fatalf("If-Match of another ETag: %v", err)
	}
	for _, missing := range []string{"class0/nosuch.jpg", key + ".png"} {
		if _, err := getObject(mc, "test", missing, minio.GetObjectOptions{}); s3Code(err) != "NoSuchKey" {
			t.Fatalf("GET %s: %v, want NoSuchKey", missing, err)
		}
	}
	if _, err := mc.StatObject(ctx, "nosuch", "x.jpg", minio.StatObjectOptions{}); s3Code(err) != "NoSuchBucket" && s3Code(err) != "NoSuchKey" {
		t.Fatalf("unknown bucket: %v", err)
	}
	if _, err := mc.PutObject(ctx, "test", "new.txt", strings.NewReader("x"), 1, minio.PutObjectOptions{}); s3Code(err) != "AccessDenied" {
		t.Fatalf("PutObject: %v", err)
	}
	if err := mc.RemoveObject(ctx, "test", n, minio.RemoveObjectOptions{}); s3Code(err) != "AccessDenied" {
		t.Fatalf("RemoveObject: %v", err)
	}
	if _, err := d.store.Stat(ctx, n); err == nil {
		t.Fatal("a write reached the store")
	}
	if _, err := d.store.Stat(ctx, "new.txt"); err == nil {
		t.Fatal("a write reached the store")
	}
	for _, m := range []struct {
		op, code string
		min, max float64
	}{
		{"GetObject", "OK", 120 + 2, 120 + 2}, // every file, the range and the 304
		{"GetObject", "NoSuchKey", 2, 2},
		{"PutObject", "AccessDenied", 1, 2}, // minio-go may retry once
	} {
		if got := requests(t, face.reg, m.op, m.code); got < m.min || got > m.max {
			t.Errorf("brand_s3_requests_total{op=%q,code=%q} = %v, want %v to %v", m.op, m.code, got, m.min, m.max)
		}
	}
	if got := servedBytes(t, face.reg); got < float64(served) {
		t.Errorf("brand_s3_served_bytes_total = %v; the files alone were %d bytes", got, served)
	}
}

// TestAuth: unsigned, wrongly signed and unknown-key requests are
// refused with S3's errors, anonymous ones with 403 and an XML body; a
// presigned URL reads.
func TestAuth(t *testing.T) {
	d := packTar(t, t.TempDir(), 2, 4, true)
	face := startTarFace(t, d.store, Config{}, zerolog.Nop())
	ctx := context.Background()
	for _, tt := range []struct {
		name, id, secret, code string
	}{
		{"wrong secret", testID, testSecret + "x", "SignatureDoesNotMatch"},
		{"unknown access key", "nosuchid", testSecret, "InvalidAccessKeyId"},
		{"right key", testID, testSecret, ""},
	} {
		_, err := faceClient(t, face.endpoint, tt.id, tt.secret).ListBuckets(ctx)
		if code := minio.ToErrorResponse(err).Code; code != tt.code || (tt.code == "") != (err == nil) {
			t.Errorf("%s: %v, want %q", tt.name, err, tt.code)
		}
	}
	const key = "class0/sample00000.jpg"
	resp, err := http.Get(face.endpoint + "/test/" + key)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "<Code>AccessDenied</Code>") {
		t.Fatalf("anonymous GET: %d %s", resp.StatusCode, body)
	}
	u, err := face.mc.PresignedGetObject(ctx, "test", key, time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, d.content[key]) {
		t.Fatalf("presigned GET: %d, %d bytes", resp.StatusCode, len(body))
	}
}

// TestDatasetWithoutMembers: a dataset packed before member tables
// answers NotImplemented, saying how to add one.
func TestDatasetWithoutMembers(t *testing.T) {
	d := packTar(t, t.TempDir(), 2, 4, false)
	face := startTarFace(t, d.store, Config{}, zerolog.Nop())
	_, err := getObject(face.mc, "test", "class0/sample00000.jpg", minio.GetObjectOptions{})
	if r := minio.ToErrorResponse(err); r.Code != "NotImplemented" || !strings.Contains(r.Message, "brand index") {
		t.Fatalf("GET without a member table: %v", err)
	}
}

// TestDatasetReadAhead: reading a dataset's chunks in order loads the
// next chunk before it is asked for, and no further than ReadAhead.
func TestDatasetReadAhead(t *testing.T) {
	d := packTar(t, t.TempDir(), 6, 4, true)
	cs := s3test.Wrap(d.store)
	face := startTarFace(t, cs, Config{ReadAhead: 1}, zerolog.Nop())
	for _, key := range []string{"class0/sample00000.jpg", "class1/sample00004.jpg"} { // chunk 0, then chunk 1: in order
		if _, err := getObject(face.mc, "test", key, minio.GetObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); cs.Total()["chunks/000002.tar"].Reads != 1; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("chunk 2 was not read ahead after chunks 0 and 1 were read in order")
		}
	}
	if _, err := getObject(face.mc, "test", "class2/sample00008.jpg", minio.GetObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	if cs.Total()["chunks/000002.tar"].Reads != 1 || cs.Total()["chunks/000005.tar"].Reads != 0 {
		t.Fatalf("reads: chunk 2 %d times, chunk 5 %d times; want once and never", cs.Total()["chunks/000002.tar"].Reads, cs.Total()["chunks/000005.tar"].Reads)
	}
}

// TestLastModifiedAfterRepack: a dataset file's Last-Modified is a real
// time, the index's, so that after a re-pack If-Modified-Since with the
// time a client saw answers 200 (with the tar headers' 1970 every date
// answered 304, and a client that revalidates by date never saw the new
// file).
func TestLastModifiedAfterRepack(t *testing.T) {
	dir := t.TempDir()
	d := packTar(t, dir, 2, 4, true)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(filepath.Join(dir, chunkindex.IndexKey), old, old); err != nil {
		t.Fatal(err)
	}
	face := startTarFace(t, d.store, Config{}, zerolog.Nop())
	const key = "class0/sample00000.jpg"
	st, err := face.mc.StatObject(context.Background(), "test", key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !st.LastModified.Equal(old) {
		t.Fatalf("Last-Modified %v; want the index's time %v", st.LastModified, old)
	}
	for o := range face.mc.ListObjects(context.Background(), "test", minio.ListObjectsOptions{Prefix: key}) {
		if !o.LastModified.Equal(old) {
			t.Fatalf("listed with LastModified %v, want %v", o.LastModified, old)
		}
	}
	since := st.LastModified.UTC().Format(http.TimeFormat)
	if status, _ := signedRequest(t, face.endpoint, "GET", "/test/"+key, "", "If-Modified-Since", since); status != http.StatusNotModified {
		t.Fatalf("If-Modified-Since the time seen, before a re-pack: %d, want 304", status)
	}

	d2 := packTar(t, dir, 3, 4, true)
	if _, err := face.cat.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	status, body := signedRequest(t, face.endpoint, "GET", "/test/"+key, "", "If-Modified-Since", since)
	if status != http.StatusOK || !bytes.Equal(body, d2.content[key]) {
		t.Fatalf("If-Modified-Since the time seen, after a re-pack: %d, %d bytes; want 200 and the new file", status, len(body))
	}
}

// TestFaceBounds: what S3 refuses, or answers as S3 does, rather than
// with a 500 or the whole object: keys too long, a name too long for the
// file system, prefixes no key has, a Range past 2^63, partNumber,
// garbage x-amz-content-sha256 (in a presigned URL's request too, where
// the signature does not cover it); and a huge key is not written whole
// into the log.
func TestFaceBounds(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "obj.txt"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := packTar(t, t.TempDir(), 2, 4, true)
	var logs syncBuffer
	face := startTarFace(t, d.store, Config{Buckets: []Bucket{{Name: "raw", URL: "file://" + dir}}}, zerolog.New(&logs))
	huge := strings.Repeat("k", 1_000_000)
	tests := []struct {
		name, path, query string
		hdr               []string
		status            int
	}{
		{"64 KiB key", "/raw/" + strings.Repeat("k", 64<<10), "", nil, http.StatusBadRequest},
		{"1 MB key", "/raw/" + huge, "", nil, http.StatusBadRequest},
		{"1 MB key, dataset", "/test/" + huge, "", nil, http.StatusBadRequest},
		{"name too long for the file system", "/raw/" + strings.Repeat("k", 300), "", nil, http.StatusNotFound},
		{"prefix /", "/raw", "list-type=2&prefix=%2F", nil, http.StatusOK},
		{"prefix ../", "/raw", "list-type=2&prefix=..%2F", nil, http.StatusOK},
		{"prefix /, dataset", "/test", "list-type=2&prefix=%2F", nil, http.StatusOK},
		{"range past 2^63", "/raw/obj.txt", "", []string{"Range", "bytes=9223372036854775808-"}, http.StatusRequestedRangeNotSatisfiable},
		{"range end past 2^63", "/raw/obj.txt", "", []string{"Range", "bytes=2-99999999999999999999"}, http.StatusPartialContent},
		{"range past 2^63, dataset", "/test/class0/sample00000.jpg", "", []string{"Range", "bytes=18446744073709551616-"}, http.StatusRequestedRangeNotSatisfiable},
		{"partNumber", "/raw/obj.txt", "partNumber=1", nil, http.StatusNotImplemented},
		{"partNumber, dataset", "/test/class0/sample00000.jpg", "partNumber=1", nil, http.StatusNotImplemented},
		{"garbage content hash", "/raw/obj.txt", "", []string{"X-Amz-Content-Sha256", "garbage"}, http.StatusBadRequest},
	}
	for _, tt := range tests {
		status, body := signedRequest(t, face.endpoint, "GET", tt.path, tt.query, tt.hdr...)
		if status != tt.status {
			t.Errorf("%s: %d %.300s, want %d", tt.name, status, body, tt.status)
		}
		if tt.status == http.StatusOK && !strings.Contains(string(body), "<KeyCount>0</KeyCount>") {
			t.Errorf("%s: %.300s, want an empty listing", tt.name, body)
		}
	}
	u, err := face.mc.PresignedGetObject(context.Background(), "raw", "obj.txt", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", u.String(), nil)
	req.Header.Set("X-Amz-Content-Sha256", "garbage")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Errorf("presigned GET with a garbage x-amz-content-sha256: %d, want 400", resp.StatusCode)
	}
	if strings.Contains(logs.String(), strings.Repeat("k", 4<<10)) {
		t.Errorf("a log line carries 4 KiB of a key (%d bytes logged)", len(logs.String()))
	}
}

// TestKept: a value is built once; a failure that building again cannot
// mend is kept, any other is tried again by the next caller.
func TestKept(t *testing.T) {
	var k kept[int]
	calls := 0
	build := func(v int, final bool, err error) func() (int, bool, error) {
		return func() (int, bool, error) { calls++; return v, final, err }
	}
	transient := errors.New("store unavailable")
	if _, err := k.get(build(0, false, transient)); err != transient {
		t.Fatalf("first: %v", err)
	}
	if v, err := k.get(build(7, false, nil)); v != 7 || err != nil {
		t.Fatalf("after a transient failure: %d %v", v, err)
	}
	if v, err := k.get(build(9, false, nil)); v != 7 || err != nil || calls != 2 {
		t.Fatalf("kept: %d %v after %d builds", v, err, calls)
	}
	var f kept[int]
	final := errors.New("no member table")
	_, _ = f.get(build(0, true, final))
	if _, err := f.get(build(1, false, nil)); err != final {
		t.Fatalf("a final failure is kept: %v", err)
	}
}
