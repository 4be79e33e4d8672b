package s3face

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/format/formattest"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/respond"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/preload"
	"github.com/brandgw/brand/internal/cluster/route"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/s3face/s3auth"
	"github.com/brandgw/brand/s3backend"
)

// oneDataset is Versions of one dataset version.
type oneDataset struct{ ds *catalog.Dataset }

func (o oneDataset) Names() []string { return []string{o.ds.Name} }
func (o oneDataset) Version(name string) (*catalog.Dataset, error) {
	if name != o.ds.Name {
		return nil, fmt.Errorf("%w: %s", catalog.ErrUnknown, name)
	}
	return o.ds, nil
}

// dataReads is a store that counts the bytes read of its data objects
// (*.lines) and the most reads of them in flight at once, each read
// taking a moment so that concurrent ones overlap.
type dataReads struct {
	s3backend.Store
	mu             sync.Mutex
	bytes          int64
	inFlight, most int
	delay          time.Duration
}

func (d *dataReads) ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error {
	if !strings.HasSuffix(key, ".lines") {
		return d.Store.ReadRange(ctx, key, etag, off, p)
	}
	d.mu.Lock()
	d.inFlight++
	d.most = max(d.most, d.inFlight)
	d.mu.Unlock()
	time.Sleep(d.delay)
	err := d.Store.ReadRange(ctx, key, etag, off, p)
	d.mu.Lock()
	d.inFlight--
	d.bytes += int64(len(p))
	d.mu.Unlock()
	return err
}

func (d *dataReads) take() (bytes int64, most int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	bytes, most = d.bytes, d.most
	d.bytes, d.most = 0, 0
	return bytes, most
}

// inPlaceFace serves a dataset of .lines files served in place (package
// formattest's format: each line a sample of a "txt" member, the line,
// and a "cls", its length) through a face on its real parts — the
// catalog's loader, a cache, the reader, the writer — and returns a
// minio-go client of it, the lines by key, the store's counter and the
// data objects' bytes. One object's path is long enough that its
// members' names take PAX headers.
func inPlaceFace(t *testing.T, cacheSize int64) (*minio.Client, map[string]string, *dataReads, int64) {
	t.Helper()
	ctx := context.Background()
	local, err := s3backend.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	files := map[string][]string{}
	long := "deep/" + strings.Repeat("d", 110)
	var total int64
	for f, stem := range []string{"a/f0", "a/f1", long + "/f2"} {
		for l := range 30 {
			line := fmt.Sprintf("file %d line %d %s", f, l, strings.Repeat("x", (f*30+l)%41))
			files[stem+".lines"] = append(files[stem+".lines"], line)
			want[fmt.Sprintf("%s/%d", stem, l)] = line
			total += int64(len(line) + 1)
		}
	}
	for k, b := range formattest.Write(files) {
		if _, err := local.Put(ctx, k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	lines := formattest.Lines{}
	if _, err := dataset.IndexInPlace(ctx, local, local, dataset.InPlaceOptions{Formats: []format.Format{lines},
		Options: format.Options{ChunkBytes: 200}}); err != nil {
		t.Fatal(err)
	}
	store := &dataReads{Store: local, delay: 2 * time.Millisecond}
	ds, err := catalog.Load(ctx, catalog.Spec{Name: "lines", URL: "file:///lines", Store: store, Formats: []format.Format{lines}},
		s3backend.Config{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if ds.InPlace == nil || ds.Index.NumChunks() < 3*listChunks {
		t.Fatalf("the fixture: %d chunks, in place: %v", ds.Index.NumChunks(), ds.InPlace != nil)
	}
	reg := prometheus.NewRegistry()
	cat := catalog.New([]string{"lines"}, "lines", catalog.NewMetrics(reg), zerolog.Nop())
	cat.Add(ds)
	cat.MarkReady()
	creds, err := s3auth.ParseCredentials(strings.NewReader(testID + " " + testSecret))
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Credentials: creds}
	objects := NewReadThrough(cfg, cacheSize, time.Minute)
	loader := catalog.NewLoader(cat, time.Minute, 1)
	cache := chunkcache.New(chunkcache.Config{Capacity: cacheSize, Loader: chunkcache.BySpace{Chunks: loader, Objects: objects}, MaxWait: time.Minute})
	set := preload.New(preload.Config{Slots: 8, Cache: cache})
	t.Cleanup(cache.Close)
	t.Cleanup(set.Close)
	solo := route.Solo{}
	rd := reader.New(reader.Config{Cache: cache, Loader: loader, Remote: solo, MaxBytes: 256 << 20, Copies: copies(64 << 20), Assemblers: 1,
		MaxWait: time.Minute, Registry: reg, Log: zerolog.Nop()})
	f := New(cfg, Deps{Versions: oneDataset{ds}, Reader: rd, Writer: respond.New(respond.Config{}), Preload: set, Cluster: solo,
		Objects: objects, FetchTimeout: time.Minute, Started: time.Now(), Registry: reg, Log: zerolog.Nop()})
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	mc, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(testID, testSecret, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	return mc, want, store, total
}

// A dataset served in place, which has no member table, is a bucket of
// its samples' files as a tar dataset is: a GET or HEAD of key.ext reads
// the sample through the reader (one load of its chunk, then hits) and
// serves the member found in its decoded bytes, names of over 100 bytes
// (PAX headers) included, with S3's preconditions and ranges; an
// extension or key the dataset lacks is NoSuchKey.
func TestInPlaceObjects(t *testing.T) {
	mc, want, store, _ := inPlaceFace(t, 64<<20)
	ctx := context.Background()
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	})
	etags := map[string]string{}
	for _, k := range keys {
		for ext, body := range map[string]string{"txt": want[k], "cls": strconv.Itoa(len(want[k]))} {
			name := k + "." + ext
			st, err := mc.StatObject(ctx, "lines", name, minio.StatObjectOptions{})
			if err != nil || st.Size != int64(len(body)) || st.ETag == "" {
				t.Fatalf("HEAD %s: %v, %d bytes, want %d", name, err, st.Size, len(body))
			}
			got, err := getObject(mc, "lines", name, minio.GetObjectOptions{})
			if err != nil || string(got) != body {
				t.Fatalf("GET %s: %v, %q, want %q", name, err, got, body)
			}
			etags[name] = st.ETag
		}
	}
	read, _ := store.take()
	if read != storeBytes(t, store) {
		t.Errorf("HEAD and GET of every file read %d bytes from the store; the dataset's objects are %d: each chunk once", read, storeBytes(t, store))
	}
	name := keys[len(keys)-1] + ".txt"
	if !strings.HasPrefix(name, "deep/") || len(name) <= 100 {
		t.Fatalf("the longest name is %q", name)
	}
	opts := minio.GetObjectOptions{}
	_ = opts.SetRange(2, 6)
	if got, err := getObject(mc, "lines", name, opts); err != nil || string(got) != want[keys[len(keys)-1]][2:7] {
		t.Errorf("a range of %s: %q %v", name, got, err)
	}
	opts = minio.GetObjectOptions{}
	_ = opts.SetMatchETagExcept(etags[name])
	if _, err := getObject(mc, "lines", name, opts); minio.ToErrorResponse(err).StatusCode != http.StatusNotModified {
		t.Errorf("If-None-Match of its ETag: %v", err)
	}
	for _, missing := range []string{keys[0] + ".jpg", keys[0], "a/f0/999.txt", "nosuch/file.txt"} {
		if _, err := getObject(mc, "lines", missing, minio.GetObjectOptions{}); minio.ToErrorResponse(err).Code != "NoSuchKey" {
			t.Errorf("GET %s: %v, want NoSuchKey", missing, err)
		}
	}
}

// A listing of a dataset served in place reads every chunk once through
// the reader (at most listChunks at once) and decodes it for its
// members' names and sizes, once per dataset version: a second listing
// reads nothing. Names, sizes and ETags are a GET's.
func TestInPlaceListing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		cache int64
	}{{"cache holds the dataset", 64 << 20}, {"cache of two chunks", 4 << 10}} {
		t.Run(tc.name, func(t *testing.T) {
			mc, want, store, total := inPlaceFace(t, tc.cache)
			ctx := context.Background()
			for round := range 2 {
				var names []string
				sizes := map[string]int64{}
				etags := map[string]string{}
				for o := range mc.ListObjects(ctx, "lines", minio.ListObjectsOptions{Recursive: true}) {
					if o.Err != nil {
						t.Fatal(o.Err)
					}
					names = append(names, o.Key)
					sizes[o.Key], etags[o.Key] = o.Size, o.ETag
				}
				read, most := store.take()
				if round == 0 && (read != total || most > listChunks) {
					t.Errorf("the first listing read %d bytes of the dataset's %d, %d reads at once (at most %d)", read, total, most, listChunks)
				}
				if round == 1 && read != 0 {
					t.Errorf("the second listing read %d bytes from the store", read)
				}
				if len(names) != 2*len(want) || !slices.IsSorted(names) {
					t.Fatalf("%d names (sorted: %v) for %d samples of 2 members", len(names), slices.IsSorted(names), len(want))
				}
				for k, line := range want {
					if sizes[k+".txt"] != int64(len(line)) || sizes[k+".cls"] != int64(len(strconv.Itoa(len(line)))) {
						t.Fatalf("%s: listed sizes %d and %d", k, sizes[k+".txt"], sizes[k+".cls"])
					}
				}
				if round == 1 {
					for _, n := range []string{names[0], names[len(names)-1]} {
						st, err := mc.StatObject(ctx, "lines", n, minio.StatObjectOptions{})
						if err != nil || st.ETag != etags[n] {
							t.Errorf("%s: HEAD's ETag %q, the listing's %q (%v)", n, st.ETag, etags[n], err)
						}
					}
				}
			}
			var top []string
			for o := range mc.ListObjects(ctx, "lines", minio.ListObjectsOptions{}) {
				top = append(top, o.Key)
			}
			if strings.Join(top, " ") != "a/ deep/" {
				t.Errorf("the top level: %v", top)
			}
		})
	}
}

// storeBytes is the size of the dataset's data objects.
func storeBytes(t *testing.T, st s3backend.Store) int64 {
	t.Helper()
	objs, err := st.List(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".lines") {
			n += o.Size
		}
	}
	return n
}
