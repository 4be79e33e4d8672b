package s3face

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/respond"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/internal/s3face/s3proto"
	"github.com/brandgw/brand/s3backend"
)

// Bucket is a bucket of the S3 face read through to a store: its objects
// are the objects under URL (s3://bucket/prefix, file:///dir or a
// directory), served from the chunk cache after the first read. A local
// directory is served through s3backend.Local.Live: nothing outside it,
// no symbolic link, and every write seen.
type Bucket struct {
	Name string
	URL  string
	// Store, if set, is used as it is instead of opening URL (tests).
	Store s3backend.Store
}

func (b Bucket) check(datasets []string, seen map[string]bool) error {
	switch {
	case b.Name == "" || strings.ContainsAny(b.Name, "/\x00"):
		return fmt.Errorf("S3 face bucket name %q: want a non-empty name without '/'", b.Name)
	case slices.Contains(datasets, b.Name):
		return fmt.Errorf("S3 face bucket %q has the name of a dataset", b.Name)
	case seen[b.Name]:
		return fmt.Errorf("S3 face bucket %q given twice", b.Name)
	case b.URL == "" && b.Store == nil:
		return fmt.Errorf("S3 face bucket %q has neither URL nor Store", b.Name)
	}
	return nil
}

// Bounds of the read-through buckets' listings.
const (
	// listTTL is how long a read-through bucket's listing of one prefix
	// is reused: a client paging through a listing asks for the same
	// prefix page after page, and each store listing is recursive.
	listTTL = 5 * time.Second
	// maxLists bounds the prefixes whose listings a bucket keeps.
	maxLists = 64
)

// ReadThrough is the face's read-through buckets: their stores, their
// listings, and the loader of their objects' bytes into the cache —
// whole up to wholeMax, in aligned blocks of block bytes beyond — as
// entries of their own kind (chunkcache.Object), which the cache is built
// with before the face (chunkcache.ByKind). Safe for concurrent use.
type ReadThrough struct {
	wholeMax, block int64
	timeout         time.Duration // one block's load, retries included
	// serial tells apart the GETs of an object whose version is not
	// settled (s3backend.Unsettled): none shares another's cached bytes.
	serial atomic.Uint64

	mu      sync.RWMutex
	buckets map[string]*throughBucket // by name; stores opened by open
}

type throughBucket struct {
	Bucket
	store s3backend.Store

	mu    sync.Mutex
	lists map[string]throughList // by prefix
}

type throughList struct {
	at      time.Time
	objects []s3backend.ObjectInfo
}

// NewReadThrough returns cfg's read-through buckets for a cache of
// capacity bytes, each block's load bounded by fetchTimeout.
func NewReadThrough(cfg Config, capacity int64, fetchTimeout time.Duration) *ReadThrough {
	t := &ReadThrough{wholeMax: cfg.WholeObject, block: cfg.Block, timeout: fetchTimeout, buckets: map[string]*throughBucket{}}
	if t.wholeMax == 0 {
		t.wholeMax = DefaultWholeObject
	}
	if t.block == 0 {
		t.block = DefaultBlock
	}
	// A cache entry must leave room for others: at most an eighth of the
	// cache each.
	t.wholeMax = min(t.wholeMax, capacity/8)
	t.block = max(min(t.block, capacity/8), 1)
	for _, b := range cfg.Buckets {
		t.buckets[b.Name] = &throughBucket{Bucket: b, lists: map[string]throughList{}}
	}
	return t
}

// Open opens the buckets' stores, a local directory as a Live view, with
// the gateway's backend configuration (at Load). Without buckets it does
// nothing.
func (t *ReadThrough) Open(ctx context.Context, bcfg s3backend.Config) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range t.buckets {
		if b.store != nil {
			continue
		}
		if b.Store != nil {
			b.store = b.Store
			continue
		}
		st, err := s3backend.Open(ctx, b.URL, bcfg)
		if err != nil {
			return fmt.Errorf("S3 face bucket %s (%s): %w", b.Name, b.URL, err)
		}
		if l, ok := st.(*s3backend.Local); ok {
			st = l.Live(s3backend.DefaultSettle)
		}
		b.store = st
	}
	return nil
}

// bucket is the read-through bucket name, or nil.
func (t *ReadThrough) bucket(name string) *throughBucket {
	t.mu.RLock()
	defer t.mu.RUnlock()
	b := t.buckets[name]
	if b == nil || b.store == nil {
		return nil
	}
	return b
}

// names lists the read-through buckets.
func (t *ReadThrough) names() []string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]string, 0, len(t.buckets))
	for n := range t.buckets {
		out = append(out, n)
	}
	return out
}

// versionSep ends a cache key's version where a serial follows it
// (ReadThrough.serial); no store's ETag holds a NUL.
const versionSep = "\x00"

// entries are the cache requests covering [start, start+n) of bucket's
// object key of size bytes at version, the store's ETag. An unsettled
// version's entries are this GET's alone (s3backend.ObjectInfo.Unsettled).
func (t *ReadThrough) entries(bucket, key, version string, unsettled bool, size, start, n int64) []chunkcache.Request {
	if unsettled {
		version += versionSep + strconv.FormatUint(t.serial.Add(1), 36)
	}
	k := chunkcache.Key{Space: chunkcache.Object, Dataset: bucket, Object: key, ETag: version}
	if size <= t.wholeMax {
		return []chunkcache.Request{{Key: k, Size: size}}
	}
	var out []chunkcache.Request
	for off := start / t.block * t.block; off < start+n; off += t.block {
		k.Offset = off
		out = append(out, chunkcache.Request{Key: k, Size: min(t.block, size-off)})
	}
	return out
}

// Load implements chunkcache.Loader for the Object entries: it fills buf
// with the bytes at k's offset of k's object, pinned to k's version,
// within the fetch timeout.
func (t *ReadThrough) Load(ctx context.Context, k chunkcache.Key, buf []byte) error {
	if k.Space != chunkcache.Object {
		return fmt.Errorf("S3 face: %s is not a read-through entry", k)
	}
	b := t.bucket(k.Dataset)
	if b == nil {
		return fmt.Errorf("%w: no S3 face bucket %s", catalog.ErrUnknown, quote.Input(k.Dataset))
	}
	if t.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, t.timeout)
		defer cancel()
	}
	version, _, _ := strings.Cut(k.ETag, versionSep)
	return b.store.ReadRange(ctx, k.Object, version, k.Offset, buf)
}

// list is the bucket's objects under prefix, sorted by key, reused for
// listTTL. A prefix no key of the store can have (the store refuses it:
// "/", "../") lists nothing, as S3 lists nothing under a prefix no key
// has.
func (b *throughBucket) list(ctx context.Context, prefix string) ([]s3backend.ObjectInfo, error) {
	b.mu.Lock()
	l, ok := b.lists[prefix]
	b.mu.Unlock()
	if ok && time.Since(l.at) < listTTL {
		return l.objects, nil
	}
	// The store lists by whole path segments' prefix; a prefix that ends
	// inside a segment is listed from its directory and filtered.
	dir := prefix[:strings.LastIndexByte(prefix, '/')+1]
	all, err := b.store.List(ctx, dir)
	if errors.Is(err, s3backend.ErrInvalidKey) {
		all, err = nil, nil
	}
	if err != nil {
		return nil, err
	}
	objects := all[:0:0]
	for _, o := range all {
		if strings.HasPrefix(o.Key, prefix) {
			objects = append(objects, o)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	for p, l := range b.lists {
		if now.Sub(l.at) >= listTTL {
			delete(b.lists, p)
		}
	}
	if len(b.lists) >= maxLists {
		oldest := ""
		for p, l := range b.lists {
			if oldest == "" || l.at.Before(b.lists[oldest].at) {
				oldest = p
			}
		}
		delete(b.lists, oldest)
	}
	b.lists[prefix] = throughList{at: now, objects: objects}
	return objects, nil
}

// objectList is a listing as s3proto.Names.
type objectList []s3backend.ObjectInfo

func (l objectList) Len() int          { return len(l) }
func (l objectList) Name(i int) string { return l[i].Key }

// serveThrough answers an operation on a read-through bucket.
func (f *Face) serveThrough(w http.ResponseWriter, r *http.Request, o s3proto.Op, b *throughBucket) error {
	switch o.Name {
	case "HeadBucket":
		w.WriteHeader(http.StatusOK)
		return nil
	case "GetBucketLocation":
		s3proto.WriteXML(w, http.StatusOK, s3proto.LocationConstraint{})
		return nil
	case "ListObjectsV2", "ListObjects":
		return f.listThrough(w, r, o, b)
	case "GetObject", "HeadObject":
		return f.objectThrough(w, r, o, b)
	}
	return notImplemented(o)
}

// listThrough answers ListObjects(V2) of a read-through bucket.
func (f *Face) listThrough(w http.ResponseWriter, r *http.Request, o s3proto.Op, b *throughBucket) error {
	p, err := s3proto.ParseListParams(r.URL.Query(), o.Name == "ListObjects")
	if err != nil {
		return err
	}
	objects, err := b.list(r.Context(), p.Prefix)
	if err != nil {
		return err
	}
	page, err := s3proto.List(objectList(objects), p)
	if err != nil {
		return err
	}
	res := s3proto.NewListBucketResult(o.Bucket, p, page)
	res.Contents = make([]s3proto.Object, len(page.Contents))
	for i, n := range page.Contents {
		obj := objects[n]
		res.Contents[i] = s3proto.Object{Key: obj.Key, Size: obj.Size, LastModified: obj.ModTime, ETag: `"` + obj.ETag + `"`}
	}
	s3proto.WriteXML(w, http.StatusOK, res.Encode())
	return nil
}

// errChangedWhileRead answers a GET whose object changed between its
// version being asked for and its first bytes being read: a retry reads
// the new version.
var errChangedWhileRead = s3proto.ErrorOf(s3proto.SlowDown, "The object changed while it was read; retry")

// objectThrough answers GetObject and HeadObject of a read-through
// bucket: the store is asked for the object's version, and its bytes are
// read through the reader and the cache under that version, block by
// block, the next blocks loading while one is written.
func (f *Face) objectThrough(w http.ResponseWriter, r *http.Request, o s3proto.Op, b *throughBucket) error {
	ctx := r.Context()
	info, err := b.store.Stat(ctx, o.Key)
	if errors.Is(err, s3backend.ErrNotFound) || errors.Is(err, s3backend.ErrInvalidKey) {
		return s3proto.ErrorOf(s3proto.NoSuchKey, "The specified key does not exist.")
	}
	if err != nil {
		return err
	}
	s, done, err := s3proto.Prepare(w, r, s3proto.ObjectMeta{ETag: `"` + info.ETag + `"`, Modified: info.ModTime, Size: info.Size,
		Ext: strings.TrimPrefix(path.Ext(o.Key), ".")})
	if done || err != nil {
		return err
	}
	body := &blocks{f: f, ctx: ctx, reqs: f.through.entries(o.Bucket, o.Key, info.ETag, info.Unsettled, info.Size, s.Start, s.N), start: s.Start, end: s.Start + s.N}
	// The first block is read before the status is sent, so that a store
	// that fails answers an S3 error rather than a cut body.
	if body.first, err = f.reader.ReadEntries(ctx, body.reqs[:1]); err != nil {
		if errors.Is(err, s3backend.ErrChanged) {
			return errChangedWhileRead
		}
		return fmt.Errorf("reading %s/%s through: %w", o.Bucket, o.Key, err)
	}
	defer body.first.Release()
	written, err := f.writer.Write(w, r, w.Header().Get("Content-Type"), respond.Payload{N: s.N, Next: body.next, Relieve: body.relieve, Status: s.Status})
	f.bytes.Add(float64(written))
	if errors.Is(err, respond.ErrShort) {
		f.log.Warn().Err(err).Str("bucket", o.Bucket).Msg("S3 face: read-through cut short")
		panic(http.ErrAbortHandler) // the status is sent: only a cut connection says the body is short
	}
	if err != nil {
		f.log.Debug().Err(err).Msg("S3 read-through object not completed")
	}
	return nil
}

// blocks is a read-through GET's body: its blocks, each read through the
// reader as the one before it is written (respond.Payload.Next), the
// next ones loading ahead meanwhile.
type blocks struct {
	f          *Face
	ctx        context.Context
	reqs       []chunkcache.Request
	start, end int64 // the object's bytes to write
	first      *reader.Result
	i          int            // the next block
	cur        *reader.Result // the block being written
}

// next returns the next block's bytes to write and their release.
func (b *blocks) next() (net.Buffers, func(), error) {
	if b.i == len(b.reqs) {
		return nil, nil, nil
	}
	req := b.reqs[b.i]
	res := b.first
	if b.i > 0 {
		var err error
		if res, err = b.f.reader.ReadEntries(b.ctx, b.reqs[b.i:b.i+1]); err != nil {
			return nil, nil, err
		}
	}
	b.i++
	for _, ahead := range b.reqs[b.i:min(len(b.reqs), b.i+b.f.readAhead)] {
		b.f.preload.Load(ahead, nil)
	}
	b.cur = res
	off := req.Key.Offset
	from, to := max(b.start, off)-off, min(b.end, off+req.Size)-off
	return net.Buffers{res.Parts[0][from:to]}, res.Release, nil
}

// relieve copies what is left of the block being written out of the
// cache (respond.Payload.Relieve); before the first block there is
// nothing to copy.
func (b *blocks) relieve(rest net.Buffers) (net.Buffers, bool) {
	if b.cur == nil {
		return rest, false
	}
	return b.cur.Relieve(rest)
}
