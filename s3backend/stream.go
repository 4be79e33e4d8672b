package s3backend

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/minio/minio-go/v7"
)

// OpenRange returns a reader of bytes [off, off+n) of the object, for a
// caller that decodes them as they arrive rather than into one buffer:
// each Read fills the caller's slice straight from the response body, so
// bytes a decoder reads into their final place cost one copy, the
// kernel's. The read is pinned to etag as ReadRange's is (with an empty
// etag, to the version its first response came from), and it is one GET
// unless the body fails: a body cut short, stalled for
// Config.IdleTimeout, or a transient error is resumed from the byte it
// stopped at with a GET of the rest, within the retry budget of one
// ReadRange, so that the reader never gives a byte twice nor an error a
// retry could have mended. Errors are ReadRange's: ErrChanged,
// ErrOutOfRange, ErrNotFound, ErrUnavailable, or ctx's. Close releases
// the response; the reader is for one goroutine.
func (s *S3) OpenRange(ctx context.Context, key, etag string, off, n int64) (io.ReadCloser, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if off < 0 || n < 0 {
		return nil, fmt.Errorf("s3backend: read %s: range [%d, %d+%d)", s.target(key), off, off, n)
	}
	return &rangeStream{s: s, ctx: ctx, key: key, pin: normalizeETag(etag), start: off, off: off, end: off + n}, nil
}

// rangeStream is OpenRange's reader.
type rangeStream struct {
	s     *S3
	ctx   context.Context
	key   string
	pin   string
	start int64
	off   int64 // the next byte to give
	end   int64
	fails int // failed attempts so far, against the retry budget

	body   io.ReadCloser
	cancel context.CancelFunc
	idle   *idleWatch
	err    error // sticky: the stream's end
}

// Read implements io.Reader.
func (r *rangeStream) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if r.off == r.end {
		r.release()
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	if int64(len(p)) > r.end-r.off {
		p = p[:r.end-r.off]
	}
	for {
		if r.body == nil {
			if err := r.open(); err != nil {
				return 0, r.stop(err)
			}
		}
		r.idle.touch()
		m, err := r.body.Read(p)
		r.idle.stop()
		r.off += int64(m)
		switch {
		case err == nil && m > 0:
			return m, nil
		case err == nil:
			continue
		case err == io.EOF && r.off == r.end:
			r.release()
			return m, nil
		case err == io.EOF:
			err = io.ErrUnexpectedEOF // the body ended before the promised length
		}
		err = r.idle.explain(err)
		r.release()
		if failed := r.failed(err, m > 0); failed != nil {
			return m, r.stop(failed)
		}
		if m > 0 {
			return m, nil // the rest on the next Read, from a new GET
		}
	}
}

// open sends the GET of the bytes not yet given, retrying what the retry
// policy allows.
func (r *rangeStream) open() error {
	for {
		err := r.get()
		if err == nil {
			return nil
		}
		if failed := r.failed(err, false); failed != nil {
			return failed
		}
	}
}

// get sends one GET of [off, end).
func (r *rangeStream) get() error {
	var opts minio.GetObjectOptions
	if err := opts.SetRange(r.off, r.end-1); err != nil {
		return err
	}
	if r.pin != "" {
		if err := opts.SetMatchETag(r.pin); err != nil {
			return err
		}
	}
	actx, cancel := context.WithCancel(r.ctx)
	idle := watchIdle(r.s.idle, cancel)
	body, info, header, err := r.s.core.GetObject(idle.within(actx), r.s.bucket, r.s.root+r.key, opts)
	if err != nil {
		err = idle.explain(err)
		idle.stop()
		cancel()
		return err
	}
	got := normalizeETag(info.ETag)
	switch {
	case r.pin == "":
		r.pin = got
	case got != "" && got != r.pin:
		err = changedError(r.s.target(r.key), r.pin, got) // the backend ignored If-Match
	}
	if err == nil {
		if err = checkContentRange(header, r.off, r.end-1, -1); err != nil {
			err = fmt.Errorf("%s: %w", r.s.target(r.key), err)
		}
	}
	if err != nil {
		body.Close()
		idle.stop()
		cancel()
		return err
	}
	r.body, r.cancel, r.idle = body, cancel, idle
	return nil
}

// failed counts a failed attempt and returns nil when it is to be tried
// again (after the policy's backoff, unless it had made progress), else
// the stream's error.
func (r *rangeStream) failed(err error, progressed bool) error {
	if r.ctx.Err() != nil {
		return r.ctx.Err()
	}
	kind := classify(err)
	if kind == kindRetry && r.fails < r.s.retry.maxRetries {
		r.fails++
		if progressed {
			return nil
		}
		if err := sleep(r.ctx, r.s.retry.backoff(r.fails-1)); err != nil {
			return err
		}
		return nil
	}
	if kind == kindRetry {
		err = fmt.Errorf("gave up after %d attempts: %w", r.fails+1, err)
	}
	if kind == kindChanged && !errors.Is(err, ErrChanged) && r.pin != "" {
		// 412 Precondition Failed: If-Match did not hold.
		return fmt.Errorf("%w (%v)", changedError(r.s.target(r.key), r.pin, ""), err)
	}
	return r.s.fail(fmt.Sprintf("read [%d, %d) of", r.start, r.end), r.key, kind, err)
}

// stop ends the stream with err, a ctx error wrapped as ReadRange's are.
func (r *rangeStream) stop(err error) error {
	r.release()
	if r.ctx.Err() != nil {
		err = fmt.Errorf("s3backend: read %s: %w", r.s.target(r.key), r.ctx.Err())
	}
	r.err = err
	return err
}

// release closes the response, if one is open.
func (r *rangeStream) release() {
	if r.body == nil {
		return
	}
	r.body.Close()
	r.idle.stop()
	r.cancel()
	r.body, r.cancel, r.idle = nil, nil, nil
}

// Close implements io.Closer.
func (r *rangeStream) Close() error {
	r.release()
	if r.err == nil {
		r.err = errors.New("s3backend: read of a closed range")
	}
	return nil
}
