package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
)

// IndexConfig configures RunIndex: a synthesised index, and the nodes it
// is loaded for.
type IndexConfig struct {
	Samples    int
	ChunkBytes int64 // target chunk size
	MeanBytes  int64 // mean sample size
	// Nodes are the cluster sizes measured; each loads as node 0.
	Nodes []int
	// Keys are the key orders measured: KeysShuffled (a shuffled pack,
	// the default of `brand pack`) and KeysOrdered (an unshuffled one).
	Keys      []string
	BatchSize int  // samples of the batch of other nodes' samples served
	NoWhole   bool // skip today's whole index (Decode), which needs ~2.3× its size in memory
	// Harness: the work directory, the command line and the log; the
	// index starts no gateway, so GatewayBinary is not read.
	Harness
}

// Key orders of IndexConfig.Keys.
const (
	KeysShuffled = "shuffled"
	KeysOrdered  = "ordered"
)

// DefaultIndexConfig is the target: 100 M samples in 64 MiB
// chunks, ImageNet-sized (110 KiB mean), for nodes of 1, 16 and 256.
func DefaultIndexConfig() IndexConfig {
	return IndexConfig{Samples: 100_000_000, ChunkBytes: 64 << 20, MeanBytes: 110 << 10, Nodes: []int{1, 16, 256},
		Keys: []string{KeysShuffled, KeysOrdered}, BatchSize: 256}
}

// IndexReport is RunIndex's result.
type IndexReport struct {
	Command    string     `json:"command"`
	GoVersion  string     `json:"go_version"`
	CPUs       int        `json:"cpus"`
	Samples    int        `json:"samples"`
	Chunks     int        `json:"chunks"`
	ChunkBytes int64      `json:"chunk_bytes"`
	MeanBytes  int64      `json:"mean_sample_bytes"`
	KeyBytes   int        `json:"key_bytes"`
	IndexBytes int64      `json:"index_object_bytes"`
	Rows       []IndexRow `json:"rows"`
}

// IndexRow is one index loaded for one node.
type IndexRow struct {
	Keys  string `json:"keys"`
	Whole bool   `json:"whole"` // today's index (Decode), the same on every node
	Nodes int    `json:"nodes"` // partial: the cluster's size; this is node 0
	// LoadSeconds is the time to load, from the object's bytes to an index
	// ready to serve (Decode and ID for the whole index; Open for a
	// partial one, its own tables included).
	LoadSeconds float64 `json:"load_seconds"`
	// HeapBytes is the heap the index holds once loaded, measured
	// (runtime.MemStats.HeapAlloc after a GC, less the heap before);
	// PeakHeapBytes the most the heap held above that while loading.
	HeapBytes     int64 `json:"heap_bytes"`
	PeakHeapBytes int64 `json:"peak_heap_bytes"`
	// FootprintBytes is Tables.Footprint; FormulaBytes the formula of
	// docs/format.md evaluated from the dataset's shape alone, plus what
	// the table cache holds (CachedBytes). A partial index keeps the
	// other chunks' tables its load streamed past in its table cache,
	// up to the cache's bound (chunkindex.DefaultTableCacheBytes), so
	// that a batch need not read them from the store: CachedTables and
	// CachedBytes are those, right after the load.
	FootprintBytes int64   `json:"footprint_bytes"`
	FormulaBytes   int64   `json:"formula_bytes"`
	CachedTables   int     `json:"cached_tables,omitempty"`
	CachedBytes    int64   `json:"cached_bytes,omitempty"`
	OfWhole        float64 `json:"of_whole"` // HeapBytes ÷ the whole index's
	ResidentTables int     `json:"resident_tables"`
	OwnedSamples   int     `json:"owned_samples"`
	// A batch of BatchSize samples of chunks node 0 does not own, each of
	// a different chunk (a full shuffle's worst case): the tables it read
	// and how long laying it out took, then the same batch again.
	BatchChunks  int     `json:"batch_chunks"`
	BatchLoads   int64   `json:"batch_loads"`
	BatchSeconds float64 `json:"batch_seconds"`
	RepeatLoads  int64   `json:"repeat_loads"`
	// LookupLoads is the tables read to find one key of a chunk node 0
	// does not own that no batch touched.
	LookupLoads int64 `json:"lookup_loads"`
	// LookupSeconds is that lookup's time and DirectoryBytes what it
	// added to the index's Footprint: with keys in no order, the first
	// lookup by key builds the key directory (streaming the index again).
	LookupSeconds  float64 `json:"lookup_seconds,omitempty"`
	DirectoryBytes int64   `json:"directory_bytes,omitempty"`
}

// synthKeyLen is the length of every synthesised key:
// train/nCCCCCCCC/nCCCCCCCC_PPPPPPPPP.
const synthKeyLen = 35

// synthIndex describes an index of n samples without holding it: sample
// i's length, key and CRC are functions of i, and chunks hold samples
// until the next would pass the target size.
type synthIndex struct {
	n          int
	chunkBytes int64
	meanBytes  int64
	ordered    bool
	counts     []int // per chunk
	sizes      []int64
}

func newSynthIndex(cfg IndexConfig, ordered bool) *synthIndex {
	s := &synthIndex{n: cfg.Samples, chunkBytes: cfg.ChunkBytes, meanBytes: cfg.MeanBytes, ordered: ordered}
	var count int
	var size int64
	s.lengths(func(_ int, l int64) {
		if count > 0 && size+l+int64(len(chunkindex.EndOfArchive)) > s.chunkBytes {
			s.counts = append(s.counts, count)
			s.sizes = append(s.sizes, size+int64(len(chunkindex.EndOfArchive)))
			count, size = 0, 0
		}
		count++
		size += l
	})
	if count > 0 {
		s.counts = append(s.counts, count)
		s.sizes = append(s.sizes, size+int64(len(chunkindex.EndOfArchive)))
	}
	return s
}

// lengths calls f with every sample's length, in order: whole tar blocks,
// uniform around the mean.
func (s *synthIndex) lengths(f func(i int, l int64)) {
	rng := rand.New(rand.NewPCG(1, 2))
	blocks := uint64(max(2*s.meanBytes/chunkindex.BlockSize-1, 1))
	for i := range s.n {
		f(i, chunkindex.BlockSize*int64(1+rng.Uint64N(blocks)))
	}
}

// key appends sample i's key. Ordered keys ascend with i; shuffled ones
// are a permutation of them (i·a mod n, a coprime with n).
func (s *synthIndex) key(b []byte, i int, a uint64) []byte {
	p := uint64(i)
	if !s.ordered {
		p = (uint64(i)*a + 7) % uint64(s.n)
	}
	class := p * 1000 / uint64(s.n)
	b = append(b, "train/n"...)
	b = appendPadded(b, class, 8)
	b = append(b, "/n"...)
	b = appendPadded(b, class, 8)
	b = append(b, '_')
	return appendPadded(b, p, 9)
}

func appendPadded(b []byte, v uint64, width int) []byte {
	var d [20]byte
	s := strconv.AppendUint(d[:0], v, 10)
	for range width - len(s) {
		b = append(b, '0')
	}
	return append(b, s...)
}

// coprime returns a multiplier coprime with n for the key permutation.
func coprime(n int) uint64 {
	gcd := func(a, b uint64) uint64 {
		for b != 0 {
			a, b = b, a%b
		}
		return a
	}
	for a := uint64(2654435761); ; a++ {
		if gcd(a, uint64(max(n, 1))) == 1 {
			return a
		}
	}
}

// write encodes the index (docs/format.md, version 1) to w without
// holding it, and returns its length.
func (s *synthIndex) write(w io.Writer) (int64, error) {
	crc := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	cw := &countWriter{w: io.MultiWriter(w, crc)}
	bw := bufio.NewWriterSize(cw, 1<<20)
	le := binary.LittleEndian
	var table bytes.Buffer
	for c, n := range s.counts {
		table.Write(le.AppendUint64(nil, uint64(s.sizes[c])))
		table.Write(le.AppendUint32(nil, uint32(n)))
		key, etag := synthChunkKey(c), fmt.Sprintf(`"%032x"`, uint64(c)*0x9e3779b97f4a7c15)
		table.Write(le.AppendUint16(nil, uint16(len(key))))
		table.WriteString(key)
		table.Write(le.AppendUint16(nil, uint16(len(etag))))
		table.WriteString(etag)
	}
	hdr := append([]byte(chunkindex.Magic), make([]byte, 24)...)
	le.PutUint32(hdr[8:], chunkindex.FormatVersion)
	le.PutUint32(hdr[16:], uint32(len(s.counts)))
	le.PutUint32(hdr[20:], uint32(s.n))
	le.PutUint32(hdr[24:], uint32(table.Len()))
	le.PutUint32(hdr[28:], uint32(synthKeyLen*s.n))
	bw.Write(hdr)
	bw.Write(table.Bytes())
	c, inChunk, off := 0, 0, int64(0)
	rec := make([]byte, 20)
	s.lengths(func(i int, l int64) {
		for inChunk == s.counts[c] {
			c, inChunk, off = c+1, 0, 0
		}
		le.PutUint64(rec, uint64(off))
		le.PutUint32(rec[8:], uint32(l))
		le.PutUint32(rec[12:], uint32(uint64(i)*0x9e3779b1))
		le.PutUint32(rec[16:], uint32(synthKeyLen*(i+1)))
		bw.Write(rec)
		off += l
		inChunk++
	})
	a := coprime(s.n)
	kb := make([]byte, 0, synthKeyLen)
	for i := range s.n {
		bw.Write(s.key(kb[:0], i, a))
	}
	if err := bw.Flush(); err != nil {
		return 0, err
	}
	if _, err := w.Write(le.AppendUint32(nil, crc.Sum32())); err != nil {
		return 0, err
	}
	return cw.n + 4, nil
}

func synthChunkKey(c int) string { return fmt.Sprintf("shards/%06d.tar", c) }

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// RunIndex synthesises the index for each key order, writes it to a file
// in cfg.WorkDir, and loads it as today's whole index and as each node's
// partial index, measuring each.
func RunIndex(ctx context.Context, cfg IndexConfig) (*IndexReport, error) {
	rep := &IndexReport{Command: cfg.Command, GoVersion: runtime.Version(), CPUs: runtime.GOMAXPROCS(0), Samples: cfg.Samples,
		ChunkBytes: cfg.ChunkBytes, MeanBytes: cfg.MeanBytes, KeyBytes: synthKeyLen}
	logf := func(format string, args ...any) {
		if cfg.Log != nil {
			fmt.Fprintf(cfg.Log, format+"\n", args...)
		}
	}
	for _, keys := range cfg.Keys {
		start := time.Now()
		syn := newSynthIndex(cfg, keys == KeysOrdered)
		path := filepath.Join(cfg.WorkDir, "index-"+keys)
		f, err := os.Create(path)
		if err != nil {
			return nil, err
		}
		size, err := syn.write(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, err
		}
		rep.Chunks, rep.IndexBytes = len(syn.counts), size
		logf("%s keys: wrote %d samples in %d chunks, %s, in %s", keys, cfg.Samples, len(syn.counts), sizeString(size), time.Since(start).Round(time.Millisecond))

		var whole *IndexRow
		if !cfg.NoWhole {
			row, err := measureWhole(path, syn)
			if err != nil {
				return nil, err
			}
			row.Keys = keys
			rep.Rows = append(rep.Rows, *row)
			whole = row
			logf("  whole: %.1f s, %s", row.LoadSeconds, sizeString(row.HeapBytes))
		}
		for _, nodes := range cfg.Nodes {
			row, err := measurePartial(ctx, path, size, syn, nodes, cfg.BatchSize)
			if err != nil {
				return nil, err
			}
			row.Keys = keys
			if whole != nil && whole.HeapBytes > 0 {
				row.OfWhole = float64(row.HeapBytes) / float64(whole.HeapBytes)
			}
			rep.Rows = append(rep.Rows, *row)
			logf("  node of %d: %.1f s, %s, batch of %d: %d loads", nodes, row.LoadSeconds, sizeString(row.HeapBytes), row.BatchChunks, row.BatchLoads)
		}
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// heapWatch measures the heap an index holds: the live heap after a GC,
// less the heap before loading, and the peak while loading.
type heapWatch struct {
	base int64
	peak atomic.Int64
	stop chan struct{}
	done chan struct{}
}

func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

func watchHeap() *heapWatch {
	h := &heapWatch{base: liveHeap(), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			if v := int64(s[0].Value.Uint64()); v > h.peak.Load() {
				h.peak.Store(v)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// held stops the watch and returns the heap held now and the peak, both
// above the base.
func (h *heapWatch) held() (now, peak int64) {
	close(h.stop)
	<-h.done
	return liveHeap() - h.base, h.peak.Load() - h.base
}

func measureWhole(path string, syn *synthIndex) (*IndexRow, error) {
	h := watchHeap()
	start := time.Now()
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ix, err := chunkindex.Decode(b)
	if err != nil {
		return nil, err
	}
	b = nil
	_ = ix.ID() // a gateway needs it at once (ownership, ETags)
	row := &IndexRow{Whole: true, Nodes: 1, LoadSeconds: time.Since(start).Seconds(), ResidentTables: ix.NumChunks(), OwnedSamples: ix.NumSamples()}
	row.HeapBytes, row.PeakHeapBytes = h.held()
	row.FootprintBytes = ix.Tables().Footprint()
	row.FormulaBytes = wholeFormula(syn)
	runtime.KeepAlive(ix)
	return row, nil
}

func measurePartial(ctx context.Context, path string, size int64, syn *synthIndex, nodes, batch int) (*IndexRow, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r := chunkindex.RangeReaderFunc(func(_ context.Context, off int64, p []byte) error {
		_, err := f.ReadAt(p, off)
		return err
	})
	var owner []int
	h := watchHeap()
	start := time.Now()
	ix, err := chunkindex.Open(ctx, r, size, chunkindex.OpenOptions{Resident: func(ix *chunkindex.Index) []int {
		owner = cluster.BoundedOwners(cluster.IndexKey(ix.ID()), ix.SampleCounts(), cluster.Positions(nodes))
		var own []int
		for c, k := range owner {
			if k == 0 {
				own = append(own, c)
			}
		}
		return own
	}})
	if err != nil {
		return nil, err
	}
	row := &IndexRow{Nodes: nodes, LoadSeconds: time.Since(start).Seconds()}
	row.HeapBytes, row.PeakHeapBytes = h.held()
	st := ix.Tables().Stats()
	row.FootprintBytes = ix.Tables().Footprint()
	row.ResidentTables = st.Resident
	for c, k := range owner {
		if k == 0 {
			row.OwnedSamples += syn.counts[c]
		}
	}
	row.CachedTables, row.CachedBytes = st.Cached, st.CachedBytes
	row.FormulaBytes = partialFormula(syn, ix, row.OwnedSamples, row.ResidentTables) + row.CachedBytes

	// A batch of other nodes' samples, one per chunk.
	var others []int
	for c, k := range owner {
		if k != 0 && syn.counts[c] > 0 {
			others = append(others, c)
		}
	}
	rng := rand.New(rand.NewPCG(3, 4))
	rng.Shuffle(len(others), func(i, j int) { others[i], others[j] = others[j], others[i] })
	if n := min(batch, len(others)); n > 0 {
		ids := make([]int, n)
		for i, c := range others[:n] {
			first, cn := ix.ChunkRange(c)
			ids[i] = first + rng.IntN(cn)
		}
		before := ix.Tables().Stats().Loads
		start := time.Now()
		if _, err := ix.Samples(ctx, ids); err != nil {
			return nil, err
		}
		row.BatchSeconds = time.Since(start).Seconds()
		row.BatchChunks, row.BatchLoads = n, ix.Tables().Stats().Loads-before
		before = ix.Tables().Stats().Loads
		if _, err := ix.Samples(ctx, ids); err != nil {
			return nil, err
		}
		row.RepeatLoads = ix.Tables().Stats().Loads - before
		if len(others) > n {
			c := others[n]
			first, _ := ix.ChunkRange(c)
			key := string(syn.key(nil, first, coprime(syn.n)))
			before = ix.Tables().Stats().Loads
			fp, start := ix.Tables().Footprint(), time.Now()
			id, ok, err := ix.Lookup(ctx, key)
			row.LookupSeconds, row.DirectoryBytes = time.Since(start).Seconds(), ix.Tables().Footprint()-fp
			if err != nil {
				return nil, err
			}
			if !ok || id != first {
				return nil, fmt.Errorf("bench: lookup of %q found %d, %t; want %d", key, id, ok, first)
			}
			row.LookupLoads = ix.Tables().Stats().Loads - before
		}
	}
	runtime.KeepAlive(ix)
	return row, nil
}

// chunkLevelBytes is what every index holds per chunk (docs/format.md):
// the Chunk (48 bytes and its key and ETag) and its first sample ID (8).
func chunkLevelBytes(syn *synthIndex) int64 {
	var n int64
	for c := range syn.counts {
		n += 48 + 8 + int64(len(synthChunkKey(c))) + 34
	}
	return n + 8
}

// wholeFormula is today's index: 20 + key + 4 bytes a sample, plus the
// chunk level.
func wholeFormula(syn *synthIndex) int64 {
	return int64(syn.n)*(20+synthKeyLen+4) + chunkLevelBytes(syn)
}

// partialFormula is a node's partial index: the chunk level and 17 bytes
// more a chunk, its own tables (20 + key a sample, 96 a table), and the
// key lookup: 8 + first key a chunk if the keys are ordered; else none
// until the first lookup by key builds the directory (directoryFormula).
func partialFormula(syn *synthIndex, ix *chunkindex.Index, owned, tables int) int64 {
	n := chunkLevelBytes(syn) + 17*int64(len(syn.counts)) + int64(owned)*(20+synthKeyLen) + 96*int64(tables)
	if syn.ordered {
		return n + int64(len(syn.counts))*(8+synthKeyLen)
	}
	return n
}

// directoryFormula is the key directory of keys in no order: 4 bytes a
// sample and 4 a bucket of 16 to 32.
func directoryFormula(n int) int64 {
	buckets := int64(1)
	for buckets*32 <= int64(n) {
		buckets *= 2
	}
	return 4*int64(n) + 4*(buckets+1)
}

// WriteJSON writes the report as indented JSON: index.json.
func (rep *IndexReport) WriteJSON(w io.Writer) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteText writes the table of docs/benchmarks.md: index.txt.
func (rep *IndexReport) WriteText(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d samples in %d chunks of %s (mean sample %s, %d-byte keys), index object %s; %s, %d CPUs; %s\n\n",
		rep.Samples, rep.Chunks, sizeString(rep.ChunkBytes), sizeString(rep.MeanBytes), rep.KeyBytes, sizeString(rep.IndexBytes),
		rep.GoVersion, rep.CPUs, rep.Command)
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "| keys\t| index\t| load\t| heap held\t| ÷ whole\t| peak while loading\t| Footprint\t| formula\t| own tables\t| batch: chunks, loads, time\t| again\t| first lookup: loads, time, directory\t|")
	fmt.Fprintln(tw, "| --\t| --\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t| --:\t|")
	for _, r := range rep.Rows {
		what := fmt.Sprintf("partial, node 0 of %d", r.Nodes)
		of, batchCol, again, lookup := fmt.Sprintf("%.4f", r.OfWhole), "—", "—", "—"
		if r.Whole {
			what, of = "whole (Decode), every node", "1"
		}
		if r.BatchChunks > 0 {
			batchCol = fmt.Sprintf("%d, %d, %.1f ms", r.BatchChunks, r.BatchLoads, 1000*r.BatchSeconds)
			again = strconv.FormatInt(r.RepeatLoads, 10)
			lookup = fmt.Sprintf("%d, %.2f s, %s", r.LookupLoads, r.LookupSeconds, sizeString(r.DirectoryBytes))
		}
		if r.OfWhole == 0 && !r.Whole {
			of = "—"
		}
		fmt.Fprintf(tw, "| %s\t| %s\t| %.1f s\t| %s\t| %s\t| %s\t| %s\t| %s\t| %d\t| %s\t| %s\t| %s\t|\n",
			r.Keys, what, r.LoadSeconds, sizeString(r.HeapBytes), of, sizeString(r.PeakHeapBytes), sizeString(r.FootprintBytes),
			sizeString(r.FormulaBytes), r.ResidentTables, batchCol, again, lookup)
	}
	tw.Flush()
	_, err := w.Write(b.Bytes())
	return err
}
