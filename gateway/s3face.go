package gateway

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"mime"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/catalog"
	"github.com/brandgw/brand/internal/order"
	"github.com/brandgw/brand/internal/reader"
	"github.com/brandgw/brand/internal/respond"
	"github.com/brandgw/brand/internal/s3auth"
	"github.com/brandgw/brand/internal/s3proto"
)

// S3Config configures the S3 face (S3Handler): the gateway's datasets as
// read-only buckets for unchanged S3 clients.
type S3Config struct {
	// Credentials are the key pairs requests are signed with (AWS
	// Signature Version 4); without them S3Handler is nil: the face has
	// no anonymous access.
	Credentials *s3auth.Credentials
	// Region, if set, is the only region a request may be signed for; by
	// default any region is accepted (clients sign for what they are
	// configured with, us-east-1 when nothing is).
	Region string
	// ReadAhead is how many chunks ahead of a dataset's chunks being read
	// through in order (a chunk, then the next) are loaded before they are
	// asked for; default 2, negative: none.
	ReadAhead int

	// Buckets are read-through buckets: objects of a store served, and
	// cached, through the gateway (S3Bucket). Their names must differ
	// from the datasets'.
	Buckets []S3Bucket
	// WholeObject is the largest read-through object cached as one entry
	// (default DefaultS3WholeObject); larger ones are cached in aligned
	// blocks of Block bytes (default DefaultS3Block). Both are capped at
	// an eighth of the cache.
	WholeObject, Block int64
}

// DefaultS3ReadAhead is S3Config.ReadAhead when zero.
const DefaultS3ReadAhead = 2

// s3Face serves each loaded dataset as a bucket whose objects are its
// samples' files (docs/http-api.md "S3 face"): listings come from the
// index and the dataset's member table, a GET reads its sample as a batch
// does — through the reader, the cache and its policy, the cluster — and
// answers the file's bytes. Nothing is ever written.
type s3Face struct {
	g       *Gateway
	verify  *s3auth.Verifier
	ahead   readAhead
	through *through // nil without read-through buckets

	mu       sync.Mutex
	versions map[string]*s3Dataset // by dataset name: the version last served

	requests *prometheus.CounterVec
	bytes    prometheus.Counter
}

// s3Dataset is what the face derives from one dataset version, each part
// built once on first use.
type s3Dataset struct {
	ds *catalog.Dataset

	membersOnce sync.Once
	members     *chunkindex.Members
	membersErr  error

	namesOnce sync.Once
	names     *objectNames
	namesErr  error
}

func newS3Face(g *Gateway, cfg S3Config, th *through) *s3Face {
	f := &s3Face{g: g, versions: map[string]*s3Dataset{}, through: th,
		verify: s3auth.NewVerifier(cfg.Credentials, s3auth.Options{Region: cfg.Region}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_s3_requests_total",
			Help: "Requests to the S3 face by operation and S3 result code (OK for success)."}, []string{"op", "code"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_s3_served_bytes_total",
			Help: "Object bytes the S3 face wrote to clients."}),
	}
	f.ahead = readAhead{chunks: cfg.ReadAhead, last: map[string]aheadState{}}
	if f.ahead.chunks == 0 {
		f.ahead.chunks = DefaultS3ReadAhead
	}
	g.registry.MustRegister(f.requests, f.bytes)
	return f
}

// S3Handler is the S3 face, to be served on a listener of its own
// (`brand serve --s3-face-listen`): path-style requests only, signed with
// Signature Version 4 by one of S3Config's credentials. It is nil when the
// gateway was configured without credentials.
func (g *Gateway) S3Handler() http.Handler {
	if g.s3 == nil {
		return nil
	}
	return middleware.RequestID(g.logRequests(middleware.Recoverer(g.s3)))
}

// s3Op is one S3 operation the face answers.
type s3Op struct {
	name, bucket, key string
}

func (f *s3Face) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	w.Header().Set("x-amz-request-id", middleware.GetReqID(ctx))
	w.Header().Set("Server", "Brand")
	op := parseS3Op(r)
	noteRoute(ctx, "s3:"+op.name)
	// A write is refused whoever asks, before its signature (a chunked
	// upload's is not even checked) or its body is read.
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		f.fail(w, r, op, s3proto.ErrorOf(s3proto.AccessDenied, "Brand's S3 face is read-only: "+r.Method+" is refused"))
		return
	}
	if _, err := f.verify.Verify(r); err != nil {
		f.fail(w, r, op, err)
		return
	}
	if err := f.g.notReady(); err != nil {
		f.fail(w, r, op, err)
		return
	}
	var err error
	if b := f.through.bucket(op.bucket); b != nil {
		err = f.serveThrough(w, r, op, b)
	} else {
		err = f.serveDataset(w, r, op)
	}
	if err != nil {
		f.fail(w, r, op, err)
		return
	}
	f.requests.WithLabelValues(op.name, "OK").Inc()
}

// serveThrough answers an operation on a read-through bucket.
func (f *s3Face) serveThrough(w http.ResponseWriter, r *http.Request, op s3Op, b *throughBucket) error {
	switch op.name {
	case "HeadBucket":
		w.WriteHeader(http.StatusOK)
		return nil
	case "GetBucketLocation":
		s3proto.WriteXML(w, http.StatusOK, s3proto.LocationConstraint{})
		return nil
	case "ListObjectsV2", "ListObjects":
		return f.listThrough(w, r, op, b)
	case "GetObject", "HeadObject":
		return f.objectThrough(w, r, op, b)
	}
	return s3proto.ErrorOf(s3proto.NotImplemented, op.name+" is not implemented by Brand's S3 face")
}

// serveDataset answers the operations on the bucket list and on datasets.
func (f *s3Face) serveDataset(w http.ResponseWriter, r *http.Request, op s3Op) error {
	var err error
	switch op.name {
	case "ListBuckets":
		err = f.listBuckets(w, r)
	case "HeadBucket":
		_, err = f.dataset(op.bucket)
		if err == nil {
			w.WriteHeader(http.StatusOK)
		}
	case "GetBucketLocation":
		if _, err = f.dataset(op.bucket); err == nil {
			s3proto.WriteXML(w, http.StatusOK, s3proto.LocationConstraint{})
		}
	case "ListObjectsV2", "ListObjects":
		err = f.listObjects(w, r, op)
	case "GetObject", "HeadObject":
		err = f.object(w, r, op)
	default:
		err = s3proto.ErrorOf(s3proto.NotImplemented, op.name+" is not implemented by Brand's S3 face")
	}
	return err
}

// unsupportedBucketQuery and unsupportedObjectQuery are the sub-resources
// of S3's read API the face does not model; a request for one is answered
// NotImplemented rather than with a listing or an object it did not ask for.
var (
	unsupportedBucketQuery = []string{"acl", "policy", "policyStatus", "cors", "lifecycle", "versioning", "tagging", "uploads",
		"versions", "object-lock", "encryption", "website", "logging", "notification", "replication", "accelerate",
		"requestPayment", "ownershipControls", "publicAccessBlock", "analytics", "metrics", "inventory",
		"intelligent-tiering", "delete", "select"}
	unsupportedObjectQuery = []string{"acl", "tagging", "torrent", "attributes", "retention", "legal-hold", "uploadId",
		"uploads", "select", "restore", "versionId"}
)

// parseS3Op names the operation a path-style request asks for.
func parseS3Op(r *http.Request) s3Op {
	p := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(p, "/")
	q := r.URL.Query()
	has := func(names []string) string {
		for _, n := range names {
			if q.Has(n) {
				return n
			}
		}
		return ""
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		// Named for the log and the metrics (from a fixed set: a method
		// is the client's to choose); every write is refused.
		verb := map[string]string{http.MethodPut: "Put", http.MethodPost: "Post", http.MethodDelete: "Delete",
			http.MethodPatch: "Patch", http.MethodOptions: "Options"}[r.Method]
		if verb == "" {
			verb = "Other"
		}
		switch {
		case key != "":
			return s3Op{name: verb + "Object", bucket: bucket, key: key}
		case bucket != "":
			return s3Op{name: verb + "Bucket", bucket: bucket}
		}
		return s3Op{name: verb}
	}
	switch {
	case bucket == "":
		return s3Op{name: "ListBuckets"}
	case key == "":
		if sub := has(unsupportedBucketQuery); sub != "" {
			return s3Op{name: "Bucket?" + sub, bucket: bucket}
		}
		switch {
		case q.Has("location"):
			return s3Op{name: "GetBucketLocation", bucket: bucket}
		case r.Method == http.MethodHead:
			return s3Op{name: "HeadBucket", bucket: bucket}
		case q.Get("list-type") == "2":
			return s3Op{name: "ListObjectsV2", bucket: bucket}
		}
		return s3Op{name: "ListObjects", bucket: bucket}
	}
	if sub := has(unsupportedObjectQuery); sub != "" {
		return s3Op{name: "Object?" + sub, bucket: bucket, key: key}
	}
	if r.Method == http.MethodHead {
		return s3Op{name: "HeadObject", bucket: bucket, key: key}
	}
	return s3Op{name: "GetObject", bucket: bucket, key: key}
}

// fail answers err as S3 does: an XML error body (none for HEAD) with the
// S3 code and status of err, found in one place (s3Error).
func (f *s3Face) fail(w http.ResponseWriter, r *http.Request, op s3Op, err error) {
	ctx := r.Context()
	e := f.s3Error(ctx, err, op)
	f.requests.WithLabelValues(op.name, e.Code).Inc()
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
	}
	e.Resource = r.URL.Path
	e.RequestID = middleware.GetReqID(ctx)
	if r.Method == http.MethodHead {
		w.WriteHeader(e.Status)
		return
	}
	s3proto.WriteXML(w, e.Status, e)
}

// s3Error maps an error to S3's code and status: errors of the S3 pieces
// carry their own; the gateway's are mapped by the status statusOf gives
// them, with the message a client may see.
func (f *s3Face) s3Error(ctx context.Context, err error, op s3Op) *s3proto.Error {
	var pe *s3proto.Error
	if errors.As(err, &pe) {
		e := *pe
		return &e
	}
	if code, status, msg, ok := s3auth.Describe(err); ok {
		return &s3proto.Error{Code: code, Status: status, Message: msg}
	}
	status := statusOf(err)
	msg := err.Error()
	if public := publicMessage(status, err); public != "" {
		noteError(ctx, err)
		msg = public
	}
	switch {
	case errors.Is(err, catalog.ErrNotReady):
		return &s3proto.Error{Code: "ServiceUnavailable", Status: http.StatusServiceUnavailable, Message: msg}
	case status == http.StatusServiceUnavailable, status == http.StatusTooManyRequests:
		return &s3proto.Error{Code: "SlowDown", Status: http.StatusServiceUnavailable, Message: msg}
	case status == http.StatusNotFound && op.key != "":
		return &s3proto.Error{Code: "NoSuchKey", Status: http.StatusNotFound, Message: msg}
	case status == http.StatusNotFound:
		return &s3proto.Error{Code: "NoSuchBucket", Status: http.StatusNotFound, Message: msg}
	case status == http.StatusNotImplemented:
		return &s3proto.Error{Code: "NotImplemented", Status: http.StatusNotImplemented, Message: msg}
	case status < 500:
		return &s3proto.Error{Code: "InvalidRequest", Status: http.StatusBadRequest, Message: msg}
	}
	return &s3proto.Error{Code: "InternalError", Status: http.StatusInternalServerError, Message: msg}
}

// dataset is the bucket's dataset, the version the cluster agrees on.
func (f *s3Face) dataset(bucket string) (*s3Dataset, error) {
	if !f.g.catalog.Configured(bucket) {
		return nil, s3proto.ErrorOf(s3proto.NoSuchBucket, "The specified bucket does not exist")
	}
	ds, err := f.g.jobs.version(api.Job{Dataset: bucket})
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	d := f.versions[bucket]
	if d == nil || d.ds != ds {
		// A reloaded dataset's names and members are built anew; the old
		// version's go with the last request that holds them.
		d = &s3Dataset{ds: ds}
		f.versions[bucket] = d
	}
	return d, nil
}

// memberTable is the dataset version's member table, read from the store
// once. Its read outlives the request that starts it (others wait for
// it), bounded by the fetch timeout.
func (f *s3Face) memberTable(ctx context.Context, d *s3Dataset) (*chunkindex.Members, error) {
	d.membersOnce.Do(func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), f.g.cfg.FetchTimeout)
		defer cancel()
		d.members, d.membersErr = dataset.ReadMembers(rctx, d.ds.Store, d.ds.Index)
		if errors.Is(d.membersErr, dataset.ErrNoMembers) {
			d.membersErr = s3proto.ErrorOf(s3proto.NotImplemented, fmt.Sprintf(
				"dataset %q has no member table (%s), which its files are listed and found by: "+
					"run `brand index` over its chunks to add one (docs/format.md §5)", d.ds.Name, chunkindex.MembersKey))
		}
		if d.membersErr != nil {
			f.g.log.Warn().Err(d.membersErr).Str("dataset", d.ds.Name).Msg("S3 face: member table unavailable")
		}
	})
	return d.members, d.membersErr
}

// objectNames is the dataset version's objects in listing order, built
// once.
func (f *s3Face) objectNames(ctx context.Context, d *s3Dataset) (*objectNames, error) {
	m, err := f.memberTable(ctx, d)
	if err != nil {
		return nil, err
	}
	d.namesOnce.Do(func() {
		start := time.Now()
		d.names, d.namesErr = buildObjectNames(context.WithoutCancel(ctx), d.ds.Index, m)
		if d.namesErr == nil {
			f.g.log.Info().Str("dataset", d.ds.Name).Int("objects", d.names.Len()).
				Float64("duration_ms", millis(time.Since(start))).Msg("S3 face: object names sorted")
		}
	})
	return d.names, d.namesErr
}

func (f *s3Face) listBuckets(w http.ResponseWriter, r *http.Request) error {
	res := s3proto.ListAllMyBucketsResult{Owner: s3proto.Owner{ID: "brand", DisplayName: "brand"}}
	for _, name := range f.g.catalog.Names() {
		created := time.Time{}
		if ds, err := f.g.catalog.Get(name); err == nil {
			created = ds.LoadedAt
		}
		res.Buckets = append(res.Buckets, s3proto.Bucket{Name: name, CreationDate: created})
	}
	for _, name := range f.through.names() {
		res.Buckets = append(res.Buckets, s3proto.Bucket{Name: name, CreationDate: f.g.started})
	}
	slices.SortFunc(res.Buckets, func(a, b s3proto.Bucket) int { return strings.Compare(a.Name, b.Name) })
	s3proto.WriteXML(w, http.StatusOK, res)
	return nil
}

func (f *s3Face) listObjects(w http.ResponseWriter, r *http.Request, op s3Op) error {
	ctx := r.Context()
	d, err := f.dataset(op.bucket)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	p, err := s3proto.ParseListParams(q, op.name == "ListObjects")
	if err != nil {
		return err
	}
	names, err := f.objectNames(ctx, d)
	if err != nil {
		return err
	}
	page, err := s3proto.List(names, p)
	if err != nil {
		return err
	}
	res := s3proto.NewListBucketResult(op.bucket, p, page)
	res.Contents = make([]s3proto.Object, len(page.Contents))
	ix := d.ds.Index
	for i, n := range page.Contents {
		id, j := names.Entry(n)
		m := names.members.Member(id, j)
		res.Contents[i] = s3proto.Object{Key: names.Name(n), Size: m.Size, LastModified: m.ModTime,
			ETag: memberETag(ix, id, m)}
	}
	s3proto.WriteXML(w, http.StatusOK, res.Encode())
	return nil
}

// memberETag is an object's ETag: a hash of what identifies its bytes —
// its chunk object and that object's ETag, where it lies in the sample and
// its size and CRC32C. It changes when the dataset is re-packed or the
// chunk rewritten, and is not an MD5 (16 hex digits, not 32, so that no
// client takes it for one and checks the body against it).
func memberETag(ix *chunkindex.Index, id int, m chunkindex.MemberInfo) string {
	ch := ix.Chunk(ix.ChunkOf(id))
	h := fnv.New64a()
	var b [28]byte
	binary.LittleEndian.PutUint64(b[0:], uint64(id))
	binary.LittleEndian.PutUint64(b[8:], uint64(m.DataOffset))
	binary.LittleEndian.PutUint64(b[16:], uint64(m.Size))
	binary.LittleEndian.PutUint32(b[24:], m.CRC)
	h.Write([]byte(ch.Key))
	h.Write([]byte{0})
	h.Write([]byte(ch.ETag))
	h.Write([]byte{0})
	h.Write(b[:])
	return fmt.Sprintf(`"%016x"`, h.Sum64())
}

// object answers GetObject and HeadObject.
func (f *s3Face) object(w http.ResponseWriter, r *http.Request, op s3Op) error {
	ctx := r.Context()
	d, err := f.dataset(op.bucket)
	if err != nil {
		return err
	}
	m, err := f.memberTable(ctx, d)
	if err != nil {
		return err
	}
	noSuchKey := s3proto.ErrorOf(s3proto.NoSuchKey, "The specified key does not exist.")
	key, ext := chunkindex.SplitKey(op.key)
	ix := d.ds.Index
	id, ok, err := ix.LookupContext(ctx, key)
	if err != nil {
		return err
	}
	if !ok {
		return noSuchKey
	}
	j, ok := m.Find(id, ext)
	if !ok {
		return noSuchKey
	}
	mi := m.Member(id, j)
	etag := memberETag(ix, id, mi)
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Last-Modified", mi.ModTime.UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	switch s3proto.CheckPreconditions(r.Header, etag, mi.ModTime, r.Method) {
	case s3proto.NotModified:
		w.WriteHeader(http.StatusNotModified)
		return nil
	case s3proto.ConditionFailed:
		h.Del("ETag")
		h.Del("Last-Modified")
		return s3proto.ErrorOf(s3proto.PreconditionFailed, "At least one of the pre-conditions you specified did not hold")
	}
	start, n, status := int64(0), mi.Size, http.StatusOK
	if rh := r.Header.Get("Range"); rh != "" {
		s, l, out := s3proto.ParseRange(rh, mi.Size)
		switch out {
		case s3proto.RangeUnsatisfiable:
			h.Set("Content-Range", "bytes */"+strconv.FormatInt(mi.Size, 10))
			return s3proto.ErrorOf(s3proto.InvalidRange, "The requested range is not satisfiable")
		case s3proto.RangeSatisfiable:
			start, n, status = s, l, http.StatusPartialContent
			h.Set("Content-Range", s3proto.ContentRange(s, l, mi.Size))
		}
	}
	h.Set("Content-Type", contentType(ext))
	if status == http.StatusOK && strings.EqualFold(r.Header.Get("x-amz-checksum-mode"), "ENABLED") {
		var c [4]byte
		binary.BigEndian.PutUint32(c[:], mi.CRC)
		h.Set("x-amz-checksum-crc32c", base64.StdEncoding.EncodeToString(c[:]))
	}
	responseOverrides(h, r.URL.Query())
	if r.Method == http.MethodHead {
		h.Set("Content-Length", strconv.FormatInt(n, 10))
		w.WriteHeader(status)
		return nil
	}
	smp, err := order.NewSamples(ctx, d.ds, []int{id})
	if err != nil {
		return err
	}
	res, err := f.g.reader.Read(ctx, reader.Request{Samples: smp})
	if err == nil && len(res.MissingPos) > 0 {
		res.Release()
		err = fmt.Errorf("%w: object %q is in a chunk damaged at rest", catalog.ErrCorrupt, op.key)
	}
	if err != nil {
		return err
	}
	defer res.Release()
	f.ahead.saw(f.g, d.ds, ix.ChunkOf(id))
	body := sliceBuffers(res.Parts, mi.DataOffset+start, n)
	written, err := f.g.out.Write(w, r, h.Get("Content-Type"), respond.Payload{Parts: body, N: n, Relieve: res.Relieve, Status: status})
	f.bytes.Add(float64(written))
	if err != nil {
		f.g.log.Debug().Err(err).Msg("S3 object not completed")
	}
	return nil
}

// contentType is the media type of a file by its last extension.
func contentType(ext string) string {
	if t := mime.TypeByExtension(path.Ext("x." + ext)); t != "" {
		return t
	}
	return "application/octet-stream"
}

// responseOverrides applies GetObject's response-* parameters, by which a
// presigned URL sets the headers its response carries.
func responseOverrides(h http.Header, q url.Values) {
	for param, header := range map[string]string{"response-content-type": "Content-Type",
		"response-content-disposition": "Content-Disposition", "response-cache-control": "Cache-Control",
		"response-content-encoding": "Content-Encoding", "response-content-language": "Content-Language",
		"response-expires": "Expires"} {
		if v := q.Get(param); v != "" {
			h.Set(header, v)
		}
	}
}

// sliceBuffers is bytes [off, off+n) of bufs, without copying.
func sliceBuffers(bufs [][]byte, off, n int64) [][]byte {
	out := make([][]byte, 0, 1)
	for _, b := range bufs {
		if n == 0 {
			break
		}
		if off >= int64(len(b)) {
			off -= int64(len(b))
			continue
		}
		b = b[off:]
		off = 0
		if int64(len(b)) > n {
			b = b[:n]
		}
		out = append(out, b)
		n -= int64(len(b))
	}
	return out
}

// readAhead loads the next chunks of a dataset whose chunks are being read
// through in order — a per-file reader listing a dataset packed in key
// order reads chunk after chunk — so that the next chunk's files are hits.
// The loads run in the gateway's tracked set of work ahead (package
// ahead); a GET never waits for one.
type readAhead struct {
	chunks int

	mu   sync.Mutex
	last map[string]aheadState // by dataset name
}

type aheadState struct {
	id    string // the dataset version
	chunk int
}

// saw records that a GET read chunk c of ds and, when it follows the
// chunk read before it, starts loading the chunks after it.
func (a *readAhead) saw(g *Gateway, ds *catalog.Dataset, c int) {
	if a.chunks <= 0 {
		return
	}
	a.mu.Lock()
	prev, ok := a.last[ds.Name]
	a.last[ds.Name] = aheadState{id: ds.ID(), chunk: c}
	a.mu.Unlock()
	if !ok || prev.id != ds.ID() || prev.chunk+1 != c {
		return
	}
	for next := c + 1; next <= c+a.chunks && next < ds.Index.NumChunks(); next++ {
		if !g.cluster.Local(ds, next) || g.cache.Contains(ds.ChunkKey(next)) {
			continue
		}
		if !g.ahead.Load(ds.ChunkRequest(next), nil) {
			return
		}
	}
}
