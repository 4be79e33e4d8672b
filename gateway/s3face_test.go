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
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/signer"
	"github.com/rs/zerolog"

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

// s3Request sends a request to the face at endpoint signed with Signature
// V4 (hdr: name, value, ...), with the payload hash UNSIGNED-PAYLOAD
// unless hdr sets one, and returns the status and body.
func s3Request(t *testing.T, endpoint, method, path, query string, hdr ...string) (int, []byte) {
	t.Helper()
	u := endpoint + (&url.URL{Path: path}).EscapedPath()
	if query != "" {
		u += "?" + query
	}
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	signed := signer.SignV4(*req, s3ID, s3Secret, "", "us-east-1")
	resp, err := http.DefaultClient.Do(signed)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// TestS3ReadThroughLocalRewrite: a same-size rewrite of the middle of a
// local read-through object — which keeps the store's content ETag, its
// first and last 64 KiB unchanged — is served new and whole after blocks
// of the old one were cached (they were served stale, or mixed with new
// blocks the cache had evicted), and a GET that the rewrite overtakes is
// cut short, never completed with the new version's blocks.
func TestS3ReadThroughLocalRewrite(t *testing.T) {
	const block = 1 << 20
	dir := t.TempDir()
	name := filepath.Join(dir, "big.bin")
	data := bytes.Repeat([]byte{11}, 40*block+100<<10)
	if err := os.WriteFile(name, data, 0o644); err != nil {
		t.Fatal(err)
	}
	rewrite := func(b byte) {
		t.Helper()
		fi, err := os.Stat(name)
		if err != nil {
			t.Fatal(err)
		}
		file, err := os.OpenFile(name, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 40 {
			if _, err := file.WriteAt([]byte{b}, int64(i)*block+block/2); err != nil {
				t.Fatal(err)
			}
		}
		if err := file.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(name, fi.ModTime(), fi.ModTime()); err != nil { // the modification time too is as it was
			t.Fatal(err)
		}
	}
	middles := func(body []byte) []byte {
		var m []byte
		for i := range 40 {
			if i*block+block/2 < len(body) {
				m = append(m, body[i*block+block/2])
			}
		}
		return m
	}
	// A file written long ago: its blocks are cached for every GET.
	time.Sleep(s3backend.DefaultSettle + 100*time.Millisecond)

	f := newFixture(t, 2, 4)
	_, mc, _ := startS3(t, f.store, func(c *gateway.Config) {
		c.S3.Buckets = []gateway.S3Bucket{{Name: "raw", URL: "file://" + dir}}
		c.S3.WholeObject, c.S3.Block = block, block
	})
	// The second half is read, and cached.
	opts := minio.GetObjectOptions{}
	_ = opts.SetRange(20*block, 0)
	got, err := readBucketObject(mc, "raw", "big.bin", opts)
	if err != nil || !bytes.Equal(got, data[20*block:]) {
		t.Fatalf("first GET: %v, %d bytes", err, len(got))
	}
	rewrite(22)
	want, _ := os.ReadFile(name)
	got, err = readBucketObject(mc, "raw", "big.bin", minio.GetObjectOptions{})
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after a same-size rewrite of the middle: %v; middle byte of each block %v, want all 22", err, middles(got))
	}

	// A GET the rewrite overtakes: its later blocks are read after it.
	u, err := mc.PresignedGetObject(context.Background(), "raw", "big.bin", time.Minute, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, 2*block)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	rewrite(33)
	rest, err := io.ReadAll(resp.Body)
	body := append(head, rest...)
	if m := middles(body); !bytes.Equal(m, bytes.Repeat([]byte{22}, len(m))) {
		t.Fatalf("one GET mixed versions: middle byte of each block %v (read error %v)", m, err)
	}
	if err == nil && len(body) == len(data) {
		t.Fatal("a GET overtaken by a rewrite was completed: every block was read before it?")
	}
}

// TestS3ReadThroughSymlinks: a symbolic link in a read-through directory
// — to the face's own credential file, or to a directory outside — is
// neither listed nor served.
func TestS3ReadThroughSymlinks(t *testing.T) {
	outside := t.TempDir()
	creds := filepath.Join(outside, "s3creds")
	if err := os.WriteFile(creds, []byte(s3ID+" "+s3Secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "real.txt"), []byte("real"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{"link.txt": creds, "out": outside, "same.txt": filepath.Join(dir, "real.txt")} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixture(t, 2, 4)
	_, mc, _ := startS3(t, f.store, func(c *gateway.Config) {
		c.S3.Buckets = []gateway.S3Bucket{{Name: "raw", URL: "file://" + dir}}
	})
	ctx := context.Background()
	var listed []string
	for _, prefix := range []string{"", "out/"} {
		for o := range mc.ListObjects(ctx, "raw", minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			listed = append(listed, o.Key)
		}
	}
	if !slices.Equal(listed, []string{"real.txt"}) {
		t.Fatalf("listed %v; want real.txt alone", listed)
	}
	for _, key := range []string{"link.txt", "out/s3creds", "same.txt"} {
		if b, err := readBucketObject(mc, "raw", key, minio.GetObjectOptions{}); s3Code(err) != "NoSuchKey" {
			t.Errorf("GET %s through a symbolic link: %v, %q", key, err, b)
		}
	}
	if b, err := readBucketObject(mc, "raw", "real.txt", minio.GetObjectOptions{}); err != nil || string(b) != "real" {
		t.Fatalf("real.txt: %v %q", err, b)
	}
}

// TestS3LastModifiedAfterRepack: a dataset file's Last-Modified is a real
// time, the index's, so that after a re-pack If-Modified-Since with the
// time a client saw answers 200 (with the tar headers' 1970 every date
// answered 304, and a client that revalidates by date never saw the new
// file).
func TestS3LastModifiedAfterRepack(t *testing.T) {
	f := newFixture(t, 2, 4)
	f.addMembers(t)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(filepath.Join(f.dir, chunkindex.IndexKey), old, old); err != nil {
		t.Fatal(err)
	}
	g, mc, endpoint := startS3(t, f.store, nil)
	const key = "class0/sample00000.jpg"
	st, err := mc.StatObject(context.Background(), "test", key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !st.LastModified.Equal(old) {
		t.Fatalf("Last-Modified %v; want the index's time %v", st.LastModified, old)
	}
	for o := range mc.ListObjects(context.Background(), "test", minio.ListObjectsOptions{Prefix: key}) {
		if !o.LastModified.Equal(old) {
			t.Fatalf("listed with LastModified %v, want %v", o.LastModified, old)
		}
	}
	since := st.LastModified.UTC().Format(http.TimeFormat)
	if status, _ := s3Request(t, endpoint, "GET", "/test/"+key, "", "If-Modified-Since", since); status != http.StatusNotModified {
		t.Fatalf("If-Modified-Since the time seen, before a re-pack: %d, want 304", status)
	}

	g2 := repack(t, f, 3, 4)
	g2.addMembers(t)
	if _, err := g.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	status, body := s3Request(t, endpoint, "GET", "/test/"+key, "", "If-Modified-Since", since)
	if status != http.StatusOK || !bytes.Equal(body, g2.content["class0/sample00000"]["jpg"]) {
		t.Fatalf("If-Modified-Since the time seen, after a re-pack: %d, %d bytes; want 200 and the new file", status, len(body))
	}
}

// TestS3FaceBounds: what S3 refuses, or answers as S3 does, rather than
// with a 500 or the whole object: keys too long, a name too long for the
// file system, prefixes no key has, a Range past 2^63, partNumber,
// garbage x-amz-content-sha256; and a huge key is not written whole into
// the log.
func TestS3FaceBounds(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "obj.txt"), []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, 2, 4)
	f.addMembers(t)
	logs := &hookWriter{}
	_, mc, endpoint := startS3(t, f.store, func(c *gateway.Config) {
		c.S3.Buckets = []gateway.S3Bucket{{Name: "raw", URL: "file://" + dir}}
		c.Logger = zerolog.New(logs)
	})
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
		status, body := s3Request(t, endpoint, "GET", tt.path, tt.query, tt.hdr...)
		if status != tt.status {
			t.Errorf("%s: %d %.300s, want %d", tt.name, status, body, tt.status)
		}
		if tt.status == http.StatusOK && !strings.Contains(string(body), "<KeyCount>0</KeyCount>") {
			t.Errorf("%s: %.300s, want an empty listing", tt.name, body)
		}
	}
	// A presigned URL's request carries an x-amz-content-sha256 its
	// signature does not cover: it is checked all the same.
	u, err := mc.PresignedGetObject(context.Background(), "raw", "obj.txt", time.Minute, nil)
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

// holdStore holds the reads hold picks until their context ends, and a
// moment after (a store read notices a cancel only at its next step),
// counting those running.
type holdStore struct {
	s3backend.Store
	hold    func(key string, off int64) bool
	running atomic.Int64
}

func (h *holdStore) ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error {
	if !h.hold(key, off) {
		return h.Store.ReadRange(ctx, key, etag, off, p)
	}
	h.running.Add(1)
	defer h.running.Add(-1)
	<-ctx.Done()
	time.Sleep(50 * time.Millisecond)
	return ctx.Err()
}

// TestS3CloseStopsLoadsAhead: Close right after GETs that started loads
// ahead — a dataset's next chunks after its chunks were read in order, a
// read-through object's next blocks — returns with none of them running.
func TestS3CloseStopsLoadsAhead(t *testing.T) {
	f := newFixture(t, 6, 4)
	f.addMembers(t)
	chunks := &holdStore{Store: f.store, hold: func(key string, _ int64) bool {
		return key >= "chunks/000002.tar" && strings.HasPrefix(key, "chunks/")
	}}
	dir := t.TempDir()
	shards, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	const block = 1 << 20
	big := bytes.Repeat([]byte("block"), 4*block/5)
	if _, err := shards.Put(context.Background(), "big.bin", bytes.NewReader(big), int64(len(big))); err != nil {
		t.Fatal(err)
	}
	blocks := &holdStore{Store: shards, hold: func(_ string, off int64) bool { return off > 0 }}
	creds, err := s3auth.ParseCredentials(strings.NewReader(s3ID + " " + s3Secret + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(gateway.Config{
		Datasets:  []gateway.DatasetSpec{{Name: "test", URL: "file:///fixture", Store: chunks}},
		CacheSize: 64 << 20,
		S3: gateway.S3Config{Credentials: creds, ReadAhead: 2, WholeObject: block, Block: block,
			Buckets: []gateway.S3Bucket{{Name: "raw", URL: "file://" + dir, Store: blocks}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(g.S3Handler())
	defer srv.Close()
	mc := s3Client(t, srv.URL, s3ID, s3Secret)
	readObject(t, mc, "class0/sample00000.jpg", minio.GetObjectOptions{}) // chunk 0
	readObject(t, mc, "class1/sample00004.jpg", minio.GetObjectOptions{}) // chunk 1: chunks 2 and 3 load ahead

	// A whole-object GET: its first block is written, blocks 1 and 2
	// load ahead (and hold); the client leaves.
	ctx, cancel := context.WithCancel(context.Background())
	obj, err := mc.GetObject(ctx, "raw", "big.bin", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(obj, make([]byte, block)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); chunks.running.Load() < 2 || blocks.running.Load() < 2; {
		if time.Now().After(deadline) {
			t.Fatalf("loads ahead running: %d chunks, %d blocks; want 2 and 2", chunks.running.Load(), blocks.running.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	obj.Close()
	g.Close()
	if c, b := chunks.running.Load(), blocks.running.Load(); c != 0 || b != 0 {
		t.Fatalf("after Close: %d chunk loads and %d block loads still running", c, b)
	}
}
