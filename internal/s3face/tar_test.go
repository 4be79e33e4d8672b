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
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/signer"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/respond"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/preload"
	"github.com/brandgw/brand/internal/cluster/route"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/s3face/s3auth"
	"github.com/brandgw/brand/s3backend"
)

// tarData is a tar dataset written as chunks into a local store, with
// the source bytes of every file (key.ext) kept for comparison: sample id
// is class{id%3}/sample{id}, a .cls and a .jpg of 300 to 2,700 bytes.
type tarData struct {
	dir     string
	store   *s3backend.Local
	index   *chunkindex.Index
	content map[string][]byte // file name -> bytes
}

// packTar packs chunks chunks of perChunk samples into dir, replacing
// what is there (the index last, as a packer writes it), and with the
// member table `brand index` writes if members.
func packTar(t *testing.T, dir string, chunks, perChunk int, members bool) *tarData {
	t.Helper()
	ctx := context.Background()
	store, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	d := &tarData{dir: dir, store: store, content: map[string][]byte{}}
	var cs []chunkindex.Chunk
	var ss []chunkindex.Sample
	var mb chunkindex.MembersBuilder
	id, added := 0, 0
	for c := range chunks {
		var buf bytes.Buffer
		w := chunkindex.NewChunkWriter(&buf)
		for range perChunk {
			key := fmt.Sprintf("class%d/sample%05d", id%3, id)
			img := bytes.Repeat([]byte{byte(id), byte(id >> 8), byte(c)}, 100+(id*37)%900)
			cls := []byte(fmt.Sprint(id % 3))
			d.content[key+".jpg"], d.content[key+".cls"] = img, cls
			off, n, crc, err := w.WriteSample(key, []chunkindex.Member{
				{Name: key + ".cls", Size: int64(len(cls)), Body: bytes.NewReader(cls)},
				{Name: key + ".jpg", Size: int64(len(img)), Body: bytes.NewReader(img)}})
			if err != nil {
				t.Fatal(err)
			}
			ss = append(ss, chunkindex.Sample{Key: key, Chunk: c, Offset: off, Length: n, CRC: crc})
			id++
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		// The member table, read from the chunk as `brand index` reads it.
		if _, err := chunkindex.ScanTar(bytes.NewReader(buf.Bytes()), func(s chunkindex.TarSample) error {
			err := mb.Add(added, s.Files)
			added++
			return err
		}); err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("chunks/%06d.tar", c)
		info, err := store.Put(ctx, name, bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, chunkindex.Chunk{Key: name, Size: info.Size, ETag: info.ETag, Samples: perChunk})
	}
	if d.index, err = chunkindex.New(cs, ss); err != nil {
		t.Fatal(err)
	}
	put := func(key string, b []byte) {
		if _, err := store.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if members {
		enc, err := mb.Encode(ctx, d.index)
		if err != nil {
			t.Fatal(err)
		}
		put(chunkindex.MembersKey, enc)
	}
	b, err := d.index.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	put(chunkindex.IndexKey, b)
	return d
}

// catalogVersions is the catalog's datasets, each at its current
// version, as a single gateway's face sees them.
type catalogVersions struct{ *catalog.Catalog }

func (c catalogVersions) Version(name string) (*catalog.Dataset, error) { return c.Get(name) }

// tarFace is a face serving dataset "test" on its real parts — the
// catalog's loader, a cache, the reader, the writer, the set of work
// ahead — beside the read-through buckets of cfg.
type tarFace struct {
	mc       *minio.Client
	endpoint string
	cat      *catalog.Catalog
	reg      *prometheus.Registry
	close    func() // the face's parts, as their owner closes them
}

// startTarFace runs a face over store (the dataset "test") with cfg,
// logging to log.
func startTarFace(t *testing.T, store s3backend.Store, cfg Config, log zerolog.Logger) *tarFace {
	t.Helper()
	ctx := context.Background()
	ds, err := catalog.Load(ctx, catalog.Spec{Name: "test", URL: "file:///fixture", Store: store}, s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	cat := catalog.New([]string{"test"}, "test", catalog.NewMetrics(reg), zerolog.Nop())
	cat.Add(ds)
	cat.MarkReady()
	if cfg.Credentials == nil {
		creds, err := s3auth.ParseCredentials(strings.NewReader(testID + " " + testSecret))
		if err != nil {
			t.Fatal(err)
		}
		cfg.Credentials = creds
	}
	const cacheSize = 64 << 20
	objects := NewReadThrough(cfg, cacheSize, time.Minute)
	loader := catalog.NewLoader(cat, time.Minute, 1)
	cache := chunkcache.New(chunkcache.Config{Capacity: cacheSize, Loader: chunkcache.BySpace{Chunks: loader, Objects: objects}, MaxWait: time.Minute})
	set := preload.New(preload.Config{Slots: 8, Cache: cache})
	var once sync.Once
	closeParts := func() { once.Do(func() { set.Close(); cache.Close() }) }
	t.Cleanup(closeParts)
	solo := route.Solo{}
	rd := reader.New(reader.Config{Cache: cache, Loader: loader, Remote: solo, MaxBytes: 256 << 20, Copies: copies(64 << 20), Assemblers: 1,
		MaxWait: time.Minute, Registry: reg, Log: zerolog.Nop()})
	f := New(cfg, Deps{Versions: catalogVersions{cat}, Reader: rd, Writer: respond.New(respond.Config{}), Preload: set, Cluster: solo,
		Objects: objects, FetchTimeout: time.Minute, Started: time.Now(), Registry: reg, Log: log})
	if err := f.Open(ctx, s3backend.Config{}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return &tarFace{mc: faceClient(t, srv.URL, testID, testSecret), endpoint: srv.URL, cat: cat, reg: reg, close: closeParts}
}

// faceClient is a minio-go client of the face at endpoint signing with
// the key id and secret.
func faceClient(t *testing.T, endpoint, id, secret string) *minio.Client {
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

// signedRequest sends a request to the face at endpoint signed with
// Signature V4 (hdr: name, value, ...), with the payload hash
// UNSIGNED-PAYLOAD unless hdr sets one, and returns the status and body.
func signedRequest(t *testing.T, endpoint, method, path, query string, hdr ...string) (int, []byte) {
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
	resp, err := http.DefaultClient.Do(signer.SignV4(*req, testID, testSecret, "", "us-east-1"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// s3Code is the S3 error code of err, or err itself.
func s3Code(err error) string {
	if r := minio.ToErrorResponse(err); r.Code != "" {
		return r.Code
	}
	return fmt.Sprint(err)
}

// requests is the face's count of requests of op answered with code.
func requests(t *testing.T, reg *prometheus.Registry, op, code string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "brand_s3_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["op"] == op && labels["code"] == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// servedBytes is the face's count of bytes served.
func servedBytes(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	n, err := testutil.GatherAndCount(reg, "brand_s3_served_bytes_total")
	if err != nil || n != 1 {
		t.Fatalf("brand_s3_served_bytes_total: %d series, %v", n, err)
	}
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "brand_s3_served_bytes_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	return 0
}

// syncBuffer is a log destination safe for the face's concurrent
// requests.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
