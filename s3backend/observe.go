package s3backend

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// observingTransport reports every HTTP request to an Observer. It sits
// below minio-go, so the requests minio-go makes on its own (multipart
// upload steps, its internal retries of uploads, bucket location lookups)
// are counted exactly like Brand's own retries.
type observingTransport struct {
	next http.RoundTripper
	obs  Observer
}

func (t *observingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	op := opOf(req)
	sent := max(req.ContentLength, 0)
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		t.obs.ObserveBackend(op, sent, time.Since(start), err)
		return nil, err
	}
	ob := &observedBody{
		body:  resp.Body,
		obs:   t.obs,
		op:    op,
		start: start,
		sent:  sent,
		count: resp.StatusCode < 300,
	}
	if resp.StatusCode >= 400 {
		ob.status = statusError(resp.StatusCode)
	}
	if resp.Body == nil || resp.Body == http.NoBody {
		ob.report(nil)
		return resp, nil
	}
	resp.Body = ob
	return resp, nil
}

// statusError describes an HTTP error status for the Observer, wrapping the
// sentinel that status means so metrics can tell a miss from a failure.
func statusError(code int) error {
	text := fmt.Sprintf("HTTP %d %s", code, http.StatusText(code))
	switch code {
	case http.StatusNotFound:
		return fmt.Errorf("%w: %s", ErrNotFound, text)
	case http.StatusPreconditionFailed:
		return fmt.Errorf("%w: %s", ErrChanged, text)
	}
	return errors.New("s3backend: " + text)
}

// opOf names the S3 operation a path-style request performs.
func opOf(req *http.Request) string {
	// Path-style: /bucket or /bucket/ addresses the bucket, /bucket/key an object.
	path := strings.TrimPrefix(req.URL.Path, "/")
	_, object, _ := strings.Cut(path, "/")
	switch req.Method {
	case http.MethodHead:
		return OpStat
	case http.MethodGet:
		switch {
		case object != "":
			return OpGet
		case req.URL.Query().Has("location"):
			return OpOther
		default:
			return OpList
		}
	case http.MethodPut, http.MethodPost:
		return OpPut
	case http.MethodDelete:
		return OpDelete
	}
	return OpOther
}

// observedBody counts the bytes read from a response body and reports the
// request once, at EOF, on a read error or on Close, whichever comes first.
type observedBody struct {
	body   io.ReadCloser
	obs    Observer
	op     string
	start  time.Time
	sent   int64
	count  bool  // count response bytes (a success, not an error document)
	status error // non-nil for an HTTP error status

	mu   sync.Mutex
	n    int64
	done bool
}

func (b *observedBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	b.mu.Lock()
	b.n += int64(n)
	b.mu.Unlock()
	switch {
	case err == io.EOF:
		b.report(nil)
	case err != nil:
		b.report(err)
	}
	return n, err
}

func (b *observedBody) Close() error {
	err := b.body.Close()
	b.report(nil)
	return err
}

func (b *observedBody) report(readErr error) {
	b.mu.Lock()
	if b.done {
		b.mu.Unlock()
		return
	}
	b.done = true
	n := b.sent
	if b.count {
		n += b.n
	}
	b.mu.Unlock()
	err := b.status
	if err == nil {
		err = readErr
	}
	b.obs.ObserveBackend(b.op, n, time.Since(b.start), err)
}
