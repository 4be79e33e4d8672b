package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/s3auth"
	"github.com/brandgw/brand/s3backend"
)

const (
	s3ID     = "brandtest"
	s3Secret = "brand-test-secret-key"
)

// addMembers writes the fixture's member table, read from its chunks as
// `brand index` reads them.
func (f *fixture) addMembers(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	var b chunkindex.MembersBuilder
	for c := range f.index.NumChunks() {
		ch := f.index.Chunk(c)
		buf := make([]byte, ch.Size)
		if err := f.store.ReadRange(ctx, ch.Key, "", 0, buf); err != nil {
			t.Fatal(err)
		}
		first, _ := f.index.ChunkRange(c)
		i := 0
		if _, err := chunkindex.ScanTar(bytes.NewReader(buf), func(s chunkindex.TarSample) error {
			err := b.Add(first+i, s.Files)
			i++
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := b.Encode(ctx, f.index)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.Put(ctx, chunkindex.MembersKey, bytes.NewReader(enc), int64(len(enc))); err != nil {
		t.Fatal(err)
	}
}

// startS3 runs a gateway with the S3 face over store and returns a
// minio-go client of the face.
func startS3(t *testing.T, store s3backend.Store, mutate func(*gateway.Config)) (*gateway.Gateway, *minio.Client, string) {
	t.Helper()
	creds, err := s3auth.ParseCredentials(strings.NewReader(s3ID + " " + s3Secret + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := start(t, store, func(c *gateway.Config) {
		c.S3 = gateway.S3Config{Credentials: creds}
		if mutate != nil {
			mutate(c)
		}
	})
	srv := httptest.NewServer(g.S3Handler())
	t.Cleanup(srv.Close)
	return g, s3Client(t, srv.URL, s3ID, s3Secret), srv.URL
}

func s3Client(t *testing.T, endpoint, id, secret string) *minio.Client {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(id, secret, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

func s3Code(err error) string {
	var r minio.ErrorResponse
	if errors.As(err, &r) {
		return r.Code
	}
	return fmt.Sprint(err)
}

// TestS3DatasetView reads a dataset as the files it was packed from,
// through minio-go: every file listed with its size, read byte for byte,
// each chunk read from the store once however many of its files are
// asked for.
func TestS3DatasetView(t *testing.T) {
	f := newFixture(t, 6, 10)
	f.addMembers(t)
	cs := newCountingStore(f.store)
	g, mc, _ := startS3(t, cs, func(c *gateway.Config) { c.S3.ReadAhead = -1 })
	ctx := context.Background()

	buckets, err := mc.ListBuckets(ctx)
	if err != nil || len(buckets) != 1 || buckets[0].Name != "test" {
		t.Fatalf("ListBuckets: %v %+v", err, buckets)
	}
	var names []string
	for o := range mc.ListObjects(ctx, "test", minio.ListObjectsOptions{Recursive: true, MaxKeys: 7}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		key, ext := chunkindex.SplitKey(o.Key)
		want, ok := f.content[key][ext]
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

	for _, n := range names {
		obj, err := mc.GetObject(ctx, "test", n, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(obj)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		key, ext := chunkindex.SplitKey(n)
		if !bytes.Equal(got, f.content[key][ext]) {
			t.Fatalf("%s: %d bytes differ from the source's %d", n, len(got), len(f.content[key][ext]))
		}
	}
	_, r := cs.take()
	if len(r) != 6 {
		t.Fatalf("chunks read: %v; want each of 6 once", r)
	}
	for k, n := range r {
		if n != 1 {
			t.Fatalf("chunk %s read %d times for its files; want once", k, n)
		}
	}

	// Ranges and conditionals, as S3 answers them.
	n := names[3]
	key, ext := chunkindex.SplitKey(n)
	src := f.content[key][ext]
	st, err := mc.StatObject(ctx, "test", n, minio.StatObjectOptions{})
	if err != nil || st.Size != int64(len(src)) || st.ETag == "" {
		t.Fatalf("StatObject: %v %+v", err, st)
	}
	opts := minio.GetObjectOptions{}
	_ = opts.SetRange(5, 14)
	if got := readObject(t, mc, n, opts); !bytes.Equal(got, src[5:15]) {
		t.Fatalf("range 5-14: %q", got)
	}
	opts = minio.GetObjectOptions{}
	_ = opts.SetMatchETagExcept(st.ETag)
	if _, err := readObjectErr(mc, n, opts); !strings.Contains(s3Code(err), "304") && !strings.Contains(fmt.Sprint(err), "304") && !strings.Contains(fmt.Sprint(err), "Not Modified") {
		t.Fatalf("If-None-Match of the ETag: %v", err)
	}
	opts = minio.GetObjectOptions{}
	_ = opts.SetMatchETag(`"0000000000000000"`)
	if _, err := readObjectErr(mc, n, opts); s3Code(err) != "PreconditionFailed" {
		t.Fatalf("If-Match of another ETag: %v", err)
	}
	if _, err := readObjectErr(mc, "class0/nosuch.jpg", minio.GetObjectOptions{}); s3Code(err) != "NoSuchKey" {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := readObjectErr(mc, key+".png", minio.GetObjectOptions{}); s3Code(err) != "NoSuchKey" {
		t.Fatalf("unknown extension: %v", err)
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
	if _, err := f.store.Stat(ctx, n); err == nil {
		t.Fatal("a write reached the store")
	}
	rec := httptest.NewRecorder()
	g.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{`brand_s3_requests_total{code="OK",op="GetObject"} 12`, `brand_s3_requests_total{code="NoSuchKey",op="GetObject"} 2`,
		`brand_s3_requests_total{code="AccessDenied",op="PutObject"}`, `brand_http_requests_total{code="200",route="s3:GetObject"}`, "brand_s3_served_bytes_total"} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func readObject(t *testing.T, mc *minio.Client, name string, opts minio.GetObjectOptions) []byte {
	t.Helper()
	b, err := readObjectErr(mc, name, opts)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return b
}

func readObjectErr(mc *minio.Client, name string, opts minio.GetObjectOptions) ([]byte, error) {
	return readBucketObject(mc, "test", name, opts)
}

func readBucketObject(mc *minio.Client, bucket, name string, opts minio.GetObjectOptions) ([]byte, error) {
	obj, err := mc.GetObject(context.Background(), bucket, name, opts)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	return io.ReadAll(obj)
}

// TestS3Auth: unsigned, wrongly signed and unknown-key requests are
// refused with S3's errors; a presigned URL reads until it expires.
func TestS3Auth(t *testing.T) {
	f := newFixture(t, 2, 4)
	f.addMembers(t)
	_, mc, endpoint := startS3(t, f.store, nil)
	ctx := context.Background()
	if _, err := s3Client(t, endpoint, s3ID, s3Secret+"x").ListBuckets(ctx); s3Code(err) != "SignatureDoesNotMatch" {
		t.Fatalf("wrong secret: %v", err)
	}
	if _, err := s3Client(t, endpoint, "nosuchid", s3Secret).ListBuckets(ctx); s3Code(err) != "InvalidAccessKeyId" {
		t.Fatalf("unknown access key: %v", err)
	}
	resp, err := http.Get(endpoint + "/test/class0/sample00000.jpg")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "<Code>AccessDenied</Code>") {
		t.Fatalf("anonymous GET: %d %s", resp.StatusCode, body)
	}
	u, err := mc.PresignedGetObject(ctx, "test", "class0/sample00000.jpg", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, f.content["class0/sample00000"]["jpg"]) {
		t.Fatalf("presigned GET: %d, %d bytes", resp.StatusCode, len(body))
	}
}

// TestS3DatasetWithoutMembers: a dataset packed before member tables
// answers NotImplemented, saying how to add one; batches are unaffected.
func TestS3DatasetWithoutMembers(t *testing.T) {
	f := newFixture(t, 2, 4)
	_, mc, _ := startS3(t, f.store, nil)
	_, err := readObjectErr(mc, "class0/sample00000.jpg", minio.GetObjectOptions{})
	var r minio.ErrorResponse
	if !errors.As(err, &r) || r.Code != "NotImplemented" || !strings.Contains(r.Message, "brand index") {
		t.Fatalf("GET without a member table: %v", err)
	}
}

// TestS3ReadAhead: reading a dataset's chunks in order loads the next
// chunk before it is asked for.
func TestS3ReadAhead(t *testing.T) {
	f := newFixture(t, 6, 4)
	f.addMembers(t)
	cs := newCountingStore(f.store)
	_, mc, _ := startS3(t, cs, func(c *gateway.Config) { c.S3.ReadAhead = 1 })
	readObject(t, mc, "class0/sample00000.jpg", minio.GetObjectOptions{}) // chunk 0
	readObject(t, mc, "class1/sample00004.jpg", minio.GetObjectOptions{}) // chunk 1: in order
	deadline := time.Now().Add(10 * time.Second)
	for {
		cs.mu.Lock()
		n := cs.reads["chunks/000002.tar"]
		cs.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("chunk 2 was not read ahead after chunks 0 and 1 were read in order")
		}
		time.Sleep(5 * time.Millisecond)
	}
	readObject(t, mc, "class2/sample00008.jpg", minio.GetObjectOptions{})
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cs.reads["chunks/000002.tar"] != 1 || cs.reads["chunks/000005.tar"] != 0 {
		t.Fatalf("reads: %v", cs.reads)
	}
}

// TestS3ReadThrough: objects of a store read through the face are served
// from the cache the second time, whole or in blocks, and a changed object
// is read again.
func TestS3ReadThrough(t *testing.T) {
	f := newFixture(t, 2, 4)
	dir := t.TempDir()
	shards, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	small := bytes.Repeat([]byte("small shard "), 1000)
	large := make([]byte, 5<<20+123)
	for i := range large {
		large[i] = byte(i * 7 % 251)
	}
	ctx := context.Background()
	for name, b := range map[string][]byte{"shards/a-000.tar": small, "shards/b-001.tar": large, "other/readme.txt": []byte("hi")} {
		if _, err := shards.Put(ctx, name, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	cs := newCountingStore(shards)
	_, mc, _ := startS3(t, f.store, func(c *gateway.Config) {
		c.S3.Buckets = []gateway.S3Bucket{{Name: "raw", URL: "file://" + dir, Store: cs}}
		c.S3.WholeObject = 1 << 20
		c.S3.Block = 1 << 20
	})
	var listed []string
	for o := range mc.ListObjects(ctx, "raw", minio.ListObjectsOptions{Prefix: "shards/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		listed = append(listed, fmt.Sprintf("%s:%d", o.Key, o.Size))
	}
	if want := []string{"shards/a-000.tar:12000", fmt.Sprintf("shards/b-001.tar:%d", len(large))}; !slices.Equal(listed, want) {
		t.Fatalf("listing: %v, want %v", listed, want)
	}
	for epoch := range 2 {
		for name, want := range map[string][]byte{"shards/a-000.tar": small, "shards/b-001.tar": large} {
			got, err := readBucketObject(mc, "raw", name, minio.GetObjectOptions{})
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("epoch %d %s: %v, %d bytes", epoch, name, err, len(got))
			}
		}
		cs.mu.Lock()
		read := cs.bytes
		cs.bytes = 0
		cs.mu.Unlock()
		if want := int64(len(small) + len(large)); (epoch == 0 && read != want) || (epoch == 1 && read != 0) {
			t.Fatalf("epoch %d read %d bytes from the store", epoch, read)
		}
	}
	opts := minio.GetObjectOptions{}
	_ = opts.SetRange(1<<20-10, 1<<20+9) // across a block boundary
	if got, err := readBucketObject(mc, "raw", "shards/b-001.tar", opts); err != nil || !bytes.Equal(got, large[1<<20-10:1<<20+10]) {
		t.Fatalf("range across blocks: %v", err)
	}
	// A changed object is read again, never served stale.
	if err := os.WriteFile(filepath.Join(dir, "shards/a-000.tar"), []byte("rewritten"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := readBucketObject(mc, "raw", "shards/a-000.tar", minio.GetObjectOptions{}); err != nil || string(got) != "rewritten" {
		t.Fatalf("after a rewrite: %v %q", err, got)
	}
	if _, err := readBucketObject(mc, "raw", "shards/none.tar", minio.GetObjectOptions{}); s3Code(err) != "NoSuchKey" {
		t.Fatalf("unknown object: %v", err)
	}
}

// TestS3FaceOnCluster: on a cluster of partial-index nodes, any node lists
// a dataset's files and serves every one, each chunk read from the store
// once, by its owner, whichever node the files are asked of.
func TestS3FaceOnCluster(t *testing.T) {
	f := newFixture(t, 12, 8)
	f.addMembers(t)
	creds, err := s3auth.ParseCredentials(strings.NewReader(s3ID + " " + s3Secret))
	if err != nil {
		t.Fatal(err)
	}
	cl := startCluster(t, f, 3, nil, func(c *gateway.Config) {
		c.S3 = gateway.S3Config{Credentials: creds, ReadAhead: -1}
	})
	clients := make([]*minio.Client, len(cl))
	for k, n := range cl {
		srv := httptest.NewServer(n.g.S3Handler())
		t.Cleanup(srv.Close)
		clients[k] = s3Client(t, srv.URL, s3ID, s3Secret)
	}
	ctx := context.Background()
	var names []string
	for o := range clients[0].ListObjects(ctx, "test", minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		names = append(names, o.Key)
	}
	if len(names) != 2*96 {
		t.Fatalf("node 0 listed %d objects, want 192", len(names))
	}
	for round, mc := range clients[1:] {
		for _, n := range names {
			got, err := readBucketObject(mc, "test", n, minio.GetObjectOptions{})
			key, ext := chunkindex.SplitKey(n)
			if err != nil || !bytes.Equal(got, f.content[key][ext]) {
				t.Fatalf("round %d, %s: %v (%d bytes)", round, n, err, len(got))
			}
		}
		if reads := clusterReads(cl); reads != 12 {
			t.Fatalf("after round %d the cluster read chunks %d times from the store; want each of 12 once", round, reads)
		}
	}
}
