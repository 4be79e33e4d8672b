package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/brandgw/brand/chunkcache"
	"github.com/brandgw/brand/internal/catalog"
	"github.com/brandgw/brand/internal/s3proto"
	"github.com/brandgw/brand/s3backend"
)

// S3Bucket is a bucket of the S3 face read through to a store: its
// objects are the objects under URL (s3://bucket/prefix, file:///dir or
// a directory), served from the chunk cache after the first read.
type S3Bucket struct {
	Name string
	URL  string
	// Store, if set, is used instead of opening URL (tests).
	Store s3backend.Store
}

// check validates the S3 face's configuration against the datasets'
// names.
func (c S3Config) check(datasets []string) error {
	if c.Credentials == nil {
		if len(c.Buckets) > 0 {
			return errors.New("gateway: S3 face buckets without S3 credentials")
		}
		return nil
	}
	if c.WholeObject < 0 || c.Block < 0 {
		return fmt.Errorf("gateway: negative S3 face object sizes (%d, %d)", c.WholeObject, c.Block)
	}
	seen := map[string]bool{}
	for _, b := range c.Buckets {
		switch {
		case b.Name == "" || strings.ContainsAny(b.Name, "/\x00"):
			return fmt.Errorf("gateway: S3 face bucket name %q: want a non-empty name without '/'", b.Name)
		case slices.Contains(datasets, b.Name):
			return fmt.Errorf("gateway: S3 face bucket %q has the name of a dataset", b.Name)
		case seen[b.Name]:
			return fmt.Errorf("gateway: S3 face bucket %q given twice", b.Name)
		case b.URL == "" && b.Store == nil:
			return fmt.Errorf("gateway: S3 face bucket %q has neither URL nor Store", b.Name)
		}
		seen[b.Name] = true
	}
	return nil
}

// Defaults of the read-through view (S3Config).
const (
	// DefaultS3WholeObject is S3Config.WholeObject when zero: objects up
	// to this size are cached whole, as one entry.
	DefaultS3WholeObject = 64 << 20
	// DefaultS3Block is S3Config.Block when zero: larger objects are
	// cached in aligned blocks of this size.
	DefaultS3Block = 8 << 20
	// throughListTTL is how long a read-through bucket's listing of one
	// prefix is reused: a client paging through a listing asks for the
	// same prefix page after page, and each store listing is recursive.
	throughListTTL = 5 * time.Second
)

// throughPrefix starts the cache key's dataset field of a read-through
// object; no dataset name holds a NUL, so the two never collide.
const throughPrefix = "s3\x00"

// through is the S3 face's read-through buckets: objects of a store
// proxied and cached in the same cache as chunks, whole up to wholeMax
// and in aligned blocks of block bytes beyond. Every GET and HEAD asks the
// store for the object's current ETag first and reads the cache under
// that ETag, so a changed object is read again, never served stale.
type through struct {
	wholeMax, block int64

	mu      sync.RWMutex
	buckets map[string]*throughBucket // by name; stores opened at Load
}

type throughBucket struct {
	S3Bucket
	store s3backend.Store

	mu    sync.Mutex
	lists map[string]throughList // by prefix
}

type throughList struct {
	at      time.Time
	objects []s3backend.ObjectInfo
}

func newThrough(cfg S3Config, capacity int64) *through {
	t := &through{wholeMax: cfg.WholeObject, block: cfg.Block, buckets: map[string]*throughBucket{}}
	if t.wholeMax == 0 {
		t.wholeMax = DefaultS3WholeObject
	}
	if t.block == 0 {
		t.block = DefaultS3Block
	}
	// A cache entry must leave room for others: at most an eighth of the
	// cache each.
	t.wholeMax = min(t.wholeMax, capacity/8)
	t.block = max(min(t.block, capacity/8), 1)
	for _, b := range cfg.Buckets {
		t.buckets[b.Name] = &throughBucket{S3Bucket: b, lists: map[string]throughList{}}
	}
	return t
}

// open opens the buckets' stores (at Load, with the gateway's backend
// configuration and metrics).
func (t *through) open(ctx context.Context, bcfg s3backend.Config) error {
	if t == nil {
		return nil
	}
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
		b.store = st
	}
	return nil
}

// bucket is the read-through bucket name, or nil.
func (t *through) bucket(name string) *throughBucket {
	if t == nil {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	b := t.buckets[name]
	if b == nil || b.store == nil {
		return nil
	}
	return b
}

// names lists the read-through buckets.
func (t *through) names() []string {
	if t == nil {
		return nil
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]string, 0, len(t.buckets))
	for n := range t.buckets {
		out = append(out, n)
	}
	return out
}

// entries are the cache requests covering [start, start+n) of an object
// of size bytes with the given ETag.
func (t *through) entries(bucket, key, etag string, size, start, n int64) []chunkcache.Request {
	ds := throughPrefix + bucket
	if size <= t.wholeMax {
		return []chunkcache.Request{{Key: chunkcache.Key{Dataset: ds, Object: key + "\x00" + "0", ETag: etag}, Size: size}}
	}
	var out []chunkcache.Request
	for off := start / t.block * t.block; off < start+n; off += t.block {
		out = append(out, chunkcache.Request{Key: chunkcache.Key{Dataset: ds, Object: key + "\x00" + strconv.FormatInt(off, 10), ETag: etag},
			Size: min(t.block, size-off)})
	}
	return out
}

// load fills buf with the part of a read-through object k names, pinned
// to k's ETag; ok is false if k is not a read-through key.
func (t *through) load(ctx context.Context, k chunkcache.Key, buf []byte) (ok bool, err error) {
	name, isThrough := strings.CutPrefix(k.Dataset, throughPrefix)
	if !isThrough {
		return false, nil
	}
	b := t.bucket(name)
	if b == nil {
		return true, fmt.Errorf("%w: no S3 face bucket %q", catalog.ErrUnknown, name)
	}
	i := strings.LastIndexByte(k.Object, 0)
	off, perr := strconv.ParseInt(k.Object[i+1:], 10, 64)
	if i < 0 || perr != nil {
		return true, fmt.Errorf("S3 face: malformed cache key %q", k.Object)
	}
	return true, b.store.ReadRange(ctx, k.Object[:i], k.ETag, off, buf)
}

// throughLoader is the cache's loader when the S3 face has read-through
// buckets: their keys are read from their stores, every other key goes to
// the dataset loader. Read-through objects have no index to verify them
// against, so the disk tier (which verifies every read against the index)
// never keeps them.
type throughLoader struct {
	catalog.Loader
	t *through
}

func (l throughLoader) Load(ctx context.Context, k chunkcache.Key, buf []byte) error {
	_, err := l.LoadTiered(ctx, k, buf)
	return err
}

func (l throughLoader) LoadTiered(ctx context.Context, k chunkcache.Key, buf []byte) (bool, error) {
	if ok, err := l.t.load(ctx, k, buf); ok {
		return false, err
	}
	return l.Loader.LoadTiered(ctx, k, buf)
}

func (l throughLoader) Spill(k chunkcache.Key, data []byte, release func()) {
	if strings.HasPrefix(k.Dataset, throughPrefix) {
		release()
		return
	}
	l.Loader.Spill(k, data, release)
}

func (l throughLoader) Wants(k chunkcache.Key) bool {
	return !strings.HasPrefix(k.Dataset, throughPrefix) && l.Loader.Wants(k)
}

// list is the bucket's objects under prefix, sorted by key, reused for
// throughListTTL.
func (b *throughBucket) list(ctx context.Context, prefix string) ([]s3backend.ObjectInfo, error) {
	b.mu.Lock()
	l, ok := b.lists[prefix]
	b.mu.Unlock()
	if ok && time.Since(l.at) < throughListTTL {
		return l.objects, nil
	}
	// The store lists by whole path segments' prefix; a prefix that ends
	// inside a segment is listed from its directory and filtered.
	dir := prefix[:strings.LastIndexByte(prefix, '/')+1]
	all, err := b.store.List(ctx, dir)
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
		if now.Sub(l.at) >= throughListTTL {
			delete(b.lists, p)
		}
	}
	b.lists[prefix] = throughList{at: now, objects: objects}
	return objects, nil
}

// objectList is a listing as s3proto.Names.
type objectList []s3backend.ObjectInfo

func (l objectList) Len() int          { return len(l) }
func (l objectList) Name(i int) string { return l[i].Key }

// listThrough answers ListObjects(V2) of a read-through bucket.
func (f *s3Face) listThrough(w http.ResponseWriter, r *http.Request, op s3Op, b *throughBucket) error {
	p, err := s3proto.ParseListParams(r.URL.Query(), op.name == "ListObjects")
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
	res := s3proto.NewListBucketResult(op.bucket, p, page)
	res.Contents = make([]s3proto.Object, len(page.Contents))
	for i, n := range page.Contents {
		o := objects[n]
		res.Contents[i] = s3proto.Object{Key: o.Key, Size: o.Size, LastModified: o.ModTime, ETag: `"` + o.ETag + `"`}
	}
	s3proto.WriteXML(w, http.StatusOK, res.Encode())
	return nil
}

// objectThrough answers GetObject and HeadObject of a read-through
// bucket: the store is asked for the object's ETag, and its bytes are
// read through the cache under that ETag, block by block, the next blocks
// loading while one is written.
func (f *s3Face) objectThrough(w http.ResponseWriter, r *http.Request, op s3Op, b *throughBucket) error {
	ctx := r.Context()
	info, err := b.store.Stat(ctx, op.key)
	if errors.Is(err, s3backend.ErrNotFound) || errors.Is(err, s3backend.ErrInvalidKey) {
		return s3proto.ErrorOf(s3proto.NoSuchKey, "The specified key does not exist.")
	}
	if err != nil {
		return err
	}
	etag := `"` + info.ETag + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Last-Modified", info.ModTime.UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	switch s3proto.CheckPreconditions(r.Header, etag, info.ModTime, r.Method) {
	case s3proto.NotModified:
		w.WriteHeader(http.StatusNotModified)
		return nil
	case s3proto.ConditionFailed:
		h.Del("ETag")
		h.Del("Last-Modified")
		return s3proto.ErrorOf(s3proto.PreconditionFailed, "At least one of the pre-conditions you specified did not hold")
	}
	start, n, status := int64(0), info.Size, http.StatusOK
	if rh := r.Header.Get("Range"); rh != "" {
		s, l, out := s3proto.ParseRange(rh, info.Size)
		switch out {
		case s3proto.RangeUnsatisfiable:
			h.Set("Content-Range", "bytes */"+strconv.FormatInt(info.Size, 10))
			return s3proto.ErrorOf(s3proto.InvalidRange, "The requested range is not satisfiable")
		case s3proto.RangeSatisfiable:
			start, n, status = s, l, http.StatusPartialContent
			h.Set("Content-Range", s3proto.ContentRange(s, l, info.Size))
		}
	}
	ext := path.Ext(op.key)
	h.Set("Content-Type", contentType(strings.TrimPrefix(ext, ".")))
	responseOverrides(h, r.URL.Query())
	h.Set("Content-Length", strconv.FormatInt(n, 10))
	if r.Method == http.MethodHead || n == 0 {
		w.WriteHeader(status)
		return nil
	}
	reqs := f.through.entries(op.bucket, op.key, info.ETag, info.Size, start, n)
	// The first block is read before the status is sent, so that a store
	// that fails answers an S3 error rather than a cut body.
	lease, err := f.g.cache.Acquire(ctx, reqs[:1])
	if err != nil {
		return fmt.Errorf("reading %s/%s through: %w", op.bucket, op.key, err)
	}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	pos := start // the object offset the next byte written has
	for i, req := range reqs {
		if i > 0 {
			if lease, err = f.g.cache.Acquire(ctx, []chunkcache.Request{req}); err != nil {
				f.g.log.Warn().Err(err).Str("bucket", op.bucket).Str("key", op.key).Msg("S3 face: read-through cut short")
				panic(http.ErrAbortHandler) // the status is sent: only a cut connection says the body is short
			}
		}
		f.aheadThrough(reqs[i+1:])
		blockOff := int64(0)
		if info.Size > f.through.wholeMax {
			blockOff = pos / f.through.block * f.through.block
		}
		data := lease.Bytes(0)
		from := pos - blockOff
		to := min(int64(len(data)), start+n-blockOff)
		_ = rc.SetWriteDeadline(time.Now().Add(f.g.cfg.WriteTimeout + time.Duration(float64(to-from)/float64(f.g.cfg.MinWriteRate)*float64(time.Second))))
		written, werr := w.Write(data[from:to])
		lease.Release()
		f.bytes.Add(float64(written))
		if werr != nil {
			f.g.log.Debug().Err(werr).Msg("S3 read-through object not completed")
			return nil
		}
		pos += to - from
	}
	_ = rc.SetWriteDeadline(time.Time{})
	return nil
}

// aheadThrough starts loading the next blocks of an object being read,
// bounded by the read-ahead slots (a GET never waits for one).
func (f *s3Face) aheadThrough(next []chunkcache.Request) {
	for _, req := range next[:min(len(next), max(f.ahead.chunks, 0))] {
		f.g.ahead.Load(req, nil)
	}
}
