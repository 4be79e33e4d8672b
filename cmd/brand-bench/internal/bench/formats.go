package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
	"github.com/brandgw/brand/shuffle"
)

// The formats benchmark (brand-bench formats): issue 41's figures for
// datasets served where they already are, each measured side by side in
// one run against one MinIO, every request to which passes a counting
// proxy:
//
//	(1) `brand index` over IndexFiles Parquet files of the Hub's layout,
//	    from their footers: wall time, and the bytes read from the store
//	    (counted by the proxy: listings and range reads) against the
//	    dataset's bytes; and the same over LargeFiles files of the Hub's
//	    size (hundreds of MB), where the footers are a file's small part.
//	(2) an epoch of the same photos (internal/gen/photos) served from Parquet
//	    in the Hub's layout (with a third column, an embedding, that the
//	    job leaves out: columns=image,label), from MDS shards, and from
//	    Brand's tar chunks, each by a fresh `brand serve` read by the Go
//	    client: the cold epoch, then WarmEpochs warm ones; samples/s, and the store
//	    bytes of the cold epoch against the projected columns' bytes (the
//	    footers' total_compressed_size of image and label).
//	(3) PyTorch's DataLoader over BrandDataset (python/bench/loaders.py)
//	    on the Parquet dataset and on the tar one: a warm epoch on the
//	    gateway of (2), and a cold one on a fresh gateway.
//
// After the rounds each format's first cold epoch's GETs are replayed
// against MinIO alone (replay.go), and (1) runs last, on a MinIO of its
// own.
//
// Rounds alternate the formats; ratios are to tar's figure of the same
// round, loader and temperature.

// FormatsConfig describes a formats benchmark run. Zero fields take
// DefaultFormatsConfig's values.
type FormatsConfig struct {
	// IndexFiles Parquet files of IndexRowsPerFile photos each are
	// indexed in (1); LargeFiles of about LargeFileBytes each too.
	IndexFiles       int
	IndexRowsPerFile int
	LargeFiles       int
	LargeFileBytes   int64

	Images         int   // photos in the datasets of (2) and (3); every epoch reads them all
	RowsPerGroup   int   // Parquet rows per row group (the Hub's writers: 100 for images)
	RowsPerFile    int   // Parquet rows per file
	ChunkSize      int64 // Brand's tar chunks and the MDS shards' size limit
	EmbeddingBytes int   // the Parquet embedding column's bytes per row
	// ParquetChunkSize, if set, is brand index's --chunk-size for the
	// Parquet dataset of (2) (consecutive row groups of a file cut to
	// about it); 0 leaves the gateway binary's default.
	ParquetChunkSize int64
	// ParquetSinglePut uploads each Parquet file of (2) in one PUT, as
	// the tar chunks and MDS shards (16 MiB) are, rather than as minio-go
	// uploads a file of its size (45 MB: three parts of 16 MiB), as a Hub
	// mirror's files are (aws s3 sync: parts of 8 MiB): whether MinIO's
	// CPU for a cold Parquet epoch, on the cores the gateway shares here,
	// comes of its serving ranges of multipart objects (measured: it
	// does not; docs/benchmarks.md).
	ParquetSinglePut bool
	BatchSize        int
	Window           int // the job's shuffle window, in chunks
	Rounds           int
	// WarmEpochs are read one after another after the cold one, and
	// reported together as the warm row: a warm epoch of a few thousand
	// samples takes well under a second.
	WarmEpochs int
	// StoreReplays is how many times each format's first cold epoch's
	// GETs are replayed against MinIO alone (replay.go).
	StoreReplays int
	Workers      int  // DataLoader workers of (3)
	NoTorch      bool // skip (3)

	Interpreter, Script string // loaders.py and a Python with torch; found when empty; (3) is skipped without one
	Harness
	// GatewayProfiles, if set, is a directory where every gateway writes
	// a CPU profile of its run (brand serve --cpuprofile), named like its
	// log: gateway-formats-<format>-<round>[-torch].pprof.
	GatewayProfiles string `json:"-"`
}

// DefaultFormatsConfig: 10,000 files of 64 photos (about 5 MiB each,
// 50 GiB in all: a footer read is a file's thousandth part only if the
// file is some MiB, and the Hub's are 100–500 MB) to index and 8 of 128
// MiB; 3,000 photos in row groups of 100, files of 500 rows, 16 MiB tar
// chunks and MDS shards; three rounds.
func DefaultFormatsConfig() FormatsConfig {
	return FormatsConfig{IndexFiles: 10000, IndexRowsPerFile: 64, LargeFiles: 8, LargeFileBytes: 128 << 20,
		Images: 3000, RowsPerGroup: 100, RowsPerFile: 500, ChunkSize: 16 << 20, EmbeddingBytes: 8 << 10,
		BatchSize: 64, Window: 4, Rounds: 3, WarmEpochs: 3, StoreReplays: 5, Workers: 2}
}

// SmallFormatsConfig: 1,000 files of 2 photos to index and 2 large ones,
// 1,000 photos, 4 MiB tar chunks and MDS shards: a few minutes.
func SmallFormatsConfig() FormatsConfig {
	c := DefaultFormatsConfig()
	c.IndexFiles, c.IndexRowsPerFile, c.LargeFiles, c.Images, c.RowsPerFile, c.ChunkSize = 1000, 2, 2, 1000, 250, 4<<20
	return c
}

// The formats of (2) and (3), in the order a round reads them.
const (
	formatTar     = "tar"
	formatParquet = "parquet"
	formatMDS     = "mds"
)

var formatOrder = []string{formatTar, formatParquet, formatMDS}

// The loaders.
const (
	loaderGo    = "go"
	loaderTorch = "pytorch"
)

// FormatsReport is the benchmark's result: formats.json.
type FormatsReport struct {
	Header
	Config   FormatsConfig `json:"config"`
	Index    []IndexRun    `json:"index"`
	Datasets []FormatData  `json:"datasets"`
	// ProjectedBytes is what the projected job must read of the Parquet
	// files: their image and label column chunks' compressed sizes.
	ProjectedBytes int64         `json:"projected_bytes"`
	MeanBytes      int64         `json:"mean_image_bytes"`
	Rows           []FormatRow   `json:"rows"`
	Replays        []StoreReplay `json:"store_replays"`
	Summary        []FormatTotal `json:"summary"`
	Targets        []Target      `json:"targets"`
	PythonSkipped  string        `json:"python_skipped,omitempty"`
	Python         string        `json:"python,omitempty"`
	Versions       string        `json:"versions,omitempty"`
	Load           []float64     `json:"load_average"` // the 1-minute load average before each round
	// Primed is what primeStore read of the three datasets' objects
	// before the first round, to no epoch's account.
	Primed  int64   `json:"primed_bytes"`
	Seconds float64 `json:"seconds"`
}

// IndexRun is one `brand index` of a Parquet dataset, through the proxy.
type IndexRun struct {
	Name    string  `json:"name"`
	Files   int     `json:"files"`
	Rows    int     `json:"rows"`
	Bytes   int64   `json:"dataset_bytes"`
	Seconds float64 `json:"seconds"` // the process, start to exit
	// Requests and ReadBytes are what the proxy saw the process read
	// from the data: listings and object GETs, response bodies.
	ListRequests int64 `json:"list_requests"`
	ListBytes    int64 `json:"list_bytes"`
	GetRequests  int64 `json:"get_requests"`
	GetBytes     int64 `json:"get_bytes"`
	// Fraction is (ListBytes + GetBytes) ÷ Bytes.
	Fraction float64 `json:"fraction"`
	// Written is what it wrote: the index, manifest and description.
	Written int64   `json:"written_bytes"`
	CPU     float64 `json:"cpu_s"` // the process's, user + system
}

// FormatData is one of the datasets of (2).
type FormatData struct {
	Format  string `json:"format"`
	Objects int    `json:"objects"`
	Chunks  int    `json:"chunks"`
	Bytes   int64  `json:"bytes"` // its objects' bytes in the store
	// ShardBytes are an MDS dataset's shards' bytes: what reading every
	// chunk reads.
	ShardBytes int64 `json:"shard_bytes,omitempty"`
}

// FormatRow is one epoch read.
type FormatRow struct {
	Round         int     `json:"round"`
	Format        string  `json:"format"`
	Loader        string  `json:"loader"`
	Cold          bool    `json:"cold"`
	Epoch         int     `json:"epoch"`  // the first read
	Epochs        int     `json:"epochs"` // read one after another
	Samples       int     `json:"samples"`
	Bytes         int64   `json:"bytes"` // the samples' members
	Seconds       float64 `json:"seconds"`
	SamplesPerSec float64 `json:"samples_per_s"`
	VsTar         float64 `json:"vs_tar"`
	// FirstBatchMs is the Go client's wait for the epoch's first batch:
	// in a cold epoch, the load of the first shuffle window's chunks.
	FirstBatchMs  float64 `json:"first_batch_ms,omitempty"`
	StoreRequests int64   `json:"store_requests"`
	StoreBytes    int64   `json:"store_bytes"`
	LoaderCPU     float64 `json:"loader_cpu_s"`
	GatewayCPU    float64 `json:"gateway_cpu_s"`
	// GatewayFaults is the gateway's minor page faults during the read:
	// its first touches of fresh memory.
	GatewayFaults int64   `json:"gateway_minor_faults"`
	StoreCPU      float64 `json:"minio_cpu_s"`
}

// FormatTotal is one format, loader and temperature over the rounds.
type FormatTotal struct {
	Format        string     `json:"format"`
	Loader        string     `json:"loader"`
	Cold          bool       `json:"cold"`
	SamplesPerSec [3]float64 `json:"samples_per_s"` // median, min, max
	VsTar         [3]float64 `json:"vs_tar"`
	// GatewayMs is the gateway's CPU per 1,000 samples; FirstBatchMs the
	// Go client's wait for the first batch.
	GatewayMs    [3]float64 `json:"gateway_cpu_ms_per_1000"`
	FirstBatchMs [3]float64 `json:"first_batch_ms,omitempty"`
}

// storeProxy forwards to the store and counts each request and its bytes
// (the response's body; a PUT's, the request's) by its kind: a listing of
// a bucket, or a GET, HEAD or PUT of an object under a top-level prefix.
type storeProxy struct {
	mu     sync.Mutex
	counts map[string]storeCount
	// gets, while not nil, records every object GET forwarded (replay.go).
	gets []storeGet
	srv  *http.Server
	url  string
}

type storeCount struct{ Requests, Bytes int64 }

func newStoreProxy(target string) (*storeProxy, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &storeProxy{url: "http://" + ln.Addr().String(), counts: map[string]storeCount{}}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.Transport = newTransport(64)
	rp.ModifyResponse = func(r *http.Response) error {
		if r.Request.Method != http.MethodPut {
			r.Body = &proxyBody{ReadCloser: r.Body, p: p, kind: proxyKind(r.Request)}
		}
		return nil
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kind := proxyKind(r)
		p.add(kind, 1, 0)
		p.noteGet(kind, r)
		if r.Method == http.MethodPut && r.Body != nil {
			r.Body = &proxyBody{ReadCloser: r.Body, p: p, kind: kind}
		}
		rp.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// proxyKind is "LIST" for a listing, else the method and the object's
// top-level prefix: "GET hub", "PUT hub-index".
func proxyKind(r *http.Request) string {
	parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3) // bucket, prefix, rest
	if len(parts) < 2 || parts[1] == "" {
		if r.Method == http.MethodGet {
			return "LIST"
		}
		return r.Method
	}
	return r.Method + " " + parts[1]
}

func (p *storeProxy) add(kind string, reqs, n int64) {
	p.mu.Lock()
	c := p.counts[kind]
	c.Requests += reqs
	c.Bytes += n
	p.counts[kind] = c
	p.mu.Unlock()
}

// snapshot is a copy of the counts.
func (p *storeProxy) snapshot() map[string]storeCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]storeCount, len(p.counts))
	for k, v := range p.counts {
		out[k] = v
	}
	return out
}

// since is what kind counted after snapshot s.
func (p *storeProxy) since(s map[string]storeCount, kind string) storeCount {
	now := p.snapshot()[kind]
	return storeCount{Requests: now.Requests - s[kind].Requests, Bytes: now.Bytes - s[kind].Bytes}
}

type proxyBody struct {
	io.ReadCloser
	p    *storeProxy
	kind string
}

func (b *proxyBody) Read(q []byte) (int, error) {
	n, err := b.ReadCloser.Read(q)
	b.p.add(b.kind, 0, int64(n))
	return n, err
}

// countedStore is a MinIO with the formats bucket, every request to
// which passes a counting proxy.
type countedStore struct {
	srv   *miniotest.Server
	proxy *storeProxy
}

// startCountedStore starts a MinIO keeping its data in dir, and its proxy.
func startCountedStore(ctx context.Context, dir string) (*countedStore, error) {
	srv, err := miniotest.Start(ctx, dir)
	if err != nil {
		return nil, err
	}
	if err := srv.MakeBucket(ctx, formatsBucket); err != nil {
		srv.Close()
		return nil, err
	}
	proxy, err := newStoreProxy(srv.URL())
	if err != nil {
		srv.Close()
		return nil, err
	}
	return &countedStore{srv: srv, proxy: proxy}, nil
}

func (s *countedStore) close() error {
	s.proxy.srv.Close()
	return s.srv.Close()
}

// open is a store under the benchmark's bucket, directly on MinIO.
func (s *countedStore) open(ctx context.Context, prefix string) (s3backend.Store, error) {
	return s3backend.Open(ctx, "s3://"+formatsBucket+"/"+prefix, s.srv.Config())
}

// readIndex reads the index brand index wrote under prefix.
func (s *countedStore) readIndex(ctx context.Context, prefix string) (*chunkindex.Index, error) {
	st, err := s.open(ctx, prefix)
	if err != nil {
		return nil, err
	}
	ix, err := stored.ReadIndex(ctx, st)
	if err != nil {
		return nil, fmt.Errorf("bench: reading the index at %s: %w", prefix, err)
	}
	return ix, nil
}

// formatsRun carries a run's state. Its countedStore holds the datasets
// of (2) and (3); (1)'s files have a MinIO of their own (indexRuns).
type formatsRun struct {
	*countedStore
	cfg    FormatsConfig
	rep    *FormatsReport
	photos *photoSet
	// replay is each format's first cold epoch's GETs, as the proxy
	// forwarded them (replay.go).
	replay map[string][]storeGet
	// py is loaders.py's interpreter and script; empty when (3) is skipped.
	interp, script string
}

const formatsBucket = "formats"

// RunFormats runs the formats benchmark.
func RunFormats(ctx context.Context, cfg FormatsConfig) (*FormatsReport, error) {
	fillZero(&cfg, DefaultFormatsConfig())
	if err := cfg.check(); err != nil {
		return nil, err
	}
	started := time.Now()
	r := &formatsRun{replay: map[string][]storeGet{}, cfg: cfg, rep: &FormatsReport{Header: newHeader(started, cfg.Command), Config: cfg}}
	r.rep.Config.Log = nil
	pc := Config{Python: Python{Interpreter: cfg.Interpreter, Script: cfg.Script}}
	var err error
	if cfg.NoTorch {
		r.rep.PythonSkipped = "not asked for"
	} else if r.interp, r.script, err = pc.findPython(ctx); err != nil {
		r.rep.PythonSkipped = err.Error()
		logf(cfg.Log, "(3) skipped: %v", err)
	} else {
		r.rep.Python = r.interp
		if out, err := exec.CommandContext(ctx, r.interp, "-c", "import torch; print('torch', torch.__version__)").Output(); err == nil {
			r.rep.Versions = strings.TrimSpace(string(out))
		}
	}

	if r.countedStore, err = startCountedStore(ctx, filepath.Join(cfg.WorkDir, "formats-minio")); err != nil {
		return nil, err
	}
	defer r.close()

	if err := r.makeDatasets(ctx); err != nil {
		return nil, err
	}
	if err := r.primeStore(ctx); err != nil {
		return nil, err
	}
	for round := range cfg.Rounds {
		r.rep.Load = append(r.rep.Load, loadAverage())
		for _, f := range formatOrder {
			if err := r.epochs(ctx, round, f); err != nil {
				return nil, fmt.Errorf("bench: round %d, %s: %w", round, f, err)
			}
		}
	}
	if err := r.replayGets(ctx); err != nil {
		return nil, err
	}
	// (1) last: writing its 50 GiB and removing them leaves the machine
	// busy for a minute after (the kernel's writeback, the file system
	// freeing them), which the rounds would share. Run before them, tar's
	// first cold epochs read at half their rate (5,750 and 8,049
	// samples/s against 10,267–12,210 after), or, with the files left on
	// disk, every round under a load average of 4.5.
	if err := r.indexRuns(ctx); err != nil {
		return nil, err
	}
	r.rep.relate()
	r.rep.Summary = r.rep.summary()
	r.rep.Targets = r.rep.targets()
	r.rep.Seconds = time.Since(started).Seconds()
	return r.rep, nil
}

// primeStore reads every object of the three datasets once, directly
// from MinIO (not through the proxy: no epoch counts it), before the first
// round. "Cold" is the gateway's cache, not the store's: MinIO's first
// reads of objects it has just written cost it more than its later ones —
// up to 1.7× its CPU in the first round's Parquet epoch, whose files are
// multipart uploads, against the rounds after (measured with this
// harness before it primed, gateways of 28e12f0 and 3ece69c: 0.27 s
// against 0.15–0.22 at 3,000 photos; 0.90–1.13 against 0.65–0.77 at
// 12,000, in the runs where the first round stood out) — and which
// format's objects a fresh store has cached is the store's business, not
// the format's.
func (r *formatsRun) primeStore(ctx context.Context) error {
	buf := make([]byte, 0, 64<<20)
	for _, f := range formatOrder {
		st, err := r.open(ctx, f)
		if err != nil {
			return err
		}
		objs, err := st.List(ctx, "")
		if err != nil {
			return err
		}
		for _, o := range objs {
			if int64(cap(buf)) < o.Size {
				buf = make([]byte, 0, o.Size)
			}
			if err := st.ReadRange(ctx, o.Key, o.ETag, 0, buf[:o.Size]); err != nil {
				return fmt.Errorf("bench: priming the store with %s: %w", o.Key, err)
			}
			r.rep.Primed += o.Size
		}
	}
	logf(r.cfg.Log, "store primed: every object of the datasets read once (%s)", sizeString(r.rep.Primed))
	return nil
}

// makeDatasets makes the photos and writes them as tar chunks, as Hub
// Parquet and as MDS, and indexes the last two in place.
func (r *formatsRun) makeDatasets(ctx context.Context) error {
	cfg := r.cfg
	src := filepath.Join(cfg.WorkDir, "formats-src")
	keys, err := writePhotos(src, cfg.Images)
	if err != nil {
		return err
	}
	defer os.RemoveAll(src)
	p := &photoSet{keys: keys}
	for i, k := range keys {
		b, err := os.ReadFile(filepath.Join(src, k+".jpg"))
		if err != nil {
			return err
		}
		p.jpegs = append(p.jpegs, b)
		p.labels = append(p.labels, int64(i%100)) // writePhotos's .cls
	}
	r.photos = p
	r.rep.MeanBytes = p.bytes() / int64(len(keys))

	tar, err := r.open(ctx, formatTar)
	if err != nil {
		return err
	}
	res, err := dataset.Pack(ctx, src, tar, dataset.PackOptions{ChunkSize: cfg.ChunkSize, Shuffle: true, Seed: 41, Parallel: 2, Name: "photos", Overwrite: true})
	if err != nil {
		return fmt.Errorf("bench: packing the photos: %w", err)
	}
	r.rep.Datasets = append(r.rep.Datasets, FormatData{Format: formatTar, Objects: res.Index.NumChunks(), Chunks: res.Index.NumChunks(), Bytes: res.Index.TotalBytes()})

	// A Hub split and an MDS dataset are written in a shuffled order.
	perm := rand.New(rand.NewPCG(41, 1)).Perm(cfg.Images)
	hub, err := r.open(ctx, formatParquet)
	if err != nil {
		return err
	}
	if cfg.ParquetSinglePut {
		if hub, err = r.singlePutIn(hub, formatsBucket, formatParquet); err != nil {
			return err
		}
	}
	files := (cfg.Images + cfg.RowsPerFile - 1) / cfg.RowsPerFile
	total, projected, err := p.hubFiles(ctx, hub, files, 4, func(k int) []int {
		return perm[k*cfg.RowsPerFile : min((k+1)*cfg.RowsPerFile, cfg.Images)]
	}, cfg.RowsPerGroup, cfg.EmbeddingBytes)
	if err != nil {
		return err
	}
	r.rep.ProjectedBytes = projected
	r.rep.Datasets = append(r.rep.Datasets, FormatData{Format: formatParquet, Objects: files, Bytes: total})

	mds, err := r.open(ctx, formatMDS)
	if err != nil {
		return err
	}
	objs := p.mdsShards(perm, cfg.ChunkSize)
	total, err = putAll(ctx, mds, objs)
	if err != nil {
		return err
	}
	r.rep.Datasets = append(r.rep.Datasets, FormatData{Format: formatMDS, Objects: len(objs), Chunks: len(objs) - 1, Bytes: total,
		ShardBytes: total - int64(len(objs["index.json"]))})

	for i, f := range []string{formatParquet, formatMDS} {
		if _, err := r.brandIndex(ctx, r.countedStore, f); err != nil {
			return err
		}
		ix, err := r.readIndex(ctx, f+"-index")
		if err != nil {
			return err
		}
		if ix.NumSamples() != cfg.Images {
			return fmt.Errorf("bench: the %s index holds %d samples, want %d", f, ix.NumSamples(), cfg.Images)
		}
		r.rep.Datasets[i+1].Chunks = ix.NumChunks()
	}
	for _, d := range r.rep.Datasets {
		logf(cfg.Log, "%s: %d photos of mean %s, %s in %d objects, %d chunks", d.Format, cfg.Images, sizeString(r.rep.MeanBytes), sizeString(d.Bytes), d.Objects, d.Chunks)
	}
	logf(cfg.Log, "parquet: the projected columns (image, label) hold %s", sizeString(projected))
	return nil
}

// brandIndex runs `brand index --src s3://formats/PREFIX --dst
// s3://formats/PREFIX-index` on cs through its proxy and measures it
// (indexProcess).
func (r *formatsRun) brandIndex(ctx context.Context, cs *countedStore, prefix string) (IndexRun, error) {
	var extra []string
	if prefix == formatParquet && r.cfg.ParquetChunkSize > 0 {
		extra = []string{"--chunk-size", strconv.FormatInt(r.cfg.ParquetChunkSize, 10)}
	}
	run, _, err := indexProcess(ctx, r.cfg.GatewayBinary, cs, prefix, extra...)
	return run, err
}

// indexRuns measures (1): the many-files dataset and the large-files one,
// on a MinIO of their own whose directory is removed when they are done:
// their files are 50 GiB by default, and MinIO deletes an object by
// moving it to a trash it empties later (a run that deleted the 10,000
// files still held their 55 GiB at its end).
func (r *formatsRun) indexRuns(ctx context.Context) (err error) {
	cfg := r.cfg
	dir := filepath.Join(cfg.WorkDir, "formats-index-minio")
	cs, err := startCountedStore(ctx, dir)
	if err != nil {
		return err
	}
	defer func() {
		err = errors.Join(err, cs.close(), os.RemoveAll(dir))
	}()
	p := r.photos
	n := len(p.jpegs)
	perRow := r.rep.MeanBytes + int64(cfg.EmbeddingBytes)
	largeRows := int(max(1, cfg.LargeFileBytes/perRow))
	sets := []struct {
		name          string
		files, rows   int
		parallel      int
		wantFileBytes int64
	}{
		{fmt.Sprintf("index-%d", cfg.IndexFiles), cfg.IndexFiles, cfg.IndexRowsPerFile, 8, 0},
		{fmt.Sprintf("index-large-%d", cfg.LargeFiles), cfg.LargeFiles, largeRows, 2, cfg.LargeFileBytes},
	}
	var need int64
	for _, s := range sets {
		need += int64(s.files) * int64(s.rows) * perRow
	}
	if err := r.roomFor(need); err != nil {
		return err
	}
	for _, s := range sets {
		st, err := cs.open(ctx, s.name)
		if err != nil {
			return err
		}
		t0 := time.Now()
		total, _, err := p.hubFiles(ctx, st, s.files, s.parallel, func(k int) []int {
			rows := make([]int, s.rows)
			for j := range rows {
				rows[j] = (k*s.rows + j) % n
			}
			return rows
		}, cfg.RowsPerGroup, cfg.EmbeddingBytes)
		if err != nil {
			return err
		}
		logf(cfg.Log, "(1) %s: %d Parquet files of %d rows, %s, written in %s", s.name, s.files, s.rows, sizeString(total), time.Since(t0).Round(time.Second))
		run, err := r.brandIndex(ctx, cs, s.name)
		if err != nil {
			return err
		}
		run.Files, run.Rows, run.Bytes = s.files, s.files*s.rows, total
		run.Fraction = ratio(float64(run.ListBytes+run.GetBytes), float64(total))
		ix, err := cs.readIndex(ctx, s.name+"-index")
		if err != nil {
			return err
		}
		if ix.NumSamples() != run.Rows {
			return fmt.Errorf("bench: the index of %s holds %d samples, want %d", s.name, ix.NumSamples(), run.Rows)
		}
		logf(cfg.Log, "(1) brand index of %d files: %.1f s; read %d listings (%s) and %d GETs (%s): %.4f %% of %s",
			run.Files, run.Seconds, run.ListRequests, sizeString(run.ListBytes), run.GetRequests, sizeString(run.GetBytes), 100*run.Fraction, sizeString(total))
		r.rep.Index = append(r.rep.Index, run)
	}
	return nil
}

// roomFor refuses, before anything is written, (1)'s files when they
// would not fit on the disk under the work directory with 2 GiB to spare
// (MinIO's own floor among it): MinIO would refuse a write minutes in.
func (r *formatsRun) roomFor(bytes int64) error {
	free := freeDisk(r.cfg.WorkDir)
	if free < 0 || bytes+2<<30 <= free {
		return nil
	}
	return fmt.Errorf("bench: (1)'s Parquet files need about %s of disk under %s, which has %s free: give --index-rows fewer photos a file (the footers' share of what is read grows as files shrink), or --work-dir on a larger disk",
		sizeString(bytes+2<<30), r.cfg.WorkDir, sizeString(free))
}

// datasetURL is where the gateway finds a format's index.
func datasetURL(f string) string {
	if f == formatTar {
		return "s3://" + formatsBucket + "/" + f
	}
	return "s3://" + formatsBucket + "/" + f + "-index"
}

// job is the job of (2) and (3) on format f: Parquet's projected.
func (r *formatsRun) job(f string) api.Job {
	j := api.Job{Dataset: "photos", Params: shuffle.Params{Seed: 41, Window: r.cfg.Window, BatchSize: r.cfg.BatchSize, World: 1}}
	if f == formatParquet {
		j.Columns = projectedColumns
	}
	return j
}

// gateway starts a fresh `brand serve` of format f through the proxy,
// with a cache that holds the dataset.
func (r *formatsRun) gateway(ctx context.Context, f, tag string) (*gatewayProc, error) {
	var cache int64 = 512 << 20
	for _, d := range r.rep.Datasets {
		cache = max(cache, 4*d.Bytes)
	}
	args := []string{"serve", "--listen", "127.0.0.1:0", "--dataset", "photos=" + datasetURL(f),
		"--s3-endpoint", r.proxy.url, "--s3-region", "us-east-1", "--cache-size", strconv.FormatInt(cache, 10),
		"--log-format", "json", "--log-level", "info", "--shutdown-timeout", "10s"}
	name := "gateway-formats-" + f + "-" + tag
	if r.cfg.GatewayProfiles != "" {
		args = append(args, "--cpuprofile", filepath.Join(r.cfg.GatewayProfiles, name+".pprof"))
	}
	return startGateway(ctx, r.cfg.GatewayBinary, args, gatewayEnv(r.srv.AccessKey, r.srv.SecretKey), filepath.Join(r.cfg.WorkDir, name+".log"))
}

// epochs reads format f in a round: (2)'s cold and warm epochs with the
// Go client and (3)'s warm one on one gateway, then (3)'s cold one on a
// fresh gateway.
func (r *formatsRun) epochs(ctx context.Context, round int, f string) error {
	g, err := r.gateway(ctx, f, strconv.Itoa(round))
	if err != nil {
		return err
	}
	defer g.kill()
	row, err := r.goEpoch(ctx, g, f, 0, 1)
	if err != nil {
		return err
	}
	row.Round, row.Cold = round, true
	r.add(row)
	if row, err = r.goEpoch(ctx, g, f, 1, r.cfg.WarmEpochs); err != nil {
		return err
	}
	row.Round = round
	r.add(row)
	torch := r.interp != "" && f != formatMDS
	if torch {
		row, err := r.torchEpoch(ctx, g, f, 1+r.cfg.WarmEpochs)
		if err != nil {
			return err
		}
		row.Round = round
		r.add(row)
	}
	if err := g.stop(15 * time.Second); err != nil {
		return err
	}
	if !torch {
		return nil
	}
	g, err = r.gateway(ctx, f, strconv.Itoa(round)+"-torch")
	if err != nil {
		return err
	}
	defer g.kill()
	row, err = r.torchEpoch(ctx, g, f, 0)
	if err != nil {
		return err
	}
	row.Round, row.Cold = round, true
	r.add(row)
	return g.stop(15 * time.Second)
}

func (r *formatsRun) add(row FormatRow) {
	temp := "warm"
	if row.Cold {
		temp = "cold"
	}
	logf(r.cfg.Log, "round %d, %s, %s, %s: %.0f samples/s; store %d requests, %s", row.Round, row.Format, row.Loader, temp,
		row.SamplesPerSec, row.StoreRequests, sizeString(row.StoreBytes))
	r.rep.Rows = append(r.rep.Rows, row)
}

// measure runs read (a loader's epoch) and fills in what the proxy and
// /proc saw around it.
func (r *formatsRun) measure(g *gatewayProc, f string, read func() (FormatRow, error)) (FormatRow, error) {
	before := r.proxy.snapshot()
	gw0, store0 := processCPU(g.cmd.Process.Pid), processCPU(r.srv.Pid())
	faults0 := minorFaults(g.cmd.Process.Pid)
	row, err := read()
	if err != nil {
		return row, err
	}
	row.GatewayCPU = (processCPU(g.cmd.Process.Pid) - gw0).Seconds()
	row.GatewayFaults = minorFaults(g.cmd.Process.Pid) - faults0
	row.StoreCPU = (processCPU(r.srv.Pid()) - store0).Seconds()
	got := r.proxy.since(before, "GET "+f)
	row.StoreRequests, row.StoreBytes = got.Requests, got.Bytes
	row.Format = f
	row.SamplesPerSec = ratio(float64(row.Samples), row.Seconds)
	if row.Samples != row.Epochs*r.cfg.Images {
		return row, fmt.Errorf("%s epochs %d..%d read %d samples, want %d", row.Loader, row.Epoch, row.Epoch+row.Epochs-1, row.Samples, row.Epochs*r.cfg.Images)
	}
	return row, nil
}

// goEpoch reads epochs e..e+n-1 with the Go client, checking that every
// sample carries a jpg and a cls and nothing else.
func (r *formatsRun) goEpoch(ctx context.Context, g *gatewayProc, f string, e, n int) (FormatRow, error) {
	// The run's first cold epoch of each format is recorded to be
	// replayed against the store alone (replayGets).
	if record := e == 0 && r.replay[f] == nil; record {
		r.proxy.startGets()
		defer func() { r.replay[f] = r.proxy.stopGets() }()
	}
	return r.measure(g, f, func() (FormatRow, error) {
		row := FormatRow{Loader: loaderGo, Epoch: e, Epochs: n}
		c, err := client.New(g.base, client.Options{HTTPClient: &http.Client{Transport: newTransport(8)}, Job: r.job(f), Ahead: 3})
		if err != nil {
			return row, err
		}
		cpu0 := processCPU(0)
		start := time.Now()
		for e := range n {
			for b, err := range c.Epoch(ctx, row.Epoch+e) {
				if err != nil {
					return row, err
				}
				for _, s := range b.Samples {
					if len(s.Files) != 2 || s.Files["jpg"] == nil || s.Files["cls"] == nil {
						return row, fmt.Errorf("sample %s has members %v, want jpg and cls", s.Key, exts(s))
					}
					row.Bytes += int64(len(s.Files["jpg"]) + len(s.Files["cls"]))
				}
				row.Samples += len(b.Samples)
				b.Release()
				if row.FirstBatchMs == 0 {
					row.FirstBatchMs = ms(time.Since(start))
				}
			}
		}
		row.Seconds = time.Since(start).Seconds()
		row.LoaderCPU = (processCPU(0) - cpu0).Seconds()
		return row, nil
	})
}

func exts(s client.Sample) []string {
	var out []string
	for e := range s.Files {
		out = append(out, e)
	}
	return out
}

// torchEpoch reads epoch e with PyTorch's DataLoader over BrandDataset.
func (r *formatsRun) torchEpoch(ctx context.Context, g *gatewayProc, f string, e int) (FormatRow, error) {
	return r.measure(g, f, func() (FormatRow, error) {
		row := FormatRow{Loader: loaderTorch, Epoch: e, Epochs: 1}
		j := r.job(f)
		args := []string{r.script, "brand", "--url", g.base, "--dataset", j.Dataset, "--batch-size", strconv.Itoa(j.BatchSize),
			"--seed", strconv.FormatUint(j.Seed, 10), "--window", strconv.Itoa(j.Window), "--epoch", strconv.Itoa(e),
			"--workers", strconv.Itoa(r.cfg.Workers)}
		if len(j.Columns) > 0 {
			args = append(args, "--columns", strings.Join(j.Columns, ","))
		}
		cmd := exec.CommandContext(ctx, r.interp, args...)
		cmd.Env = gatewayEnv(r.srv.AccessKey, r.srv.SecretKey)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		setProcAttr(cmd)
		if err := cmd.Run(); err != nil {
			return row, fmt.Errorf("loaders.py %s: %w\n%s", strings.Join(args[1:], " "), err, lastLines(stderr.String(), 20))
		}
		var out pyResult
		if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), &out); err != nil {
			return row, fmt.Errorf("loaders.py output: %w", err)
		}
		row.Samples, row.Bytes, row.Seconds, row.LoaderCPU = int(out.Samples), out.Bytes, out.Seconds, out.CPUSeconds
		return row, nil
	})
}

// singlePutStore is a store whose Put is one PUT, never a multipart
// upload (FormatsConfig.ParquetSinglePut).
type singlePutStore struct {
	s3backend.Store
	mc             *minio.Client
	bucket, prefix string
}

// singlePutIn is st, the store at bucket/prefix on the run's MinIO, with
// its Put one PUT.
func (r *formatsRun) singlePutIn(st s3backend.Store, bucket, prefix string) (s3backend.Store, error) {
	mc, err := minio.New(r.srv.Endpoint, &minio.Options{Creds: credentials.NewStaticV4(r.srv.AccessKey, r.srv.SecretKey, ""),
		Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		return nil, err
	}
	return singlePutStore{Store: st, mc: mc, bucket: bucket, prefix: prefix + "/"}, nil
}

func (s singlePutStore) Put(ctx context.Context, key string, body io.Reader, size int64) (s3backend.ObjectInfo, error) {
	info, err := s.mc.PutObject(ctx, s.bucket, s.prefix+key, body, size,
		minio.PutObjectOptions{ContentType: "application/octet-stream", DisableMultipart: true})
	if err != nil {
		return s3backend.ObjectInfo{}, fmt.Errorf("bench: one PUT of %s: %w", key, err)
	}
	return s3backend.ObjectInfo{Key: key, Size: info.Size, ETag: info.ETag}, nil
}
