package s3backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
	"golang.org/x/sync/errgroup"
)

// S3 is a Store on an S3-compatible service (AWS S3, MinIO, ...), rooted at
// a key prefix of one bucket. It is safe for concurrent use.
type S3 struct {
	bucket string
	root   string // "" or the prefix with a trailing "/"

	// core issues reads, stats and lists with minio-go's own retries
	// disabled: S3 retries those itself so that it can resume a body cut
	// short from where it stopped and keep the read pinned to one ETag.
	core *minio.Core
	// uploader issues uploads with minio-go's retries enabled, because only
	// minio-go can retry one part of a multipart upload from the buffer it
	// holds.
	uploader *minio.Client

	partSize int64
	parallel int
	retry    retrier
	idle     time.Duration // IdleTimeout; 0: none
}

// NewS3 returns a store on bucket, rooted at prefix ("" for the whole
// bucket; surrounding slashes are ignored). Zero cfg fields get their
// documented defaults. It does not contact the service.
func NewS3(cfg Config, bucket, prefix string) (*S3, error) {
	if err := s3utils.CheckValidBucketName(bucket); err != nil {
		return nil, fmt.Errorf("s3backend: bucket %q: %w", bucket, err)
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := checkPath(prefix); err != nil {
			return nil, fmt.Errorf("s3backend: root prefix: %w", err)
		}
		prefix += "/"
	}
	cfg = cfg.withDefaults()
	host, secure, err := parseEndpoint(cfg.Endpoint, cfg.Secure)
	if err != nil {
		return nil, err
	}

	var creds *credentials.Credentials
	if cfg.AccessKey != "" {
		creds = credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, cfg.SessionToken)
	} else {
		creds = credentials.NewChainCredentials([]credentials.Provider{
			&credentials.EnvAWS{},
			&credentials.EnvMinio{},
			&credentials.FileAWSCredentials{},
			&credentials.IAM{},
		})
	}
	transport := cfg.Transport
	if transport == nil {
		transport = newTransport(cfg.Parallel)
	}
	if cfg.Observer != nil {
		transport = &observingTransport{next: transport, obs: cfg.Observer}
	}
	opts := func(attempts int) *minio.Options {
		return &minio.Options{
			Creds:        creds,
			Secure:       secure,
			Transport:    transport,
			Region:       cfg.Region,
			BucketLookup: minio.BucketLookupPath,
			MaxRetries:   attempts,
		}
	}
	core, err := minio.NewCore(host, opts(1)) // 1 attempt: S3 retries itself
	if err != nil {
		return nil, fmt.Errorf("s3backend: client for %s: %w", cfg.Endpoint, err)
	}
	uploader, err := minio.New(host, opts(cfg.MaxRetries+1))
	if err != nil {
		return nil, fmt.Errorf("s3backend: client for %s: %w", cfg.Endpoint, err)
	}
	return &S3{
		bucket:   bucket,
		root:     prefix,
		core:     core,
		uploader: uploader,
		partSize: cfg.PartSize,
		parallel: cfg.Parallel,
		retry:    retrier{maxRetries: cfg.MaxRetries, base: cfg.RetryBase, patience: cfg.ThrottlePatience},
		idle:     cfg.IdleTimeout,
	}, nil
}

// String returns the store's URL, s3://bucket/prefix. It never includes
// credentials.
func (s *S3) String() string {
	return "s3://" + s.bucket + "/" + strings.TrimSuffix(s.root, "/")
}

// target names an object in errors.
func (s *S3) target(key string) string { return "s3://" + s.bucket + "/" + s.root + key }

// fail turns a classified error into the error S3 methods return.
func (s *S3) fail(op, key string, kind errKind, err error) error {
	switch kind {
	case kindNotFound:
		if errors.Is(err, ErrNotFound) {
			return err
		}
		if isNoBucket(err) {
			return fmt.Errorf("%w: %s: %w %s: %w", ErrNotFound, s.target(key), ErrNoBucket, s.bucket, err)
		}
		return fmt.Errorf("%w: %s: %w", ErrNotFound, s.target(key), err)
	case kindChanged:
		if errors.Is(err, ErrChanged) {
			return err
		}
		return fmt.Errorf("%w: %s: %w", ErrChanged, s.target(key), err)
	case kindRange:
		if errors.Is(err, ErrOutOfRange) {
			return err
		}
		return fmt.Errorf("%w: %s: %w", ErrOutOfRange, s.target(key), err)
	case kindRetry:
		return fmt.Errorf("%w: %s %s: %w", ErrUnavailable, op, s.target(key), err)
	}
	return fmt.Errorf("s3backend: %s %s: %w", op, s.target(key), err)
}

// ReadRange fills p with bytes [off, off+len(p)) of key. A read of a part
// size and a half or more is split into parts of about the part size
// (parts), fetched by up to Parallel concurrent ranged GETs, each reading
// straight into its slice of p. Every GET is
// pinned to etag with If-Match; with an empty etag the parts are checked to
// have come from one version of the object, so a read never mixes the bytes
// of two versions. On error the contents of p are unspecified.
func (s *S3) ReadRange(ctx context.Context, key, etag string, off int64, p []byte) error {
	return s.ReadRangeProgress(ctx, key, etag, off, p, nil)
}

// ReadRangeProgress is ReadRange that also calls progress(start, end),
// if not nil, as soon as bytes p[start:end] have arrived, so that a caller
// can work on them while they are still in the processor's cache: each
// piece is at most progressPiece (256 KiB), however much one read of the
// body could have returned. The calls
// for one part come from one goroutine, in order, each starting where the
// previous one ended; calls for different parts may run concurrently. A
// part resumed after a failure continues where it stopped: no byte is
// reported twice. progress must not keep p.
func (s *S3) ReadRangeProgress(ctx context.Context, key, etag string, off int64, p []byte, progress func(start, end int)) error {
	return s.read(ctx, key, etag, off, p, progress, false)
}

// ReadObject fills p with a whole object, which must be exactly len(p)
// bytes, reporting progress as ReadRangeProgress does. An object read in
// one part (under a part size and a half) is read with a plain GET rather
// than a ranged one: the same bytes, and a cheaper request for the server
// (on MinIO a cold epoch spent about 10 % less CPU in the store,
// measured at 70ad47c). A size other
// than len(p) is an error wrapping ErrOutOfRange.
func (s *S3) ReadObject(ctx context.Context, key, etag string, p []byte, progress func(start, end int)) error {
	return s.read(ctx, key, etag, 0, p, progress, true)
}

// read is ReadRangeProgress; whole says p is the whole object.
func (s *S3) read(ctx context.Context, key, etag string, off int64, p []byte, progress func(start, end int), whole bool) error {
	size := int64(-1) // the object's size, where the caller knows it
	if whole {
		size = int64(len(p))
	}
	if err := checkKey(key); err != nil {
		return err
	}
	if off < 0 {
		return fmt.Errorf("s3backend: read %s: negative offset %d", s.target(key), off)
	}
	if len(p) == 0 {
		return nil
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("s3backend: read %s: %w", s.target(key), err)
	}
	etag = normalizeETag(etag)
	nparts, partLen := parts(int64(len(p)), s.partSize)
	if nparts == 1 {
		_, err := s.readPart(ctx, key, etag, off, p, 0, progress, size)
		if err != nil && ctx.Err() != nil {
			return fmt.Errorf("s3backend: read %s: %w", s.target(key), ctx.Err())
		}
		return err
	}

	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.parallel)
	etags := make([]string, nparts)
	for i := range nparts {
		if gctx.Err() != nil {
			break // a part failed: do not start more
		}
		lo := int64(i) * partLen
		hi := min(lo+partLen, int64(len(p)))
		g.Go(func() error {
			got, err := s.readPart(gctx, key, etag, off+lo, p[lo:hi], int(lo), progress, size)
			etags[i] = got
			return err
		})
	}
	err := g.Wait()
	if ctx.Err() != nil {
		return fmt.Errorf("s3backend: read %s: %w", s.target(key), ctx.Err())
	}
	if err != nil {
		return err
	}
	if etag == "" {
		for _, e := range etags[1:] {
			if e != etags[0] && e != "" && etags[0] != "" {
				return changedError(s.target(key), etags[0], e)
			}
		}
	}
	return nil
}

// parts splits a read of n bytes into count GETs of partLen bytes (the
// last one shorter): the whole number of parts nearest to n ÷ partSize,
// at least one, of equal length. Rounding up instead would end most
// reads with a sliver: packs close a chunk once it reaches its target
// size, so a dataset packed at the part size has every chunk a few KiB
// over it, and each was read as a 16 MiB ranged GET and a ranged GET of
// its last few KiB, where one plain GET of the whole object costs the
// store less (the cold epoch's store CPU over the proxy's whole-object
// GETs fell from +0.066 to +0.017 s/GB, measured at c08b904). One part is shorter than 3/2 of
// partSize; several are each 3/4 to 5/4 of it.
// Requests is how many GETs a ReadRange of n bytes sends: what a plan
// counts a chunk's load as (internal/job/plans.Data).
func (s *S3) Requests(n int64) int {
	if n <= 0 {
		return 0
	}
	c, _ := parts(n, s.partSize)
	return c
}

func parts(n, partSize int64) (count int, partLen int64) {
	c := max(1, (n+partSize/2)/partSize)
	return int(c), (n + c - 1) / c
}

// readPart fills p with the object's bytes from off with one ranged GET,
// resuming from where a body was cut short, and returns the ETag the bytes
// came from. An empty pin is replaced by the ETag of the first response, so
// a resumed read stays on the version it started with. p starts at offset
// at of the caller's buffer, which is what progress, if set, is told. With
// size >= 0, the object must be that long; a part that is the whole object
// is first asked for without a Range (the cheaper request), and a resumed
// read asks for the rest with one as always.
func (s *S3) readPart(ctx context.Context, key, pin string, off int64, p []byte, at int, progress func(start, end int), size int64) (string, error) {
	obj := s.root + key
	last := off + int64(len(p)) - 1
	done := 0
	ranged := false // a plain GET answered another size: ask with a Range
	kind, err := s.retry.do(ctx, func() (bool, error) {
		start := off + int64(done)
		var opts minio.GetObjectOptions
		plain := !ranged && done == 0 && off == 0 && size == int64(len(p))
		if !plain {
			if err := opts.SetRange(start, last); err != nil {
				return false, err
			}
		}
		if pin != "" {
			if err := opts.SetMatchETag(pin); err != nil {
				return false, err
			}
		}
		// The attempt has its own context so that a stall can abandon it
		// without ending the read; it carries the watch so that a wait in
		// the Pacer (not sent yet) is not taken for a stall.
		actx, cancel := context.WithCancel(ctx)
		defer cancel()
		idle := watchIdle(s.idle, cancel)
		defer idle.stop()
		body, info, header, err := s.core.GetObject(idle.within(actx), s.bucket, obj, opts)
		if err != nil {
			return false, idle.explain(err)
		}
		defer body.Close()
		idle.touch()
		got := normalizeETag(info.ETag)
		switch {
		case pin == "":
			pin = got
		case got != "" && got != pin:
			// The backend ignored If-Match (some proxies do).
			return false, changedError(s.target(key), pin, got)
		}
		if plain && info.Size != size {
			// An object of another size than expected, or a body dropped
			// on the way (a proxy answering 200 with Content-Length 0):
			// asked again with a Range, whose Content-Range names the
			// object's size, so that only a real difference is
			// ErrOutOfRange (checkContentRange).
			ranged = true
			return false, fmt.Errorf("%s: a GET of the whole object answered %d bytes, expected %d: %w", s.target(key), info.Size, size, io.ErrUnexpectedEOF)
		}
		if err := checkContentRange(header, start, last, size); err != nil {
			return false, fmt.Errorf("%s: %w", s.target(key), err)
		}
		var n int
		for done < len(p) && err == nil {
			end := len(p)
			if progress != nil {
				end = min(end, done+progressPiece)
			}
			var m int
			m, err = body.Read(p[done:end])
			if m > 0 {
				idle.touch()
				if progress != nil {
					progress(at+done, at+done+m)
				}
			}
			done += m
			n += m
		}
		if err == io.EOF {
			if done == len(p) {
				err = nil
			} else {
				err = io.ErrUnexpectedEOF // the body ended before the promised length
			}
		}
		return n > 0, idle.explain(err)
	})
	if err != nil {
		if ctx.Err() != nil {
			return pin, fmt.Errorf("s3backend: read %s: %w", s.target(key), ctx.Err())
		}
		if kind == kindChanged && !errors.Is(err, ErrChanged) && pin != "" {
			// 412 Precondition Failed: If-Match did not hold.
			return pin, fmt.Errorf("%w (%v)", changedError(s.target(key), pin, ""), err)
		}
		return pin, s.fail(fmt.Sprintf("read [%d, %d) of", off, last+1), key, kind, err)
	}
	return pin, nil
}

// checkContentRange verifies that a ranged GET answered with the requested
// bytes: a server clips a range running past the end of the object
// (ErrOutOfRange), and a server ignoring Range sends the object from byte 0.
func checkContentRange(h http.Header, start, last, size int64) error {
	cr := h.Get("Content-Range")
	if cr == "" {
		if start == 0 {
			return nil // whole object from byte 0; ReadFull takes what it needs
		}
		return fmt.Errorf("no Content-Range in the answer to a ranged GET from byte %d", start)
	}
	spec, ok := strings.CutPrefix(cr, "bytes ")
	rng, total, ok2 := strings.Cut(spec, "/")
	first, end, ok3 := strings.Cut(rng, "-")
	if !ok || !ok2 || !ok3 {
		return fmt.Errorf("malformed Content-Range %q", cr)
	}
	f, err1 := strconv.ParseInt(first, 10, 64)
	e, err2 := strconv.ParseInt(end, 10, 64)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("malformed Content-Range %q", cr)
	}
	switch {
	case f != start:
		return fmt.Errorf("asked for bytes %d-%d, got %d-%d of %s", start, last, f, e, total)
	case e < last:
		return fmt.Errorf("%w: asked for bytes %d-%d, the object has %s", ErrOutOfRange, start, last, total)
	case size >= 0 && total != strconv.FormatInt(size, 10):
		return fmt.Errorf("%w: the object has %s bytes, expected %d", ErrOutOfRange, total, size)
	}
	return nil
}

// PresignGet returns a URL that GETs the object without credentials until
// expiry passes: for a client that must fetch the object itself, such as a
// proxy (the benchmark's limit (a)) or a browser. It signs locally and contacts the server only if the
// bucket's region is unknown.
func (s *S3) PresignGet(ctx context.Context, key string, expiry time.Duration) (*url.URL, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	u, err := s.core.PresignedGetObject(ctx, s.bucket, s.root+key, expiry, nil)
	if err != nil {
		return nil, fmt.Errorf("s3backend: presign %s: %w", s.target(key), err)
	}
	return u, nil
}

// Stat returns the object's size and ETag.
func (s *S3) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	var info minio.ObjectInfo
	kind, err := s.retry.do(ctx, func() (bool, error) {
		var err error
		info, err = s.core.StatObject(ctx, s.bucket, s.root+key, minio.StatObjectOptions{})
		return false, err
	})
	if err != nil {
		if ctx.Err() != nil {
			return ObjectInfo{}, fmt.Errorf("s3backend: stat %s: %w", s.target(key), ctx.Err())
		}
		return ObjectInfo{}, s.fail("stat", key, kind, err)
	}
	return ObjectInfo{Key: key, Size: info.Size, ETag: normalizeETag(info.ETag), ModTime: info.LastModified.UTC()}, nil
}

// Put uploads size bytes from r (size -1: until EOF). minio-go chooses
// between a single PUT and a multipart upload and retries failed requests,
// including single parts of a multipart upload; a single PUT is retried only
// when r is an io.Seeker.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64) (ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	if size < -1 {
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s: invalid size %d", s.target(key), size)
	}
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream"}
	if size < 0 {
		// Left to itself minio-go sizes the parts of an upload of unknown
		// length for a 5 TiB object, buffering over 500 MiB per part.
		opts.PartSize = unknownSizePartSize
	}
	info, err := s.uploader.PutObject(ctx, s.bucket, s.root+key, r, size, opts)
	if err != nil {
		if ctx.Err() != nil {
			return ObjectInfo{}, fmt.Errorf("s3backend: put %s: %w", s.target(key), ctx.Err())
		}
		return ObjectInfo{}, s.fail("put", key, classify(err), err)
	}
	return ObjectInfo{Key: key, Size: info.Size, ETag: normalizeETag(info.ETag)}, nil
}

// maxPutIfAbsent bounds an object PutIfAbsent writes: it is held in
// memory so that a failed attempt can be sent again.
const maxPutIfAbsent = 16 << 20

// PutIfAbsent uploads size bytes from r in one PUT with If-None-Match: *,
// which the service refuses with 412 if the key holds an object (AWS S3
// since 2024, MinIO). The body is read into memory first (at most 16 MiB)
// so that the PUT can be retried as a read is; a 409
// ConditionalRequestConflict (a conditional write racing another) is
// retried too, and its retry finds the winner's object.
func (s *S3) PutIfAbsent(ctx context.Context, key string, r io.Reader, size int64) (ObjectInfo, error) {
	if err := checkKey(key); err != nil {
		return ObjectInfo{}, err
	}
	if size < 0 || size > maxPutIfAbsent {
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s if absent: size %d; want 0 to %d bytes", s.target(key), size, maxPutIfAbsent)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(r, body); err != nil {
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s if absent: reading the body: %w", s.target(key), err)
	}
	opts := minio.PutObjectOptions{ContentType: "application/octet-stream"}
	opts.SetMatchETagExcept("*")
	var info minio.UploadInfo
	kind, err := s.retry.do(ctx, func() (bool, error) {
		var err error
		info, err = s.core.PutObject(ctx, s.bucket, s.root+key, bytes.NewReader(body), size, "", "", opts)
		return false, err
	})
	switch {
	case err == nil:
		return ObjectInfo{Key: key, Size: info.Size, ETag: normalizeETag(info.ETag)}, nil
	case ctx.Err() != nil:
		return ObjectInfo{}, fmt.Errorf("s3backend: put %s if absent: %w", s.target(key), ctx.Err())
	case kind == kindChanged:
		return ObjectInfo{}, fmt.Errorf("%w: %s", ErrExists, s.target(key))
	}
	return ObjectInfo{}, s.fail("put if absent", key, kind, err)
}

// Delete removes the object; S3 answers a deletion of a missing key with
// success.
func (s *S3) Delete(ctx context.Context, key string) error {
	if err := checkKey(key); err != nil {
		return err
	}
	kind, err := s.retry.do(ctx, func() (bool, error) {
		return false, s.core.RemoveObject(ctx, s.bucket, s.root+key, minio.RemoveObjectOptions{})
	})
	switch {
	case err == nil, kind == kindNotFound && !isNoBucket(err): // some services answer 404 NoSuchKey
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("s3backend: delete %s: %w", s.target(key), ctx.Err())
	}
	return s.fail("delete", key, kind, err)
}

// isNoBucket reports whether err is S3's NoSuchBucket.
func isNoBucket(err error) bool {
	var resp minio.ErrorResponse
	return errors.As(err, &resp) && resp.Code == "NoSuchBucket"
}

// List returns the objects under prefix, recursively, sorted by key. A
// listing interrupted by a transient error resumes after the last key it
// received.
func (s *S3) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	var (
		out        []ObjectInfo
		lastKey    string
		fetchOwner = false // owner data costs bytes nobody reads
	)
	kind, err := s.retry.do(ctx, func() (bool, error) {
		progressed := false
		for o := range s.core.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{
			Prefix:     s.root + prefix,
			Recursive:  true,
			StartAfter: lastKey,
			FetchOwner: &fetchOwner,
		}) {
			if o.Err != nil {
				return progressed, o.Err
			}
			progressed = true
			lastKey = o.Key
			key, ok := strings.CutPrefix(o.Key, s.root)
			if !ok || checkKey(key) != nil {
				continue // a "directory" marker or a key Brand cannot address
			}
			out = append(out, ObjectInfo{Key: key, Size: o.Size, ETag: normalizeETag(o.ETag), ModTime: o.LastModified.UTC()})
		}
		// minio-go ends the iteration silently when ctx is cancelled.
		return progressed, ctx.Err()
	})
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("s3backend: list %s: %w", s.target(prefix), ctx.Err())
		}
		return nil, s.fail("list", prefix, kind, err)
	}
	slices.SortFunc(out, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
	return out, nil
}

// progressPiece bounds one read of a body whose bytes are reported as they
// arrive: the caller works on them (a chunk's CRC32C) while they are in
// the processor's cache, which a socket read of several MiB is not.
const progressPiece = 256 << 10
