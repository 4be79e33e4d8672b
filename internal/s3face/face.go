package s3face

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5/middleware"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/respond"
	"github.com/brandgw/brand/internal/cache/chunkcache"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/s3face/s3auth"
	"github.com/brandgw/brand/internal/s3face/s3proto"
	"github.com/brandgw/brand/internal/server/httperr"
	"github.com/brandgw/brand/internal/server/reqbody"
	"github.com/brandgw/brand/internal/server/scope"
	"github.com/brandgw/brand/s3backend"
)

// Config configures the S3 face.
type Config struct {
	// Credentials are the key pairs requests are signed with (AWS
	// Signature Version 4, or 2); the face has no anonymous access.
	Credentials *s3auth.Credentials
	// Region, if set, is the only region a request may be signed for; by
	// default any region is accepted (clients sign for what they are
	// configured with, us-east-1 when nothing is).
	Region string
	// ReadAhead is how many chunks ahead of a dataset's chunks being read
	// through in order (a chunk, then the next), and how many blocks
	// ahead of a read-through object's block being written, are loaded
	// before they are asked for; default DefaultReadAhead, negative: none.
	ReadAhead int

	// Buckets are read-through buckets: objects of a store served, and
	// cached, through the gateway. Their names must differ from the
	// datasets'.
	Buckets []Bucket
	// WholeObject is the largest read-through object cached as one entry
	// (default DefaultWholeObject); larger ones are cached in aligned
	// blocks of Block bytes (default DefaultBlock). Both are capped at an
	// eighth of the cache.
	WholeObject, Block int64
}

// Defaults of Config.
const (
	DefaultReadAhead   = 2
	DefaultWholeObject = 64 << 20
	DefaultBlock       = 8 << 20
)

// Check validates c against the datasets' names.
func (c Config) Check(datasets []string) error {
	if c.Credentials == nil {
		if len(c.Buckets) > 0 {
			return errors.New("S3 face buckets without S3 credentials")
		}
		return nil
	}
	if c.WholeObject < 0 || c.Block < 0 {
		return errors.New("negative S3 face object sizes")
	}
	seen := map[string]bool{}
	for _, b := range c.Buckets {
		if err := b.check(datasets, seen); err != nil {
			return err
		}
		seen[b.Name] = true
	}
	return nil
}

// Versions is the datasets the face serves as buckets.
type Versions interface {
	// Names lists the datasets configured, loaded or not.
	Names() []string
	// Version is the version of dataset name a request reads now: on a
	// cluster, the one the nodes agree on.
	Version(name string) (*catalog.Dataset, error)
}

// Reader reads what a GET answers with: a dataset file's sample, or a
// read-through object's blocks (reader.Reader).
type Reader interface {
	Read(ctx context.Context, req reader.Request) (*reader.Result, error)
	ReadEntries(ctx context.Context, reqs []chunkcache.Request) (*reader.Result, error)
}

// Writer writes a response that carries object bytes under write
// deadlines (respond.Writer).
type Writer interface {
	Write(w http.ResponseWriter, r *http.Request, contentType string, p respond.Payload) (int64, error)
}

// Preloader loads cache entries ahead of need, bounded and tracked, never
// waited for (preload.Set).
type Preloader interface {
	Load(r chunkcache.Request, done func(chunkcache.PrefetchResult)) bool
}

// Cluster says whether this node reads a dataset's chunk from the store
// itself (route.Router; route.Solo on a single gateway, which reads all).
type Cluster interface {
	Local(ds *catalog.Dataset, c int) bool
}

// Readiness reports why the server cannot serve now, or nil.
type Readiness interface {
	NotReady() error
}

// ReadinessFunc adapts a function to Readiness.
type ReadinessFunc func() error

// NotReady calls f.
func (f ReadinessFunc) NotReady() error { return f() }

// Deps are what the face is built on (its dependencies), each given once
// by the gateway.
type Deps struct {
	Versions Versions
	Reader   Reader
	Writer   Writer
	Preload  Preloader
	Cluster  Cluster
	Ready    Readiness // nil: always ready
	// Objects are the read-through buckets, whose loader the cache was
	// built with (NewReadThrough).
	Objects *ReadThrough
	// FetchTimeout bounds the read of a dataset's member table, which
	// outlives the request that starts it.
	FetchTimeout time.Duration
	// BodyTimeout bounds the reading of a request body that comes without
	// a length: the face takes none, and it must end at once.
	BodyTimeout time.Duration
	// Started is the read-through buckets' creation date in listings.
	Started  time.Time
	Registry prometheus.Registerer
	Log      zerolog.Logger
}

// Face serves the S3 protocol on the datasets and the read-through
// buckets. Safe for concurrent use.
type Face struct {
	verify   *s3auth.Verifier
	creds    *s3auth.Credentials
	versions Versions
	reader   Reader
	writer   Writer
	preload  Preloader
	cluster  Cluster
	ready    Readiness
	through  *ReadThrough
	timeout  time.Duration
	body     reqbody.Bound // no body, read within the body timeout
	started  time.Time
	log      zerolog.Logger

	datasets  datasetBuckets
	readAhead int // chunks or blocks; 0: none

	requests *prometheus.CounterVec
	bytes    prometheus.Counter
}

// New returns the face.
func New(cfg Config, p Deps) *Face {
	f := &Face{versions: p.Versions, reader: p.Reader, writer: p.Writer, preload: p.Preload, cluster: p.Cluster, ready: p.Ready,
		through: p.Objects, timeout: p.FetchTimeout, body: reqbody.Bound{Timeout: p.BodyTimeout}, started: p.Started, log: p.Log,
		verify:    s3auth.NewVerifier(cfg.Credentials, s3auth.Options{Region: cfg.Region}),
		creds:     cfg.Credentials,
		datasets:  datasetBuckets{versions: map[string]*datasetVersion{}, last: map[string]lastChunk{}},
		readAhead: cfg.ReadAhead,
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "brand_s3_requests_total",
			Help: "Requests to the S3 face by operation and S3 result code (OK for success)."}, []string{"op", "code"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "brand_s3_served_bytes_total",
			Help: "Object bytes the S3 face wrote to clients."}),
	}
	switch {
	case f.readAhead == 0:
		f.readAhead = DefaultReadAhead
	case f.readAhead < 0:
		f.readAhead = 0
	}
	if f.ready == nil {
		f.ready = ReadinessFunc(func() error { return nil })
	}
	if f.through == nil {
		f.through = NewReadThrough(Config{}, 1, p.FetchTimeout)
	}
	p.Registry.MustRegister(f.requests, f.bytes)
	return f
}

// Open opens the read-through buckets' stores with the gateway's backend
// configuration (at Load).
func (f *Face) Open(ctx context.Context, bcfg s3backend.Config) error {
	return f.through.Open(ctx, bcfg)
}

// ServeHTTP answers one S3 request.
func (f *Face) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	w.Header().Set("x-amz-request-id", middleware.GetReqID(ctx))
	w.Header().Set("Server", "Brand")
	op := s3proto.ParseOp(r)
	httperr.NoteRoute(ctx, "s3:"+op.Name)
	// A write is refused whoever asks, before its signature (a chunked
	// upload's is not even checked) or its body is read, and so is a
	// request that is not signed; their connections are closed.
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		reqbody.Refuse(w, r)
		f.fail(w, r, op, s3proto.ErrorOf(s3proto.AccessDenied, "Brand's S3 face is read-only: "+r.Method+" is refused"))
		return
	}
	id, err := f.verify.Verify(r)
	if err != nil {
		reqbody.Refuse(w, r)
		f.fail(w, r, op, err)
		return
	}
	// A key reads the buckets its scope covers (s3auth.ParseCredentials):
	// another is AccessDenied, whether it exists or not, and ListBuckets
	// lists those alone.
	grant := f.creds.Grant(id)
	if op.Bucket != "" && !grant.Dataset(op.Bucket) {
		reqbody.Refuse(w, r)
		f.fail(w, r, op, s3proto.ErrorOf(s3proto.AccessDenied, grant.Allow(scope.Read, []string{op.Bucket}, "").Error()))
		return
	}
	r = r.WithContext(context.WithValue(ctx, grantKey{}, grant))
	// A read takes no body: one declared is refused unread (and, with no
	// memory in the bound, nothing is reserved to release).
	if _, err := reqbody.Apply(w, r, f.body); err != nil {
		f.fail(w, r, op, err)
		return
	}
	if err := f.serve(w, r, op); err != nil {
		f.fail(w, r, op, err)
		return
	}
	f.requests.WithLabelValues(op.Name, "OK").Inc()
}

// serve answers a verified read.
func (f *Face) serve(w http.ResponseWriter, r *http.Request, op s3proto.Op) error {
	if len(op.Key) > maxKey {
		return s3proto.ErrorOf(keyTooLong, "Your key is too long: at most "+strconv.Itoa(maxKey)+" bytes")
	}
	if err := f.ready.NotReady(); err != nil {
		return err
	}
	if b := f.through.bucket(op.Bucket); b != nil {
		return f.serveThrough(w, r, op, b)
	}
	return f.serveDataset(w, r, op)
}

// fail answers err as S3 does: an XML error body (none for HEAD) with the
// S3 code and status of err, found in one place (s3Error).
func (f *Face) fail(w http.ResponseWriter, r *http.Request, op s3proto.Op, err error) {
	ctx := r.Context()
	e := s3Error(ctx, err, op)
	f.requests.WithLabelValues(op.Name, e.Code).Inc()
	if e.Status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int(httperr.RetryAfter/time.Second)))
	}
	e.Resource = r.URL.Path
	if len(e.Resource) > maxKey+256 {
		e.Resource = e.Resource[:maxKey+256] + "…" // S3 echoes it; a huge key need not come back whole
	}
	e.RequestID = middleware.GetReqID(ctx)
	if r.Method == http.MethodHead {
		w.WriteHeader(e.Status)
		return
	}
	s3proto.WriteXML(w, e.Status, e)
}

// s3Error maps an error to S3's code and status: errors of the S3 pieces
// carry their own; every other is mapped by the status httperr gives it,
// with the message a client may see.
func s3Error(ctx context.Context, err error, op s3proto.Op) *s3proto.Error {
	var pe *s3proto.Error
	if errors.As(err, &pe) {
		e := *pe
		return &e
	}
	if code, status, msg, ok := s3auth.Describe(err); ok {
		return &s3proto.Error{Code: code, Status: status, Message: msg}
	}
	status := httperr.Status(err)
	msg := httperr.Message(err.Error())
	if public := httperr.Public(status, err); public != "" {
		httperr.NoteError(ctx, err)
		msg = public
	}
	switch {
	case errors.Is(err, catalog.ErrNotReady):
		return &s3proto.Error{Code: "ServiceUnavailable", Status: http.StatusServiceUnavailable, Message: msg}
	case status == http.StatusServiceUnavailable, status == http.StatusTooManyRequests:
		return &s3proto.Error{Code: "SlowDown", Status: http.StatusServiceUnavailable, Message: msg}
	case status == http.StatusNotFound && op.Key != "":
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

// grantKey is the context key of the grant of the key a request was
// signed with.
type grantKey struct{}

// listBuckets answers ListBuckets: the datasets and the read-through
// buckets the request's key may read.
func (f *Face) listBuckets(w http.ResponseWriter, r *http.Request) {
	grant, _ := r.Context().Value(grantKey{}).(scope.Grant)
	res := s3proto.ListAllMyBucketsResult{Owner: s3proto.Owner{ID: "brand", DisplayName: "brand"}}
	for _, name := range f.versions.Names() {
		created := time.Time{}
		if ds, err := f.versions.Version(name); err == nil {
			created = ds.LoadedAt
		}
		res.Buckets = append(res.Buckets, s3proto.Bucket{Name: name, CreationDate: created})
	}
	for _, name := range f.through.names() {
		res.Buckets = append(res.Buckets, s3proto.Bucket{Name: name, CreationDate: f.started})
	}
	res.Buckets = slices.DeleteFunc(res.Buckets, func(b s3proto.Bucket) bool { return !grant.Dataset(b.Name) })
	slices.SortFunc(res.Buckets, func(a, b s3proto.Bucket) int { return strings.Compare(a.Name, b.Name) })
	s3proto.WriteXML(w, http.StatusOK, res)
}
