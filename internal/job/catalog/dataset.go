package catalog

import (
	"math/bits"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/cluster"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/s3backend"
)

// Dataset is one version of a dataset's index, loaded: everything a
// request needs to map samples to chunks and chunks to cache keys. It is
// immutable once built, so any goroutine may read it without locking; only
// the damaged flags change, atomically. A reload builds a new one.
type Dataset struct {
	Name, URL string
	Store     s3backend.Store
	Index     *chunkindex.Index
	IndexETag string    // of the index object when it was read; "" if unknown
	LoadedAt  time.Time // when this version was loaded
	Version   int       // 1 for the index loaded at start, +1 per reload
	Counts    []int     // samples per chunk: the shuffle's input
	// MaxChunk is the size of the largest chunk rounded up to its size
	// class (BufferClass): every chunk's buffer is allocated this big, so
	// that buffers are interchangeable — within the dataset, and between
	// datasets packed with about the same chunk size, whose largest chunks
	// differ by a few bytes (a mixture's components evict each other's
	// chunks, and a buffer of another size is freed and a new one faulted
	// in).
	MaxChunk int64
	// reuse is, for a view of some fields (Select), the dataset's own
	// MaxChunk: the class its buffers are preallocated in, which a view's
	// chunk may take when none of its own is free (chunkcache.Request.
	// Reuse). 0 for the dataset itself.
	reuse int64
	// IndexModified is the index object's time when it was read (zero if
	// unknown): the time of the dataset's files as the S3 face serves
	// them, later for each re-pack.
	IndexModified time.Time

	partition  Partition      // how the index was read; a reload reads the same way
	chunkByKey map[string]int // chunk object key → chunk ID
	damaged    []atomic.Bool  // per chunk: its last read found it damaged at rest

	// In a cluster: the index's ownership key and each chunk's owner
	// under the memberships asked for lately.
	key    uint64
	owners *ownerMemo

	// InPlace is set for a dataset served in place (package format): its
	// format's decoder, its fields, the store its objects are in; nil for
	// a tar dataset. A dataset read with some of its fields is a view of
	// its own (Select), sharing everything but the chunks' keys and
	// sizes.
	InPlace *InPlace
	opened  opening // how the dataset was opened: a reload opens it alike

	ancestors *ancestorMemo // views of the versions the index extends
	vision    *visionMemo   // image-text facts, once a vision job asks
	sizes     *sizesMemo    // image sizes, once a job batching by shape asks
}

// ownerMemo holds the chunk owners of the last few memberships asked
// for: the one the cluster agrees on, and the older ones jobs pinned.
type ownerMemo struct {
	mu   sync.Mutex
	keys []string // membership versions, oldest first
	vals [][]int
}

// maxOwnerMemo bounds the memberships whose owners a dataset keeps: each
// costs a word a chunk.
const maxOwnerMemo = 8

// NewDataset builds the loaded form of an index.
func NewDataset(name, url string, store s3backend.Store, ix *chunkindex.Index) *Dataset {
	d := &Dataset{Name: name, URL: url, Store: store, Index: ix, LoadedAt: time.Now(), Version: 1,
		Counts: ix.SampleCounts(), chunkByKey: make(map[string]int, ix.NumChunks()),
		damaged: make([]atomic.Bool, ix.NumChunks()), key: cluster.IndexKey(ix.Lineage().Root()), owners: &ownerMemo{},
		ancestors: &ancestorMemo{}, vision: &visionMemo{}, sizes: &sizesMemo{}}
	for c := range ix.NumChunks() {
		d.chunkByKey[ix.Chunk(c).Key] = c
		d.MaxChunk = max(d.MaxChunk, ix.Chunk(c).Size)
	}
	d.MaxChunk = BufferClass(d.MaxChunk)
	return d
}

// Remote reports whether the dataset's store is an object store reached
// over the network (s3://), which a node of a cluster can lose while its
// peers keep it (storepath); a local directory is always there.
func (d *Dataset) Remote() bool { return strings.HasPrefix(d.URL, "s3://") }

// BufferClass rounds a buffer size up to a multiple of 1/16 to 1/32 of
// it (a 4 KiB multiple below 64 KiB): at most 6.25 % more memory, and
// sizes within a few percent of each other share a class.
func BufferClass(n int64) int64 {
	if n <= 0 {
		return n
	}
	g := int64(4 << 10)
	if n > 64<<10 {
		g = int64(1) << (bits.Len64(uint64(n)) - 5)
	}
	return (n + g - 1) / g * g
}

// Buffers is how many chunk buffers (each MaxChunk bytes) a cache holds
// when share bytes of it are full of this dataset's chunks: the cache
// counts chunks by their sizes, not by their buffers' capacity, so as
// many chunks of the mean size as fit in share (every chunk when share
// holds the whole dataset), though no more buffers than fit in an eighth
// more than share: with chunks of very different sizes a cache could hold
// many small ones, each in a buffer of the largest one's class, and
// preallocating for that would take memory it may never use.
//
// Preallocating share ÷ MaxChunk instead left the first epoch to allocate
// and fault in the rest: packs end each chunk just over its target,
// whose class is then up to 1/16 larger, so with 16 MiB chunks in their
// 17 MiB class a cache of the whole dataset faulted in 5 of its 72
// buffers during the cold epoch, a fifth of the gateway's CPU in it.
func (d *Dataset) Buffers(share int64) int {
	chunks, total := d.Index.NumChunks(), d.Index.TotalBytes()
	if share <= 0 || total <= 0 || d.MaxChunk <= 0 {
		return 0
	}
	n := chunks
	if share < total {
		// share × chunks ÷ total, exactly: the share of a dataset cached
		// whole in four parts holds a quarter of its chunks, not one fewer.
		hi, lo := bits.Mul64(uint64(share), uint64(chunks))
		q, _ := bits.Div64(hi, lo, uint64(total))
		n = int(q)
	}
	return int(min(int64(n), (share+share/8)/d.MaxChunk))
}

// ID is the index's content identity, which names this version.
func (d *Dataset) ID() string { return d.Index.ID() }

// ClusterKey is the index's part of every chunk's ownership score.
func (d *Dataset) ClusterKey() uint64 { return d.key }

// Owners returns each chunk's owner under membership m, a position among
// its members (cluster.Membership.Owners), memoised: it is asked for on
// every batch laid out and every chunk read. The slice must not be
// modified.
func (d *Dataset) Owners(m *cluster.Membership) []int {
	o := d.owners
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, v := range o.keys {
		if v == m.Version() {
			return o.vals[i]
		}
	}
	// Computed under the lock: a handful of memberships, each once.
	owners := m.Owners(d.key, d.Counts)
	if len(o.keys) == maxOwnerMemo {
		o.keys, o.vals = o.keys[1:], o.vals[1:]
	}
	o.keys, o.vals = append(o.keys, m.Version()), append(o.vals, owners)
	return owners
}

// ChunkKey is chunk c's cache key. It carries the object's ETag, so a chunk
// rewritten in the store is a different key: the cache never serves bytes
// of one version of an object for another.
// A chunk of a dataset served in place read with some of its fields is
// another key (Key.Select), decoded on its own.
func (d *Dataset) ChunkKey(c int) chunkcache.Key {
	ch := d.Index.Chunk(c)
	return chunkcache.Key{Dataset: d.Name, Object: ch.Key, ETag: ch.ETag, Select: d.Selected()}
}

// ChunkSize is the bytes chunk c takes in the cache: its object's size,
// or for a dataset served in place its resident bound with the fields
// read (format.Decoder.Extent).
// A chunk that decoded larger than its bound once is the size it needed
// (ErrGrown).
func (d *Dataset) ChunkSize(c int) int64 {
	if d.InPlace == nil {
		return d.Index.Chunk(c).Size
	}
	if n := d.InPlace.grown[c].Load(); n > 0 {
		return n
	}
	if d.InPlace.sel != nil {
		return d.InPlace.sizes[c]
	}
	return d.Index.Chunk(c).Size
}

// fit records that chunk c, decoded with its long texts left unread
// (InPlace.longTexts), needs n bytes, fewer than its bound, which counts
// every text whole: every later request for it asks n, so that the chunk
// is cached as what it holds, not as the bound of values it never holds
// (a chunk bounded larger than the whole cache would be read through on
// every request).
func (d *Dataset) fit(c int, n int64) {
	if d.InPlace != nil && n < d.ChunkSize(c) {
		d.InPlace.grown[c].Store(n)
	}
}

// StoreSize is the bytes a load of chunk c reads from the store: its
// object's size (a tar chunk is read whole, as it is cached), or for a
// dataset served in place its store extent with the fields read — the
// bytes of format.Decoder.Extent's ranges, which the loader reads — what
// /stats counts as backend bytes and the planner predicts.
func (d *Dataset) StoreSize(c int) int64 {
	if d.InPlace == nil {
		return d.ChunkSize(c)
	}
	ranges, _ := d.InPlace.Decoder.Extent(c, d.InPlace.sel)
	return format.Concat(ranges)
}

// StoreGETs is how many requests a load of chunk c from the store sends:
// a chunk read whole is read in the store's parts (s3backend.S3.Requests;
// one for a local file), what a plan's bill counts (planner.Dataset.GETs).
// A chunk read in place is its fields' ranges, not counted: 0.
func (d *Dataset) StoreGETs(c int) int {
	r, ok := d.Store.(interface{ Requests(n int64) int })
	if !ok || d.InPlace != nil {
		return 0
	}
	return r.Requests(d.StoreSize(c))
}

// ChunkRequest is what the cache needs to load chunk c.
func (d *Dataset) ChunkRequest(c int) chunkcache.Request {
	return chunkcache.Request{Key: d.ChunkKey(c), Size: d.ChunkSize(c), Alloc: d.MaxChunk, Reuse: d.reuse}
}

// ChunkOf is the chunk ID a cache key names, if it is a chunk of this
// version of the dataset read with these fields.
func (d *Dataset) ChunkOf(k chunkcache.Key) (int, bool) {
	c, ok := d.chunkByKey[k.Object]
	if !ok || k.Dataset != d.Name || d.Index.Chunk(c).ETag != k.ETag || k.Select != d.Selected() {
		return 0, false
	}
	return c, true
}

// IsDamaged reports whether chunk c's last read found it damaged at rest.
func (d *Dataset) IsDamaged(c int) bool { return d.damaged[c].Load() }
