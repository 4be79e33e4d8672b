package s3face

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/s3backend"
)

// TestReadThrough: objects of a store read through the face are listed
// by prefix and served from the cache the second time, whole or in
// blocks, a range across a block boundary included; a changed object is
// read again, and an unknown one is NoSuchKey.
func TestReadThrough(t *testing.T) {
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
	cs := s3test.Wrap(shards)
	mc := startFace(t, 64<<20, Config{WholeObject: 1 << 20, Block: 1 << 20,
		Buckets: []Bucket{{Name: "raw", URL: "file://" + dir, Store: cs}}})
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
			got, err := getObject(mc, "raw", name, minio.GetObjectOptions{})
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("epoch %d %s: %v, %d bytes", epoch, name, err, len(got))
			}
		}
		if read, want := cs.Take().Sum().Bytes, int64(len(small)+len(large)); (epoch == 0 && read != want) || (epoch == 1 && read != 0) {
			t.Fatalf("epoch %d read %d bytes from the store", epoch, read)
		}
	}
	opts := minio.GetObjectOptions{}
	_ = opts.SetRange(1<<20-10, 1<<20+9) // across a block boundary
	if got, err := getObject(mc, "raw", "shards/b-001.tar", opts); err != nil || !bytes.Equal(got, large[1<<20-10:1<<20+10]) {
		t.Fatalf("range across blocks: %v", err)
	}
	// A changed object is read again, never served stale.
	if err := os.WriteFile(filepath.Join(dir, "shards/a-000.tar"), []byte("rewritten"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := getObject(mc, "raw", "shards/a-000.tar", minio.GetObjectOptions{}); err != nil || string(got) != "rewritten" {
		t.Fatalf("after a rewrite: %v %q", err, got)
	}
	if _, err := getObject(mc, "raw", "shards/none.tar", minio.GetObjectOptions{}); s3Code(err) != "NoSuchKey" {
		t.Fatalf("unknown object: %v", err)
	}
}

// TestReadThroughLocalRewrite: a same-size rewrite of the middle of a
// local read-through object — which keeps the store's content ETag, its
// first and last 64 KiB unchanged — is served new and whole after blocks
// of the old one were cached (they were served stale, or mixed with new
// blocks the cache had evicted), and a GET that the rewrite overtakes is
// cut short, never completed with the new version's blocks.
//
// The overtaken GET's premise, that blocks past its first few are read
// from the store after the rewrite, is held by the test rather than left
// to timing: its version is one no GET has read before (a rewrite with
// the same bytes just before it), so the cache holds none of its blocks,
// and its reads past the fourth block wait at a gate until the rewrite is
// done. Left to timing it failed about one run in three on a loaded
// machine, in two ways: the version read by the GET before it was
// settled by the time that GET asked (DefaultSettle after the rewrite),
// so its blocks were cached for every later GET of it and this one read
// none; and a loopback connection buffers tens of MiB (a receive buffer
// up to tcp_rmem's 32 MiB), so the face could read every block before the
// test, having taken its first two, rewrote the file. Either way the GET
// was served whole and of one version, as S3 serves a GET an overwrite
// overtakes: not a fault of the face's, but not what the test checks.
func TestReadThroughLocalRewrite(t *testing.T) {
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

	local, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	gated := s3test.Wrap(local.Live(s3backend.DefaultSettle))
	mc := startFace(t, 64<<20, Config{WholeObject: block, Block: block,
		Buckets: []Bucket{{Name: "raw", URL: "file://" + dir, Store: gated}}})
	// The second half is read, and cached.
	opts := minio.GetObjectOptions{}
	_ = opts.SetRange(20*block, 0)
	got, err := getObject(mc, "raw", "big.bin", opts)
	if err != nil || !bytes.Equal(got, data[20*block:]) {
		t.Fatalf("first GET: %v, %d bytes", err, len(got))
	}
	rewrite(22)
	want, _ := os.ReadFile(name)
	got, err = getObject(mc, "raw", "big.bin", minio.GetObjectOptions{})
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("after a same-size rewrite of the middle: %v; middle byte of each block %v, want all 22", err, middles(got))
	}

	// A GET the rewrite overtakes: its later blocks are read after it.
	// Its version is new, so no block of it is cached (the one above may
	// be settled by now, and all its blocks cached), and its reads past
	// the fourth block wait for the rewrite.
	rewrite(22)
	gate := gated.Gate(func(c s3test.Call) bool { return c.Op == s3backend.OpGet && c.Off >= 4*block })
	t.Cleanup(gate.Open) // a test that fails before the rewrite lets held reads go
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
	select {
	case <-gate.Waiting():
	case <-time.After(time.Minute):
		t.Fatal("the GET read no block past its fourth from the store within a minute: the test's premise")
	}
	rewrite(33)
	gate.Open()
	rest, err := io.ReadAll(resp.Body)
	body := append(head, rest...)
	if m := middles(body); !bytes.Equal(m, bytes.Repeat([]byte{22}, len(m))) {
		t.Fatalf("one GET mixed versions: middle byte of each block %v (read error %v)", m, err)
	}
	if err == nil && len(body) == len(data) {
		t.Fatal("a GET overtaken by a rewrite was completed: every block was read before it?")
	}
}

// TestReadThroughSymlinks: a symbolic link in a read-through directory
// — to a credential file outside, or to a directory outside, or to a
// file inside — is neither listed nor served.
func TestReadThroughSymlinks(t *testing.T) {
	outside := t.TempDir()
	creds := filepath.Join(outside, "s3creds")
	if err := os.WriteFile(creds, []byte(testID+" "+testSecret+"\n"), 0o600); err != nil {
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
	mc := startFace(t, 64<<20, Config{Buckets: []Bucket{{Name: "raw", URL: "file://" + dir}}})
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
		if b, err := getObject(mc, "raw", key, minio.GetObjectOptions{}); s3Code(err) != "NoSuchKey" {
			t.Errorf("GET %s through a symbolic link: %v, %q", key, err, b)
		}
	}
	if b, err := getObject(mc, "raw", "real.txt", minio.GetObjectOptions{}); err != nil || string(b) != "real" {
		t.Fatalf("real.txt: %v %q", err, b)
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

// TestCloseStopsLoadsAhead: the face starts its loads ahead — a dataset's
// next chunks after its chunks were read in order, a read-through
// object's next blocks — only through its parts, so that closing them
// (the set of work ahead, then the cache, as the gateway's Close does)
// right after the GETs returns with none of them running.
func TestCloseStopsLoadsAhead(t *testing.T) {
	d := packTar(t, t.TempDir(), 6, 4, true)
	chunks := &holdStore{Store: d.store, hold: func(key string, _ int64) bool {
		return key >= "chunks/000002.tar" && strings.HasPrefix(key, "chunks/")
	}}
	shards, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const block = 1 << 20
	big := bytes.Repeat([]byte("block"), 4*block/5)
	if _, err := shards.Put(context.Background(), "big.bin", bytes.NewReader(big), int64(len(big))); err != nil {
		t.Fatal(err)
	}
	blocks := &holdStore{Store: shards, hold: func(_ string, off int64) bool { return off > 0 }}
	face := startTarFace(t, chunks, Config{ReadAhead: 2, WholeObject: block, Block: block,
		Buckets: []Bucket{{Name: "raw", Store: blocks}}}, zerolog.Nop())
	for _, key := range []string{"class0/sample00000.jpg", "class1/sample00004.jpg"} { // chunk 0, chunk 1: chunks 2 and 3 load ahead
		if _, err := getObject(face.mc, "test", key, minio.GetObjectOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A whole-object GET: its first block is written, blocks 1 and 2
	// load ahead (and hold); the client leaves.
	ctx, cancel := context.WithCancel(context.Background())
	obj, err := face.mc.GetObject(ctx, "raw", "big.bin", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(obj, make([]byte, block)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); chunks.running.Load() < 2 || blocks.running.Load() < 2; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("loads ahead running: %d chunks, %d blocks; want 2 and 2", chunks.running.Load(), blocks.running.Load())
		}
	}
	cancel()
	obj.Close()
	face.close()
	if c, b := chunks.running.Load(), blocks.running.Load(); c != 0 || b != 0 {
		t.Fatalf("after Close: %d chunk loads and %d block loads still running", c, b)
	}
}
