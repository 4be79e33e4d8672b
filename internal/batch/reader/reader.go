package reader

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/errkind"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/server/admit"
)

// ErrTooLarge marks a read over Config.MaxBytes.
var ErrTooLarge = errkind.Named(errkind.Invalid, "too_large", "read too large")

// ErrUnread marks a read of a sample its chunk's load left unread: it
// holds a text past the gateway's --max-text-bytes (format.SampleUnread,
// catalog.Loader.WithTexts). The content is the fault, as an image no
// pipeline decodes is: 422.
var ErrUnread = errkind.New(errkind.Unprocessable, "sample left unread")

// Cache is what a read needs of the chunk cache.
type Cache interface {
	Acquire(ctx context.Context, reqs []chunkcache.Request) (*chunkcache.Lease, error)
	MustEvict(reqs []chunkcache.Request) bool
	Stats() chunkcache.Stats
	Capacity() int64
}

// Remote reads the samples whose chunks other nodes hold: route.Router
// on a node of a cluster, route.Solo (which leaves every sample to this node)
// on a single gateway.
type Remote interface {
	// ReadRemote fills data[i] for the positions of s whose chunk is read
	// on another node, with failover, and returns the positions this node
	// reads itself and those the owner left out because their chunk is
	// damaged at rest. fetched, if not nil, holds samples of s fetched
	// before the read (TakeNext), by position.
	ReadRemote(ctx context.Context, s layout.Samples, origin *transport.Origin, fetched, data [][]byte) (local, missing []int, err error)
	// TakeNext returns the samples fetched for the batch whose ETag is
	// key while the one before it was read, per part, waiting for a
	// fetch under way; nil if none.
	TakeNext(ctx context.Context, key string) [][][]byte
	// Delivered records the sample bytes of a batch by source.
	Delivered(home, peer int64)
	// Nodes is the cluster's node count (1: a single gateway).
	Nodes() int
	// Local reports whether this node reads chunk c of ds itself.
	Local(ds *catalog.Dataset, c int) bool
}

// Preloader loads cache entries in the background, bounded, never waited
// for (internal/cache/preload.Set); done hears what the cache did.
type Preloader interface {
	Load(r chunkcache.Request, done func(chunkcache.PrefetchResult)) bool
}

// Tally is told of chunks preloaded for a batch's later parts, as the
// use table's prefetcher tells it of its own: the statistics credit them
// to the stream they were for.
type Tally interface {
	Prefetched(s layout.Stream, epoch uint64, chunk int, bytes int64, disk bool)
}

// Copies is the memory every copy out of the cache takes
// (memory.Manager.Copies): bounded, held until the response that
// carries it is written.
type Copies interface {
	// Buffer returns an empty buffer of capacity at least n and what
	// gives it back, waiting for room within the budget's bound (an error
	// wrapping chunkcache.ErrBusy otherwise).
	Buffer(ctx context.Context, n int64) ([]byte, func(), error)
	// TryBuffer is Buffer if the budget has room now.
	TryBuffer(n int64) ([]byte, func(), bool)
}

// Working is the memory a chunk larger than the whole cache is read
// through into (memory.Manager.Decodes, where a chunk served in place is
// read and decoded): held while its samples are copied out, then given
// back.
type Working interface {
	// Buffer returns an empty buffer of capacity at least n and what
	// gives it back, waiting for room within the budget's bound (an error
	// wrapping chunkcache.ErrBusy otherwise).
	Buffer(ctx context.Context, n int64) ([]byte, func(), error)
	// Reserve reserves n bytes, waiting as Buffer does.
	Reserve(ctx context.Context, n int64) (func(), error)
}

// workingLoader is a loader whose loads take memory of the Through
// budget beside their buffer (catalog.Loader: a chunk served in place,
// decoded as it is read).
type workingLoader interface {
	Working(k chunkcache.Key) int64
}

// Config configures a Reader.
type Config struct {
	Cache  Cache
	Loader chunkcache.Loader // reads a chunk larger than the whole cache through
	Remote Remote
	// SkipDamaged leaves out the samples of chunks damaged at rest
	// (--on-damaged-chunk=skip) instead of failing the read.
	SkipDamaged bool
	// MaxBytes bounds one read's samples (query.Limits.MaxBatchBytes).
	MaxBytes int64
	// Copies is the memory reads copied out of the cache — assembled in
	// parts, or copied out under pressure — take, until the response that
	// carries them is written.
	Copies Copies
	// Through is the memory a chunk larger than the whole cache is read
	// into, outside the cache: a chunk of 256 MiB read for a sample of
	// 16 MiB was once a buffer of its own that no budget counted (32
	// requests for 17 MiB samples of 136 MiB chunks took a node of
	// --memory-limit 1GiB and a 64 MiB cache to 968 MiB resident, 527
	// counted). nil: unbounded (tests).
	Through Working
	// Assemblers bounds the reads being assembled in parts at once: each
	// pins up to half the cache while it copies.
	Assemblers int
	// MaxWait bounds a wait for room to assemble or to load in turn; past
	// it the read fails with chunkcache.ErrBusy.
	MaxWait time.Duration
	// Shared reports whether several jobs share the cache now; then a
	// read whose loads have to evict waits for the one loading before it
	// (see readLocal). nil: never.
	Shared func() bool
	// Preload loads a batch's later parts' chunks while its first part is
	// read (ReadBatch), and Tally hears of what it loaded.
	Preload  Preloader
	Tally    Tally
	Registry prometheus.Registerer
	Log      zerolog.Logger
}

// Reader reads samples. Safe for concurrent use.
type Reader struct {
	cache    Cache
	loader   chunkcache.Loader
	remote   Remote
	skip     bool
	maxBytes int64
	copies   Copies
	through  Working
	assembly *admit.Gate // reads being assembled
	shared   func() bool
	evicting *admit.Gate // reads loading in turn, one at a time
	preload  Preloader
	tally    Tally
	log      zerolog.Logger

	inParts, copied, partsCopied, skipped prometheus.Counter
}

// New returns a reader.
func New(c Config) *Reader {
	r := &Reader{cache: c.Cache, loader: c.Loader, remote: c.Remote, skip: c.SkipDamaged, maxBytes: c.MaxBytes,
		copies:   c.Copies,
		through:  c.Through,
		assembly: admit.New(int64(c.Assemblers), c.MaxWait, "batches larger than the cache being assembled", chunkcache.ErrBusy),
		shared:   c.Shared,
		preload:  c.Preload,
		tally:    c.Tally,
		evicting: admit.New(1, c.MaxWait, "reads whose loads evict chunks of a cache several jobs share, loading in turn", chunkcache.ErrBusy),
		log:      c.Log,
		inParts: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_batches_assembled_in_parts_total",
			Help: "Reads (batches, peers' requests) whose chunks did not fit in the cache together, assembled a group of chunks at a time."}),
		copied: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_batches_copied_total",
			Help: "Reads written from a copy so that their chunks went back to the cache before the client read them (others were waiting for room, or responses pinned over half the cache)."}),
		partsCopied: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_mix_parts_copied_total",
			Help: "Parts of mixture batches copied out of the cache so that the next part's chunks were acquired without holding theirs: the parts' chunks did not fit in the cache together, or the gateway has peers."}),
		skipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_skipped_samples_total",
			Help: "Samples left out of batches because their chunk is damaged (--on-damaged-chunk=skip)."}),
	}
	if r.shared == nil {
		r.shared = func() bool { return false }
	}
	if r.through == nil {
		r.through = unbounded{}
	}
	c.Registry.MustRegister(r.inParts, r.copied, r.partsCopied, r.skipped)
	return r
}

// Stalled reports whether reads wait — for room to assemble, or to load
// in turn — and none has been let through for d. (Waits for the copy
// budget are the memory manager's.)
func (r *Reader) Stalled(d time.Duration) bool {
	return r.assembly.Stalled(d) || r.evicting.Stalled(d)
}

// Request is what to read.
type Request struct {
	Samples layout.Samples
	// Origin is the job stream and position the samples are for, passed
	// on to the nodes they are fetched from; nil for a single sample.
	Origin *transport.Origin
	// Local reads every sample through this node's cache, whichever node
	// owns its chunk: a peer's request, which its asker sent here because
	// this node is the source.
	Local bool
	// Fetched are samples fetched from peers before this read, by
	// position (Remote.TakeNext); nil for none.
	Fetched [][]byte
}

// Result is a read's samples, in order, and what the read cost. Its bytes
// stay valid until Release.
type Result struct {
	Parts net.Buffers // the samples read, back to back, in order
	Bytes int64       // their length
	// MissingPos are the positions left out (skip mode), ascending: their
	// chunk is damaged at rest.
	MissingPos []int
	// What this node's cache did (for a batch of several parts, the loads
	// of all; Chunks and Samples are PerPart's).
	Figures
	// PerPart is, for ReadBatch, what each part's read did.
	PerPart []Figures
	InParts bool

	r       *Reader
	pinned  bool // Parts point into pinned chunks (Relieve may copy them)
	release []func()
}

// Owned is a result whose bytes were made from a read — a batch's
// tensors — in a buffer release gives back (one of the copy budget's):
// nothing of it is pinned, so Relieve has nothing to give back.
func Owned(parts net.Buffers, bytes int64, release func()) *Result {
	return &Result{Parts: parts, Bytes: bytes, release: []func(){release}}
}

// Release gives back what the read holds: its pins, its share of the copy
// budget. Idempotent.
func (res *Result) Release() {
	for _, f := range res.release {
		f()
	}
	res.release = nil
}

// Read reads req's samples. On success the caller writes Parts and then
// calls Release; on error nothing is held.
func (r *Reader) Read(ctx context.Context, req Request) (*Result, error) {
	s := req.Samples
	if s.Bytes > r.maxBytes {
		return nil, fmt.Errorf("%w: %d samples of %d bytes in all, over the server's --max-batch-bytes (%d)", ErrTooLarge, len(s.IDs), s.Bytes, r.maxBytes)
	}
	// data becomes the result's parts; room for a trailer (the tar's
	// end-of-archive blocks) spares the caller a copy of the slice.
	data := make([][]byte, len(s.IDs), len(s.IDs)+1)
	var local, remoteMissing []int
	if req.Local {
		local = make([]int, len(s.IDs))
		for i := range local {
			local[i] = i
		}
	} else {
		var err error
		if local, remoteMissing, err = r.remote.ReadRemote(ctx, s, req.Origin, req.Fetched, data); err != nil {
			return nil, err
		}
		if len(remoteMissing) > 0 {
			in := s.Info[remoteMissing[0]]
			if !r.skip {
				return nil, &catalog.DamagedChunkError{Key: s.DS.ChunkKey(in.Chunk), InPlace: s.DS.InPlace != nil,
					Err: fmt.Errorf("%w: the node that owns chunk %s of dataset %s reports it damaged at rest (sample %q)",
						catalog.ErrCorrupt, s.DS.Index.Chunk(in.Chunk).Key, s.DS.Name, in.Key),
					Cause: fmt.Sprintf("the node that owns it found it damaged at rest, sample %s among what it could not serve (its log says why)", in.Key)}
			}
			r.skippedLog(s.Pick(remoteMissing))
		}
	}
	res := &Result{r: r}
	// A peer's request is answered with what can be read: the asker,
	// told which samples were left out, decides whether its batch may
	// go without them.
	skip := r.skip || req.Local
	localMissing, err := r.readLocal(ctx, s, local, data, res, skip, !req.Local)
	if err == nil {
		var gone []int
		gone, err = r.damagedSamples(s, local, data, skip, !req.Local)
		localMissing = append(localMissing, gone...)
	}
	if err == nil && !req.Local {
		// A peer's request is answered with them as they are: the
		// asker, whose batch they are for, refuses or skips them.
		var gone []int
		gone, err = r.unreadSamples(s, data, r.skip)
		localMissing = append(localMissing, gone...)
	}
	if err != nil {
		res.Release()
		return nil, err
	}
	res.MissingPos = append(remoteMissing, localMissing...)
	slices.Sort(res.MissingPos)
	// What this node's cache gave (before the missing are compacted out).
	home := s.Bytes
	if len(local) < len(s.IDs) || len(res.MissingPos) > 0 || s.DS.Index.Deferred() {
		home = 0
		for _, i := range local {
			home += int64(len(data[i]))
		}
	}
	deferred := s.DS.Index.Deferred()
	res.Parts, res.Bytes = data, s.Bytes
	if len(res.MissingPos) > 0 || len(local) < len(s.IDs) || deferred {
		// Samples from peers may be tensors (a job's pipeline, applied by
		// their owner) rather than the index's bytes: their own lengths.
		res.Parts, res.Bytes = data[:0], 0
		for _, d := range data {
			if d != nil { // nil: missing
				res.Parts = append(res.Parts, d)
				res.Bytes += int64(len(d))
			}
		}
	}
	if res.Bytes > r.maxBytes {
		// Samples decoded in place are sized once decoded.
		res.Release()
		return nil, fmt.Errorf("%w: %d samples of %d bytes in all, over the server's --max-batch-bytes (%d)", ErrTooLarge, len(res.Parts), res.Bytes, r.maxBytes)
	}
	remote := res.Bytes - home
	if !req.Local {
		r.remote.Delivered(home, remote)
	}
	res.pinned = !res.InParts && home > 0
	return res, nil
}

// readLocal reads the samples at positions pos of s through this node's
// cache into data: pinned whole if their chunks fit in the cache together,
// else assembled in parts. It returns the positions left out (skip mode).
//
// With skip, the samples of a chunk damaged at rest are left out, and
// counted and logged if count.
func (r *Reader) readLocal(ctx context.Context, s layout.Samples, pos []int, data [][]byte, res *Result, skip, count bool) (missing []int, err error) {
	if len(pos) == 0 {
		return nil, nil
	}
	sub := subset(s, pos)
	for grown := 0; ; {
		lease, err := r.acquire(ctx, requests(sub))
		if errors.Is(err, catalog.ErrGrown) && grown < maxGrown {
			grown++ // a chunk decoded in place learnt its size: ask again
			continue
		}
		if errors.Is(err, chunkcache.ErrTooLarge) {
			m, err := r.assemble(ctx, sub, pos, data, res, skip, count)
			return append(missing, m...), err
		}
		if err != nil {
			drop, ok := damaged(err, sub, skip)
			if !ok {
				return nil, err
			}
			missing = append(missing, r.drop(&pos, &sub, drop, count)...)
			if len(pos) == 0 {
				return missing, nil
			}
			continue
		}
		res.release = append(res.release, lease.Release)
		res.Chunks = sub.Chunks
		res.Loads, res.LoadedBytes = lease.Loaded()
		_, res.DiskBytes = lease.Below()
		res.StoreBytes, res.StoreGETs = storeBytes(lease, 0, sub)
		deferred := sub.DS.Index.Deferred()
		for j, in := range sub.Info {
			data[pos[j]] = sampleBytes(lease.Bytes(sub.Slot[j]), in, deferred)
		}
		return missing, nil
	}
}

// maxGrown bounds a read's retries after chunks learn their sizes
// (catalog.ErrGrown): each chunk learns once, and a read's chunks load at
// once, so one retry is the usual.
const maxGrown = 3

// acquire pins reqs in the cache. Several jobs sharing a full cache: a
// read that has to evict to load its chunks loads in turn with the others
// that do, so that each chooses its victims knowing what the one before
// it brought in and pinned — concurrent loads of several jobs' batches,
// each evicting for itself, read measurably more (about 8 % at four
// jobs, measured at 7e79997). A read whose chunks are
// resident, or that fits in free room, never waits for this.
func (r *Reader) acquire(ctx context.Context, reqs []chunkcache.Request) (*chunkcache.Lease, error) {
	if r.cache.MustEvict(reqs) && r.shared() {
		leave, err := r.evicting.Acquire(ctx, 1)
		if err != nil {
			return nil, err
		}
		defer leave()
	}
	return r.cache.Acquire(ctx, reqs)
}

// sampleBytes is a sample's bytes in its chunk: where the index says, or
// for a chunk decoded in place (deferred; the index holds the sample's
// ordinal) where the decoded chunk's table says.
func sampleBytes(chunk []byte, in chunkindex.Sample, deferred bool) []byte {
	off, n := in.Offset, in.Length
	if deferred {
		off, n, _ = format.Entry(chunk, int(in.Offset))
	}
	return chunk[off : off+n : off+n]
}

// damaged reports whether err is a chunk of sub damaged or lost at rest
// (catalog.AtRest) that skip mode leaves out, and which chunk (its index
// in sub.Chunks).
func damaged(err error, sub layout.Samples, skip bool) (int, bool) {
	key, ok := catalog.AtRest(err)
	if !skip || !ok {
		return 0, false
	}
	for i, c := range sub.Chunks {
		if sub.DS.ChunkKey(c) == key {
			return i, true
		}
	}
	return 0, false
}

// damagedSamples finds, among the samples read at positions pos of s,
// those a format wrote damaged at rest (format.SampleDamage: a video's
// GOP whose bytes failed the index's checksums, its chunk's other GOPs
// intact). Without skip the read fails naming the first, a
// *catalog.DamagedChunkError (502); with skip they are left out (their
// data set nil), counted and logged if count, and their positions
// returned. A tar dataset's samples are never written so: it looks at
// those of a dataset served in place alone.
func (r *Reader) damagedSamples(s layout.Samples, pos []int, data [][]byte, skip, count bool) ([]int, error) {
	if !s.DS.Index.Deferred() {
		return nil, nil
	}
	var gone []int
	for _, p := range pos {
		if data[p] == nil {
			continue // left out already
		}
		cause, ok := format.SampleDamage(data[p])
		if !ok {
			continue
		}
		if !skip {
			in := s.Info[p]
			return nil, &catalog.DamagedChunkError{Key: s.DS.ChunkKey(in.Chunk), InPlace: true, Cause: cause,
				Err: fmt.Errorf("%w: sample %q of chunk %s of dataset %s: %s", catalog.ErrCorrupt, in.Key, s.DS.Index.Chunk(in.Chunk).Key, s.DS.Name, cause)}
		}
		data[p] = nil
		gone = append(gone, p)
	}
	if count && len(gone) > 0 {
		r.skippedLog(s.Pick(gone))
	}
	return gone, nil
}

// unreadSamples finds, among the samples read (data; nil: left out
// already), those a load wrote unread (format.SampleUnread: a text past
// --max-text-bytes, left unread by its chunk's decode), from this node's
// cache or a peer's. Without skip the read fails naming the first
// (ErrUnread, 422); with skip they are left out (their data set nil),
// counted and logged, and their positions returned. A tar dataset's
// samples are never written so.
func (r *Reader) unreadSamples(s layout.Samples, data [][]byte, skip bool) ([]int, error) {
	if !s.DS.Index.Deferred() {
		return nil, nil
	}
	var gone []int
	for p, d := range data {
		if d == nil {
			continue
		}
		why, ok := format.SampleUnread(d)
		if !ok {
			continue
		}
		if !skip {
			return nil, fmt.Errorf("%w: sample %q of dataset %s is not served: %s (the gateway's --max-text-bytes)", ErrUnread, s.Info[p].Key, s.DS.Name, why)
		}
		data[p] = nil
		gone = append(gone, p)
	}
	if len(gone) > 0 {
		keys := make([]string, len(gone))
		for i, p := range gone {
			keys[i] = s.Info[p].Key
		}
		r.skipped.Add(float64(len(keys)))
		r.log.Warn().Str("dataset", s.DS.Name).Strs("skipped_samples", keys).
			Msg("serving without samples holding a text past --max-text-bytes")
	}
	return gone, nil
}

// drop removes the samples of sub's chunk drop from pos and sub, logs and
// counts them if count, and returns their positions.
func (r *Reader) drop(pos *[]int, sub *layout.Samples, drop int, count bool) []int {
	var gone, keep, goneAt, keepAt []int
	for j, p := range *pos {
		if sub.Slot[j] == drop {
			gone = append(gone, p)
			goneAt = append(goneAt, j)
		} else {
			keep = append(keep, p)
			keepAt = append(keepAt, j)
		}
	}
	if count {
		r.skippedLog(sub.Pick(goneAt))
	}
	*pos = keep
	*sub = sub.Pick(keepAt)
	return gone
}

// skippedLog logs and counts the samples of a damaged chunk left out:
// those of s.
func (r *Reader) skippedLog(s layout.Samples) {
	keys := make([]string, len(s.Info))
	for i, in := range s.Info {
		keys[i] = in.Key
	}
	r.skipped.Add(float64(len(keys)))
	r.log.Warn().Str("dataset", s.DS.Name).Str("chunk", s.DS.Index.Chunk(s.Info[0].Chunk).Key).Strs("skipped_samples", keys).
		Msg("serving without the samples of a damaged chunk")
}

// subset lays out the samples of s at positions pos.
func subset(s layout.Samples, pos []int) layout.Samples {
	if len(pos) == len(s.IDs) {
		return s
	}
	return s.Pick(pos)
}

// storeBytes is what the store loads of lease read for requests(s),
// requests [from, from+len(s.Chunks)) of it: their chunks' store sizes,
// and the requests they sent.
func storeBytes(lease *chunkcache.Lease, from int, s layout.Samples) (n, gets int64) {
	for i := range lease.StoreLoads(from, from+len(s.Chunks)) {
		n += s.DS.StoreSize(s.Chunks[i-from])
		gets += int64(s.DS.StoreGETs(s.Chunks[i-from]))
	}
	return n, gets
}

// requests are the cache requests of s's chunks.
func requests(s layout.Samples) []chunkcache.Request {
	reqs := make([]chunkcache.Request, len(s.Chunks))
	for i, c := range s.Chunks {
		reqs[i] = s.DS.ChunkRequest(c)
	}
	return reqs
}

// Relieve gives a result's pins back to the cache while its response is
// being written: it copies rest — the parts not written yet — out of the
// pinned chunks, if the copy budget has room now, releases the pins and
// returns the parts to write instead; otherwise it returns rest as it is.
// Writing from the pinned chunks saves a copy, and most clients read a
// batch as fast as it is written; the copy is for the client that does
// not, when others wait for the cache: until its write deadline it would
// keep their batches out. A result not pinned (assembled in parts, or
// fetched from peers) has nothing to give back.
func (res *Result) Relieve(rest net.Buffers) (net.Buffers, bool) {
	r := res.r
	if !res.pinned {
		return rest, false
	}
	var n int64
	for _, p := range rest {
		n += int64(len(p))
	}
	buf, release, ok := r.copies.TryBuffer(n)
	if !ok {
		return rest, false
	}
	for _, p := range rest {
		buf = append(buf, p...)
	}
	res.Release() // the pins
	res.pinned = false
	res.release = []func(){release}
	r.copied.Inc()
	return net.Buffers{buf}, true
}
