package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/format"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/cache/disktier"
	"github.com/brandgw/brand/s3backend"
)

// objectReader is a store that reads whole objects and reports the ranges
// of a read as they arrive (s3backend.S3 and Local are), so that the loader
// can verify them while they are hot in the cache, and the store can ask
// for a whole chunk with its cheapest request.
type objectReader interface {
	ReadObject(ctx context.Context, key, etag string, p []byte, progress func(start, end int)) error
}

// Loader reads whole chunks from their dataset's store and checks every
// sample against the index before the chunk enters the cache, so that no
// response ever carries bytes that fail their CRC32C.
//
// A chunk that fails its checksum is read again, up to Rereads more times,
// before anything is reported: a byte flipped in transit does not survive a
// second read. What the reads agree on decides the error:
//
//   - one read passes: the chunk is served, and the re-read metric and a
//     warning remember, whichever checksums failed (a tar chunk's own,
//     or an in-place index's, which readChecked re-reads);
//   - every read fails the same way (the same sample, the same wrong CRC;
//     for a chunk served in place, the same reason it did not decode):
//     the stored bytes are damaged at rest, a *DamagedChunkError wrapping
//     ErrCorrupt, logged at error level;
//   - every read fails, but differently: the bytes are being damaged on
//     the way, an error wrapping both s3backend.ErrUnavailable and
//     ErrCorrupt, since a later request may well get through.
type Loader struct {
	catalog *Catalog
	timeout time.Duration // bounds one chunk's read, re-reads and retries included
	rereads int           // extra reads of a chunk that fails its checksum
	disk    Disk          // nil: no disk tier
	peers   Handover      // nil: no chunks handed over
	guard   StoreGuard    // nil: store reads bounded by their callers alone
	pools   format.Buffers
	decodes Decodes
	texts   int64 // WithTexts; 0: none
	log     zerolog.Logger
}

// Decodes is the node's memory for decoding (memory.Manager.Decodes): a
// chunk of a dataset served in place reserves what reading and decoding
// it takes — its ranges as read, the decoder's own (format.Working) —
// before it is read, waiting within the budget's bound.
type Decodes interface {
	Reserve(ctx context.Context, n int64) (release func(), err error)
}

// WithMemory returns the loader reading chunks of datasets served in
// place into buffers of pools and within decodes (memory.Manager's).
// Without, it allocates them and reserves nothing.
func (l Loader) WithMemory(pools format.Buffers, decodes Decodes) Loader {
	l.pools, l.decodes = pools, decodes
	return l
}

// WithTexts returns the loader leaving unread every text value of more
// than most bytes of a chunk served in place whose format finds them
// before it reads them (format.TextBound: Parquet's size statistics,
// pages' headers and values' length prefixes; the gateway's
// --max-text-bytes): each sample holding one is written unread
// (format.WriteUnread), which a read of it is refused for, and the
// chunk's decode reserves what that decode takes, not what holding the
// value would. Without, or with most 0, every value is decoded.
func (l Loader) WithTexts(most int64) Loader {
	l.texts = most
	return l
}

// unbounded is memory without a manager: buffers allocated, nothing
// reserved.
type unbounded struct{}

func (unbounded) Get(n int64) []byte { return make([]byte, 0, n) }
func (unbounded) Put([]byte)         {}
func (unbounded) Reserve(context.Context, int64) (func(), error) {
	return func() {}, nil
}

// Handover gives the bytes of chunks this node gains in a membership
// change from their old owner's cache (internal/cluster/handover): looked at
// after the disk tier and before the store, for the chunks it was asked
// to hand over; verified as the store's bytes are. A chunk it does not
// give is read from the store.
type Handover interface {
	Read(ctx context.Context, k chunkcache.Key, buf []byte, verify func([]byte) error) bool
}

// WithHandover returns the loader reading chunks handed over through h
// before the store.
func (l Loader) WithHandover(h Handover) Loader {
	l.peers = h
	return l
}

// StoreGuard bounds a node's reads of a remote store beyond their
// callers' contexts (storepath.Watch on a node of a cluster): the context
// Guard returns also ends when the node finds the store unreachable, at
// once if it is now, with a cause the read's error is then wrapped with
// (a 503 the client fails over from; a refusal a peer reads elsewhere
// after), rather than the read waiting for TCP to give up.
type StoreGuard interface {
	Guard(ctx context.Context) (context.Context, context.CancelFunc)
}

// WithGuard returns the loader reading chunks of remote datasets
// (Dataset.Remote) under g.
func (l Loader) WithGuard(g StoreGuard) Loader {
	l.guard = g
	return l
}

// guarded runs a store read f under g's bound if g is set, and wraps its
// error with the guard's cause if that ended it.
func guarded(ctx context.Context, g StoreGuard, f func(ctx context.Context) error) error {
	if g == nil {
		return f(ctx)
	}
	gctx, release := g.Guard(ctx)
	defer release()
	err := f(gctx)
	if c := context.Cause(gctx); err != nil && ctx.Err() == nil && c != nil && !errors.Is(err, c) &&
		!errors.Is(c, context.Canceled) && !errors.Is(c, context.DeadlineExceeded) {
		err = fmt.Errorf("%w: %w", c, err)
	}
	return err
}

// Disk is a tier of chunks on local disk below the cache
// (internal/cache/disktier): looked at before the store, given what the store
// gave. Bytes it reads are verified as the store's are, and a chunk that
// fails is dropped from it and read from the store.
type Disk interface {
	Read(ctx context.Context, k chunkcache.Key, buf []byte, verify func([]byte) error) bool
	Spill(k chunkcache.Key, data []byte, release func())
	Wants(k chunkcache.Key) bool
}

// WithDisk returns the loader reading through d first.
func (l Loader) WithDisk(d Disk) Loader {
	l.disk = d
	return l
}

// Spill implements chunkcache.Spiller: a chunk the cache holds is offered
// to the disk tier, if there is one.
func (l Loader) Spill(k chunkcache.Key, data []byte, release func()) {
	if l.disk == nil {
		release()
		return
	}
	l.disk.Spill(k, data, release)
}

// Wants implements chunkcache.Spiller: whether the disk tier asks for a
// chunk the cache holds, which it could not write when it was loaded.
func (l Loader) Wants(k chunkcache.Key) bool { return l.disk != nil && l.disk.Wants(k) }

// fromDisk fills buf with chunk c from the disk tier, verified, and
// reports whether it did.
func (l Loader) fromDisk(ctx context.Context, ds *Dataset, c int, k chunkcache.Key, buf []byte) bool {
	return l.disk.Read(ctx, k, buf, verifier(ctx, ds, c, k))
}

// verifier checks bytes of chunk c read from elsewhere than the store (a
// disk tier, a peer) against the index's CRC32Cs; an error wrapping
// disktier.ErrUnchecked means they could not be checked.
func verifier(ctx context.Context, ds *Dataset, c int, k chunkcache.Key) func([]byte) error {
	if ds.InPlace != nil {
		// A decoded chunk carries its samples' CRC32Cs in its table.
		return func(buf []byte) error {
			t, err := format.Verify(buf)
			if err != nil {
				return fmt.Errorf("%w: decoded chunk %s of dataset %s: %w", ErrCorrupt, k.Object, k.Dataset, err)
			}
			if _, n := ds.Index.ChunkRange(c); t.Len() != n {
				return fmt.Errorf("%w: decoded chunk %s of dataset %s holds %d samples, the index counts %d", ErrCorrupt, k.Object, k.Dataset, t.Len(), n)
			}
			return nil
		}
	}
	return func(buf []byte) error {
		// A node whose index holds only its own chunks' tables reads
		// this chunk's table first if it is another node's chunk.
		release, err := ds.Index.Tables().Prepare(ctx, []int{c})
		if err != nil {
			return fmt.Errorf("%w: %w", disktier.ErrUnchecked, err)
		}
		defer release()
		v := chunkindex.NewVerifier(ds.Index, c, buf)
		v.Progress(0, len(buf))
		if id, got := v.Finish(); id >= 0 {
			return checksumError(checksumFault(ds.Index, id, got), k.Object, k.Dataset)
		}
		return nil
	}
}

// NewLoader returns the loader of c's chunks: each read bounded by
// timeout, retries included, and re-read up to rereads more times when it
// fails its checksum.
func NewLoader(c *Catalog, timeout time.Duration, rereads int) Loader {
	return Loader{catalog: c, timeout: timeout, rereads: rereads, pools: unbounded{}, decodes: unbounded{}, log: c.log}
}

// working is the memory decoding chunk c of ds takes beside its buffer.
func (l Loader) working(ds *Dataset, c int) int64 {
	need := ds.InPlace.working(c)
	if w, long := ds.InPlace.longTexts(c, l.texts); long {
		need = w
	}
	return need
}

// Working is the memory loading chunk k takes beside the buffer it is
// read into, from the decodes budget (0 for a chunk read as stored): a
// caller that reserves its buffer from the same budget reserves the two
// at once, and tells the load so (WithWorkingHeld): two reservations of
// one budget, the second asked while the first is held, waited on each
// other (a chunk larger than the cache served in place, read through,
// was refused 503 after a minute with the budget taken by its own
// buffer and others').
func (l Loader) Working(k chunkcache.Key) int64 {
	ds, c, err := l.catalog.Chunk(k)
	if err != nil || ds.InPlace == nil {
		return 0
	}
	return l.working(ds, c)
}

// workingHeldKey marks a load whose working memory its caller holds.
type workingHeldKey struct{}

// WithWorkingHeld is ctx of a load whose working memory (Working) the
// caller has reserved with its buffer: the load reserves none.
func WithWorkingHeld(ctx context.Context) context.Context {
	return context.WithValue(ctx, workingHeldKey{}, true)
}

// WorkingHeld reports whether ctx is of a load whose working memory its
// caller holds (WithWorkingHeld).
func WorkingHeld(ctx context.Context) bool { return ctx.Value(workingHeldKey{}) != nil }

// Load implements chunkcache.Loader.
func (l Loader) Load(ctx context.Context, k chunkcache.Key, buf []byte) error {
	_, err := l.LoadTiered(ctx, k, buf)
	return err
}

// LoadTiered implements chunkcache.TieredLoader: the chunk comes from the
// disk tier if it holds it whole and right (below), else from its old
// owner's cache if it is being handed over (not below: the disk tier
// keeps a copy, as of the store's), else from the store.
func (l Loader) LoadTiered(ctx context.Context, k chunkcache.Key, buf []byte) (below bool, err error) {
	ds, c, err := l.catalog.Chunk(k)
	if err != nil {
		return false, err
	}
	if l.disk != nil && l.fromDisk(ctx, ds, c, k, buf) {
		return true, nil
	}
	if l.peers != nil && l.peers.Read(ctx, k, buf, verifier(ctx, ds, c, k)) {
		return false, nil
	}
	l.log.Debug().Str("dataset", ds.Name).Int("chunk", c).Msg("reading a chunk from the store")
	if l.guard != nil && ds.Remote() {
		return false, guarded(ctx, l.guard, func(ctx context.Context) error { return l.fromStore(ctx, ds, c, k, buf) })
	}
	return false, l.fromStore(ctx, ds, c, k, buf)
}

// fromStore reads chunk c from the store into buf, verified, re-reading a
// chunk that fails its checksum (Loader).
func (l Loader) fromStore(ctx context.Context, ds *Dataset, c int, k chunkcache.Key, buf []byte) error {
	m := l.catalog.metrics
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	read1 := func(ctx context.Context, ds *Dataset, c int, k chunkcache.Key, buf []byte) (fault, int, error) {
		f, err := readTar(ctx, ds, c, k, buf)
		return f, 0, err
	}
	if ds.InPlace != nil {
		if !WorkingHeld(ctx) {
			release, err := l.decodes.Reserve(ctx, l.working(ds, c))
			if err != nil {
				return fmt.Errorf("decoding chunk %s of dataset %s: %w", k.Object, k.Dataset, err)
			}
			defer release()
		}
		read1 = func(ctx context.Context, ds *Dataset, c int, k chunkcache.Key, buf []byte) (fault, int, error) {
			return readDecoded(ctx, ds, c, k, buf, l.pools, l.rereads, l.texts)
		}
	}
	var first, last fault
	unstable := false
	checked := 0 // reads readChecked re-did, their bytes having failed the index's checksums
	for read := 0; ; read++ {
		f, failed, err := read1(ctx, ds, c, k, buf)
		if _, ok := errors.AsType[*DamagedChunkError](err); !ok && failed > 0 {
			// Reads whose bytes failed the index's checksums and were
			// read again (readChecked): counted as a tar chunk's failed
			// reads and re-reads are, below. A DamagedChunkError counts
			// its own.
			checked += failed
			m.corruptChunks.Add(float64(failed))
			m.rereads.Add(float64(failed))
		}
		if errors.Is(err, ErrGrown) {
			return err
		}
		if dce, ok := errors.AsType[*DamagedChunkError](err); ok {
			// Bytes of a chunk served in place that failed the CRC32Cs of
			// an index with checksums on every read (readChecked):
			// damaged at rest, as a tar chunk failing its own is.
			m.corruptChunks.Add(float64(dce.Reads))
			m.rereads.Add(float64(dce.Reads - 1))
			l.log.Error().Str("dataset", k.Dataset).Str("chunk", k.Object).Int("reads", dce.Reads).
				Str("fault", dce.Cause).Msg("chunk damaged at rest: its bytes fail the index's checksums the same way on every read")
			return err
		}
		if err != nil {
			m.fetchErrors.Inc()
			if errors.Is(err, s3backend.ErrChanged) {
				// The dataset is being rewritten; its new index may follow.
				l.catalog.Poke()
			}
			err = fmt.Errorf("reading chunk %s of dataset %s: %w", k.Object, k.Dataset, err)
			if errors.Is(err, s3backend.ErrNotFound) {
				return &LostChunkError{Key: k, Err: err, InPlace: ds.InPlace != nil}
			}
			return err
		}
		if f.kind == intact {
			ds.damaged[c].Store(false)
			m.fetchSeconds.Observe(time.Since(start).Seconds())
			if reads := read + 1 + checked; reads > 1 {
				l.log.Warn().Str("dataset", k.Dataset).Str("chunk", k.Object).Int("reads", reads).
					Msg("chunk failed its checksum or did not decode, then passed on a re-read: damaged in transit")
			}
			return nil
		}
		if f.kind == undecodable {
			m.decodeFailures.Inc()
		} else {
			m.corruptChunks.Inc()
		}
		if read == 0 {
			first = f
		} else if f != first {
			unstable = true
		}
		last = f
		if read >= l.rereads {
			cerr := last.err(k)
			if unstable {
				l.log.Warn().Str("dataset", k.Dataset).Str("chunk", k.Object).Int("reads", read+1).
					Msg("chunk failed its checksum (or decoding) on every read, differently each time")
				return fmt.Errorf("%w: chunk %s failed its checksum (or decoding) on all %d reads, differently each time (damaged in transit): %w",
					s3backend.ErrUnavailable, k.Object, read+1, cerr)
			}
			l.log.Error().Str("dataset", k.Dataset).Str("chunk", k.Object).Int("reads", read+1).
				Str("fault", last.String()).Msg("chunk damaged at rest: it fails its checksum (or decoding) the same way on every read")
			ds.damaged[c].Store(true)
			return &DamagedChunkError{Key: k, Reads: read + 1, Err: cerr, Cause: last.cause(), InPlace: ds.InPlace != nil}
		}
		m.rereads.Inc()
	}
}

// fault is what one read of a chunk found wrong with its bytes: each
// outcome its own kind, so that no field's value means two things.
type fault struct {
	kind faultKind
	// id is the first sample that failed its CRC32C and got the CRC it
	// had (badChecksum); key and want are its key and the CRC32C its
	// index gives, taken while the read held its chunk's table
	// (checksumFault), so that describing it later reads no table.
	id  int
	got uint32
	// decode is why a chunk served in place did not decode (undecodable).
	decode string
	key    string
	want   uint32
}

// faultKind is the kind of a fault.
type faultKind uint8

const (
	// intact: every sample is as the index says (a tar chunk), or the
	// chunk decoded into a whole resident form (served in place).
	intact faultKind = iota
	// badChecksum: a sample of a tar chunk failed its CRC32C.
	badChecksum
	// undecodable: a chunk served in place did not decode.
	undecodable
)

// checksumFault is the badChecksum fault of a verified read whose first
// failing sample is id, which had CRC32C got; the chunk's table must be
// in memory (prepared, on a partial index).
func checksumFault(ix *chunkindex.Index, id int, got uint32) fault {
	_, _, _, want := ix.SampleRange(id)
	return fault{kind: badChecksum, id: id, got: got, key: ix.SampleKey(id), want: want}
}

// err describes the fault.
func (f fault) err(k chunkcache.Key) error {
	if f.kind == undecodable {
		return fmt.Errorf("%w: chunk %s of dataset %s does not decode: %s", ErrCorrupt, k.Object, k.Dataset, f.decode)
	}
	return checksumError(f, k.Object, k.Dataset)
}

// String names the fault for the log.
func (f fault) String() string {
	if f.kind == undecodable {
		return f.decode
	}
	return "sample " + f.key + " fails its CRC32C"
}

// cause is what a client is told of the fault (DamagedChunkError.Cause):
// the decoder's words, which name the chunk's object by its key in the
// dataset and never a store's endpoint or a local path, or the sample
// that failed its CRC32C.
func (f fault) cause() string {
	if f.kind == undecodable {
		return "it does not decode: " + f.decode
	}
	return "sample " + f.key + " fails its checksum (CRC32C)"
}

// readTar fills buf with tar chunk c once and verifies it.
func readTar(ctx context.Context, ds *Dataset, c int, k chunkcache.Key, buf []byte) (fault, error) {
	// A node whose index holds only its own chunks' tables reads this
	// chunk's table first if it is another node's chunk.
	release, err := ds.Index.Tables().Prepare(ctx, []int{c})
	if err != nil {
		return fault{}, err
	}
	defer release()
	v := chunkindex.NewVerifier(ds.Index, c, buf)
	if or, ok := ds.Store.(objectReader); ok {
		err = or.ReadObject(ctx, k.Object, k.ETag, buf, v.Progress)
	} else {
		err = ds.Store.ReadRange(ctx, k.Object, k.ETag, 0, buf)
	}
	if err != nil {
		return fault{}, err
	}
	if id, got := v.Finish(); id >= 0 {
		return checksumFault(ds.Index, id, got), nil
	}
	return fault{kind: intact}, nil
}

// readDecoded reads chunk c of a dataset served in place once — the
// ranges of its object its format says the fields read need, into a
// buffer of pools, pinned to the version indexed (an object's ETag, a
// local file's identity) — and decodes it into buf, its resident form,
// whose table holds each sample's CRC32C from then on. Bytes that do not
// decode are an undecodable fault, read again as a tar chunk failing its
// checksum is; bytes that differ from the CRC32Cs an index with checksums
// recorded are checked before they are decoded, and read again up to
// rereads more times in all (a streamed read that failed them the first),
// by readChecked; a store error is an error (a file changed since it was
// indexed: s3backend.ErrChanged). failed is how many reads failed those
// checksums and were read again, for the loader to count and log as a
// tar chunk's re-reads. A chunk that may hold a text of more than texts
// bytes (InPlace.longTexts) is read whole and decoded with each sample
// holding one written unread (format.TextBound.DecodeUnread), never
// streamed: the value is never read into memory.
func readDecoded(ctx context.Context, ds *Dataset, c int, k chunkcache.Key, buf []byte, pools format.Buffers, rereads int, texts int64) (fault, int, error) {
	ip := ds.InPlace
	_, long := ip.longTexts(c, texts)
	ranges, _ := ip.Decoder.Extent(c, ip.sel)
	bound := ds.ChunkSize(c)
	if bound != int64(len(buf)) {
		return fault{}, 0, fmt.Errorf("chunk %s of dataset %s: a buffer of %d bytes for a resident size of %d", k.Object, k.Dataset, len(buf), bound)
	}
	// A chunk that just learnt it needs more room (below) decodes the
	// bytes its first load read, not the store's again.
	src := ip.takeRead(c)
	obj, etag := ds.ObjectOf(c)
	wo := format.WriterOptions{ModTime: ds.Index.InPlace().Created, Buffers: pools}
	st, streams := ip.Decoder.(format.Streamer)
	ro, opens := ip.Data.(rangeOpener)
	read := 0 // reads whose bytes failed their checksums
	if src == nil && streams && opens && !long {
		// Decoded as its bytes arrive: what it reads straight into the
		// resident form, it reads once. A chunk with nothing to stream is
		// read below, as any other decoder's.
		n := format.Concat(ranges)
		src = pools.Get(n)[:n]
		check := stored.NewSpanChecker(ds.Index, c, obj)
		err := st.DecodeStream(c, ip.sel, func(r format.Range) (io.ReadCloser, error) {
			rc, err := ro.OpenRange(ctx, obj, etag, r.Off, r.Len)
			if err != nil {
				return nil, err
			}
			return check.Wrap(r, rc)
		}, src, buf, wo)
		pools.Put(src)
		src = nil
		cerr := check.Err()
		switch {
		case errors.Is(cerr, stored.ErrChecksum):
			// Bytes that differ from their checksums: that was the first
			// read; read whole below, again, and checked there.
			if rereads == 0 {
				return fault{}, 0, damagedSpans(ds, c, k, 1, cerr)
			}
			read, rereads = 1, rereads-1
		case cerr != nil && err == nil:
			return fault{}, 0, fmt.Errorf("chunk %s of dataset %s decoded from bytes not all checked: %w", k.Object, k.Dataset, cerr)
		case !errors.Is(err, format.ErrNotStreamed):
			f, err := decoded(ds, c, k, bound, err, nil, buf)
			return f, 0, err
		}
	}
	if src == nil {
		var err error
		if src, read, wo.Damaged, err = readChecked(ctx, ds, c, k, ranges, pools, read, rereads); err != nil {
			return fault{}, read, err
		}
	}
	var err error
	if long {
		err = ip.Decoder.(format.TextBound).DecodeUnread(c, ip.sel, src, buf, texts, wo)
	} else {
		err = ip.Decoder.Decode(c, ip.sel, src, buf, wo)
	}
	var ge *format.GrowError
	if err == nil || !errors.As(err, &ge) || len(wo.Damaged) > 0 {
		// Bytes with damage confined to some samples are not kept for a
		// decode into more room: that one reads and checks them again.
		pools.Put(src)
		src = nil
	}
	f, err := decoded(ds, c, k, bound, err, src, buf)
	if long && err == nil && f.kind == intact {
		// Its bound counted the texts left unread: every later request
		// asks for what it holds.
		if t, terr := format.ReadTable(buf); terr == nil {
			ds.fit(c, t.Need())
		}
	}
	return f, read, err
}

// decoded is the outcome of decoding chunk c of ds into buf: src, when
// not nil, is what the decode read, kept for the decode again into the
// room a GrowError asks for (a streamed decode's is not whole: the chunk
// is read again). A decode that reports no error must have written a
// whole resident form of the chunk's samples — its table checked, one
// entry a sample the index counts — or the chunk is undecodable: a
// decoder's slip is never a chunk served without its samples.
func decoded(ds *Dataset, c int, k chunkcache.Key, bound int64, err error, src, buf []byte) (fault, error) {
	var ge *format.GrowError
	switch {
	case err == nil:
		t, err := format.ReadTable(buf)
		if err != nil {
			return fault{kind: undecodable, decode: "its decoder wrote no whole resident form: " + err.Error()}, nil
		}
		if _, n := ds.Index.ChunkRange(c); t.Len() != n {
			return fault{kind: undecodable, decode: fmt.Sprintf("its decoder wrote %d samples, the index counts %d", t.Len(), n)}, nil
		}
		return fault{kind: intact}, nil
	case errors.As(err, &ge):
		// Its metadata could not bound it: it is the size it needs from
		// now on, and the request that asked for it asks again.
		ds.grow(c, ge.Need)
		if src != nil {
			ds.InPlace.keepRead(c, src)
		}
		return fault{}, &chunkcache.GrowError{Need: ge.Need,
			Err: fmt.Errorf("%w: chunk %s of dataset %s needs %d bytes, its bound is %d", ErrGrown, k.Object, k.Dataset, ge.Need, bound)}
	case errors.Is(err, format.ErrDamaged):
		return fault{kind: undecodable, decode: err.Error()}, nil
	}
	return fault{}, fmt.Errorf("decoding chunk %s of dataset %s: %w", k.Object, k.Dataset, err)
}

// readChecked reads the ranges of chunk c of ds, a dataset served in
// place, into a buffer of pools, pinned to the version indexed, and
// checks them against an index's checksums (stored.CheckSpans). Bytes
// that differ are read again, up to rereads more times (the loader's
// setting, --checksum-rereads, as for a tar chunk: a byte flipped in
// transit does not survive a second read), and on every read a
// *DamagedChunkError wrapping ErrCorrupt, which names them: the file
// changed or was damaged since it was indexed, and the chunk is marked
// damaged, as a tar chunk failing its CRC32C is (skip mode leaves its
// samples out, named). failed is how many reads already failed them (a
// streamed decode's), counted in the error's; it returns how many failed
// in all, those included, for the loader to count as re-reads.
//
// A chunk whose format confines damage (format.Confiner: a video's
// GOPs) is not damaged as a whole: its bytes as last read are returned
// with the spans that failed on that read, the last of every read
// failing, for the decoder to write the samples they touch as damaged
// (format.WriterOptions.Damaged) and the rest as usual.
func readChecked(ctx context.Context, ds *Dataset, c int, k chunkcache.Key, ranges []format.Range, pools format.Buffers, failed, rereads int) ([]byte, int, []format.Damage, error) {
	ip := ds.InPlace
	obj, etag := ds.ObjectOf(c)
	n := format.Concat(ranges)
	for read := 0; ; read++ {
		src := pools.Get(n)[:n]
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(rangeReads)
		at := int64(0)
		for _, r := range ranges {
			p := src[at : at+r.Len]
			at += r.Len
			g.Go(func() error { return ip.Data.ReadRange(gctx, obj, etag, r.Off, p) })
		}
		err := g.Wait()
		if err == nil {
			err = stored.CheckSpans(ds.Index, c, obj, ranges, src)
		}
		if err == nil {
			return src, failed + read, nil, nil
		}
		if cf, ok := ip.Decoder.(format.Confiner); ok && errors.Is(err, stored.ErrChecksum) && read >= rereads && cf.Confines(c) {
			damaged, derr := stored.DamagedSpans(ds.Index, c, obj, ranges, src)
			if derr == nil && len(damaged) > 0 {
				return src, failed + read + 1, damaged, nil
			}
		}
		pools.Put(src)
		if !errors.Is(err, stored.ErrChecksum) {
			return nil, failed + read, nil, err
		}
		if read >= rereads {
			return nil, failed + read + 1, nil, damagedSpans(ds, c, k, failed+read+1, err)
		}
	}
}

// damagedSpans marks chunk c of ds damaged, its bytes having failed the
// index's checksums with err on every one of reads reads.
func damagedSpans(ds *Dataset, c int, k chunkcache.Key, reads int, err error) error {
	ds.damaged[c].Store(true)
	return &DamagedChunkError{Key: k, Reads: reads, InPlace: true,
		Err:   fmt.Errorf("%w: chunk %s of dataset %s: %w", ErrCorrupt, k.Object, k.Dataset, err),
		Cause: "it fails the index's checksums: " + err.Error()}
}

// rangeOpener is a store that reads a range as a stream
// (s3backend.S3.OpenRange).
type rangeOpener interface {
	OpenRange(ctx context.Context, key, etag string, off, n int64) (io.ReadCloser, error)
}

// rangeReads bounds the range reads of one decoded chunk in flight: its
// fields' column chunks, when they are not contiguous.
const rangeReads = 4

// checksumError describes a sample that failed its CRC32C.
func checksumError(bad fault, object, dataset string) error {
	return fmt.Errorf("%w: sample %q in chunk %s of dataset %s has CRC32C %08x, the index says %08x",
		ErrCorrupt, bad.key, object, dataset, bad.got, bad.want)
}

// _ checks that Loader is a chunkcache.Spiller and a TieredLoader.
var (
	_ chunkcache.Spiller      = Loader{}
	_ chunkcache.TieredLoader = Loader{}
)
