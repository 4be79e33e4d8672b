package s3face

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/respond"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/preload"
	"github.com/brandgw/brand/internal/cluster/route"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/s3face/s3auth"
	"github.com/brandgw/brand/internal/server/memory"
	"github.com/brandgw/brand/internal/testsupport/s3test"
	"github.com/brandgw/brand/s3backend"
)

const (
	testID     = "facetest"
	testSecret = "face-test-secret-key"
)

// noDatasets is Versions without datasets: the face's read-through
// buckets alone.
type noDatasets struct{}

func (noDatasets) Names() []string { return nil }
func (noDatasets) Version(name string) (*catalog.Dataset, error) {
	return nil, fmt.Errorf("%w: %s", catalog.ErrUnknown, name)
}

// startFace runs a face on its real parts — a cache whose Object entries
// its read-through buckets load, the reader, the writer, the set of work
// ahead — with the buckets given, and returns a minio-go client of it.
func startFace(t *testing.T, cacheSize int64, cfg Config) *minio.Client {
	t.Helper()
	return startFaceWith(t, cacheSize, cfg, respond.Config{}, false)
}

// startFaceWith is startFace with the writer configured as wc, over TLS
// if tls.
func startFaceWith(t *testing.T, cacheSize int64, cfg Config, wc respond.Config, tls bool) *minio.Client {
	t.Helper()
	creds, err := s3auth.ParseCredentials(strings.NewReader(testID + " " + testSecret))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Credentials = creds
	objects := NewReadThrough(cfg, cacheSize, time.Minute)
	cache := chunkcache.New(chunkcache.Config{Capacity: cacheSize, Loader: chunkcache.BySpace{Objects: objects}})
	set := preload.New(preload.Config{Slots: 8, Cache: cache})
	t.Cleanup(cache.Close)
	t.Cleanup(set.Close) // before the cache's: cleanups run last first
	reg := prometheus.NewRegistry()
	solo := route.Solo{}
	rd := reader.New(reader.Config{Cache: cache, Remote: solo, MaxBytes: 256 << 20, Copies: copies(64 << 20), Assemblers: 1,
		MaxWait: time.Minute, Registry: reg, Log: zerolog.Nop()})
	f := New(cfg, Deps{Versions: noDatasets{}, Reader: rd, Writer: respond.New(wc), Preload: set, Cluster: solo,
		Objects: objects, FetchTimeout: time.Minute, Started: time.Now(), Registry: reg, Log: zerolog.Nop()})
	if err := f.Open(context.Background(), s3backend.Config{}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(f)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	mc, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(testID, testSecret, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath, MaxRetries: 1, Secure: tls, Transport: srv.Client().Transport})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

func getObject(mc *minio.Client, bucket, key string, opts minio.GetObjectOptions) ([]byte, error) {
	obj, err := mc.GetObject(context.Background(), bucket, key, opts)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	return io.ReadAll(obj)
}

// TestReadThroughBlocks: an object larger than a block is read block by
// block through the reader from the cache; ranges across blocks, HEAD and
// an empty object answer as S3 does; a settled version is read from the
// store once, an unsettled one for each GET.
func TestReadThroughBlocks(t *testing.T) {
	dir := t.TempDir()
	local, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	big := make([]byte, 3<<20+12345)
	for i := range big {
		big[i] = byte(i * 7 % 251)
	}
	ctx := context.Background()
	for key, b := range map[string][]byte{"big.bin": big, "empty": nil} {
		if _, err := local.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	settled := s3test.Wrap(local.Live(0))
	unsettled := s3test.Wrap(local.Live(time.Hour))
	mc := startFace(t, 32<<20, Config{WholeObject: 1 << 20, Block: 1 << 20,
		Buckets: []Bucket{{Name: "settled", Store: settled}, {Name: "unsettled", Store: unsettled}}})

	for round := range 2 {
		got, err := getObject(mc, "settled", "big.bin", minio.GetObjectOptions{})
		if err != nil || !bytes.Equal(got, big) {
			t.Fatalf("round %d: %v, %d bytes", round, err, len(got))
		}
		if n := settled.Take().Sum().Bytes; (round == 0) != (n == int64(len(big))) || (round == 1 && n != 0) {
			t.Fatalf("round %d of a settled version read %d bytes from the store", round, n)
		}
		if got, err = getObject(mc, "unsettled", "big.bin", minio.GetObjectOptions{}); err != nil || !bytes.Equal(got, big) {
			t.Fatalf("round %d, unsettled: %v", round, err)
		}
		if n := unsettled.Take().Sum().Bytes; n != int64(len(big)) {
			t.Fatalf("round %d of an unsettled version read %d bytes from the store, want all %d", round, n, len(big))
		}
	}
	opts := minio.GetObjectOptions{}
	_ = opts.SetRange(1<<20-10, 2<<20+9) // three blocks
	if got, err := getObject(mc, "settled", "big.bin", opts); err != nil || !bytes.Equal(got, big[1<<20-10:2<<20+10]) {
		t.Fatalf("range across blocks: %v, %d bytes", err, len(got))
	}
	st, err := mc.StatObject(ctx, "settled", "big.bin", minio.StatObjectOptions{})
	if err != nil || st.Size != int64(len(big)) || st.ETag == "" {
		t.Fatalf("HEAD: %v %+v", err, st)
	}
	if got, err := getObject(mc, "settled", "empty", minio.GetObjectOptions{}); err != nil || len(got) != 0 {
		t.Fatalf("empty object: %v %d", err, len(got))
	}
	var names []string
	for o := range mc.ListObjects(ctx, "settled", minio.ListObjectsOptions{Recursive: true}) {
		names = append(names, o.Key)
	}
	if strings.Join(names, " ") != "big.bin empty" {
		t.Fatalf("listing: %v", names)
	}
	buckets, err := mc.ListBuckets(ctx)
	if err != nil || len(buckets) != 2 {
		t.Fatalf("ListBuckets: %v %+v", err, buckets)
	}
	if _, err := getObject(mc, "nosuch", "x", minio.GetObjectOptions{}); err == nil {
		t.Fatal("a bucket that does not exist")
	}
}

// TestReadThroughBlockKeys: the cache entries of a read-through object are
// Object entries of its bucket and version, whole up to the whole-object
// size and aligned blocks beyond, each capped at an eighth of the cache;
// an unsettled version's are each GET's own.
func TestReadThroughBlockKeys(t *testing.T) {
	rt := NewReadThrough(Config{WholeObject: 100, Block: 64}, 8<<10, time.Minute)
	whole := rt.entries("b", "k", "v", false, 100, 10, 20)
	if len(whole) != 1 || whole[0].Key != (chunkcache.Key{Space: chunkcache.Object, Dataset: "b", Object: "k", ETag: "v"}) || whole[0].Size != 100 {
		t.Fatalf("whole: %+v", whole)
	}
	blocks := rt.entries("b", "k", "v", false, 300, 70, 100) // bytes [70, 170): blocks at 64 and 128
	if len(blocks) != 2 || blocks[0].Key.Offset != 64 || blocks[1].Key.Offset != 128 || blocks[1].Size != 64 {
		t.Fatalf("blocks: %+v", blocks)
	}
	last := rt.entries("b", "k", "v", false, 300, 290, 10)
	if len(last) != 1 || last[0].Key.Offset != 256 || last[0].Size != 44 {
		t.Fatalf("last block: %+v", last)
	}
	small := NewReadThrough(Config{}, 8<<20, time.Minute)
	if small.wholeMax != 1<<20 || small.block != 1<<20 {
		t.Fatalf("capped at an eighth of the cache: whole %d, block %d", small.wholeMax, small.block)
	}
	a := rt.entries("b", "k", "v", true, 50, 0, 50)
	b := rt.entries("b", "k", "v", true, 50, 0, 50)
	if a[0].Key == b[0].Key {
		t.Fatalf("two GETs of an unsettled version share the entry %s", a[0].Key)
	}
}

// TestReadThroughNotReady: before the server is ready every request is
// ServiceUnavailable with Retry-After, which S3 clients retry.
func TestReadThroughNotReady(t *testing.T) {
	creds, _ := s3auth.ParseCredentials(strings.NewReader(testID + " " + testSecret))
	f := New(Config{Credentials: creds}, Deps{Versions: noDatasets{}, Ready: ReadinessFunc(func() error {
		return fmt.Errorf("%w: loading", catalog.ErrNotReady)
	}), Registry: prometheus.NewRegistry(), Log: zerolog.Nop()})
	srv := httptest.NewServer(f)
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	mc, _ := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(testID, testSecret, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath, MaxRetries: 1})
	_, err := mc.ListBuckets(context.Background())
	var r minio.ErrorResponse
	if !asErrorResponse(err, &r) || r.Code != "ServiceUnavailable" || r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("not ready: %v", err)
	}
}

func asErrorResponse(err error, r *minio.ErrorResponse) bool {
	if err == nil {
		return false
	}
	*r = minio.ToErrorResponse(err)
	return r.Code != ""
}

// TestReadThroughUnderPressure: over TLS, where the writer gives a body's
// pins back before it writes when the cache is under pressure, a
// read-through object streamed block by block is written whole, each
// block copied out of the cache.
func TestReadThroughUnderPressure(t *testing.T) {
	dir := t.TempDir()
	local, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("pressure"), 3<<17) // 3 MiB
	if _, err := local.Put(context.Background(), "big.bin", bytes.NewReader(big), int64(len(big))); err != nil {
		t.Fatal(err)
	}
	always := func(bool) bool { return true }
	mc := startFaceWith(t, 32<<20, Config{WholeObject: 1 << 20, Block: 1 << 20, Buckets: []Bucket{{Name: "raw", Store: local.Live(0)}}},
		respond.Config{Pressure: always}, true)
	if got, err := getObject(mc, "raw", "big.bin", minio.GetObjectOptions{}); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("under pressure: %v, %d bytes", err, len(got))
	}
}

// copies is a copy budget of n bytes, as the node's memory manager gives.
func copies(n int64) reader.Copies {
	return memory.New(memory.Config{Budget: memory.Budget{Copies: n}, MaxWait: time.Minute, Busy: chunkcache.ErrBusy}).Copies()
}
