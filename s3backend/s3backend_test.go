package s3backend

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

func TestCheckKey(t *testing.T) {
	tests := []struct {
		key string
		ok  bool
	}{
		{"a", true},
		{"chunks/000001.tar", true},
		{"_brand/index", true},
		{"a.b/c..d/e...", true},
		{"with space/ünïcode", true},
		{"", false},
		{"/abs", false},
		{"dir/", false},
		{"a//b", false},
		{"..", false},
		{"../escape", false},
		{"a/../b", false},
		{"a/..", false},
		{".", false},
		{"./a", false},
		{"a/./b", false},
		{"nul\x00byte", false},
	}
	for _, tt := range tests {
		err := checkKey(tt.key)
		if (err == nil) != tt.ok {
			t.Errorf("checkKey(%q) = %v, want ok=%v", tt.key, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Errorf("checkKey(%q) = %v, want ErrInvalidKey", tt.key, err)
		}
	}
}

func TestCheckPrefix(t *testing.T) {
	tests := []struct {
		prefix string
		ok     bool
	}{
		{"", true},
		{"chunks/", true},
		{"chunks/0000", true},
		{"a/b/", true},
		{"/", false},
		{"/a", false},
		{"a//", false},
		{"../", false},
		{"a/../", false},
	}
	for _, tt := range tests {
		if err := checkPrefix(tt.prefix); (err == nil) != tt.ok {
			t.Errorf("checkPrefix(%q) = %v, want ok=%v", tt.prefix, err, tt.ok)
		}
	}
}

func TestNormalizeETag(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{`"abc"`, "abc"},
		{`W/"abc"`, "abc"},
		{` "abc-3" `, "abc-3"},
	}
	for _, tt := range tests {
		if got := normalizeETag(tt.in); got != tt.want {
			t.Errorf("normalizeETag(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestParseEndpoint(t *testing.T) {
	tests := []struct {
		endpoint string
		secure   bool
		host     string
		tls      bool
		ok       bool
	}{
		{"127.0.0.1:9000", false, "127.0.0.1:9000", false, true},
		{"minio.local:9000", true, "minio.local:9000", true, true},
		{"http://127.0.0.1:9000", true, "127.0.0.1:9000", false, true},
		{"https://s3.example.com", false, "s3.example.com", true, true},
		{"HTTPS://s3.example.com/", false, "s3.example.com", true, true},
		{"ftp://host", false, "", false, false},
		{"http://host/path", false, "", false, false},
		{"http://user:pw@host", false, "", false, false},
		{"http://", false, "", false, false},
		{"host/path", false, "", false, false},
		{"", false, "", false, false},
	}
	for _, tt := range tests {
		host, tls, err := parseEndpoint(tt.endpoint, tt.secure)
		if (err == nil) != tt.ok {
			t.Errorf("parseEndpoint(%q) error = %v, want ok=%v", tt.endpoint, err, tt.ok)
			continue
		}
		if host != tt.host || tls != tt.tls {
			t.Errorf("parseEndpoint(%q) = %q, %v; want %q, %v", tt.endpoint, host, tls, tt.host, tt.tls)
		}
	}
}

func TestConfigFromEnv(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL", "http://fallback:1")
	t.Setenv("AWS_ENDPOINT_URL_S3", "https://s3.example.com")
	t.Setenv("AWS_ACCESS_KEY_ID", "AKID")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "SECRET")
	t.Setenv("AWS_SESSION_TOKEN", "TOKEN")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "eu-west-1")
	got := ConfigFromEnv()
	want := Config{
		Endpoint: "https://s3.example.com", AccessKey: "AKID", SecretKey: "SECRET",
		SessionToken: "TOKEN", Region: "eu-west-1", Secure: true,
	}
	if got != want {
		t.Errorf("ConfigFromEnv() = %+v, want %+v", got, want)
	}

	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_REGION", "us-west-2")
	got = ConfigFromEnv()
	if got.Endpoint != "http://fallback:1" || got.Secure || got.Region != "us-west-2" {
		t.Errorf("ConfigFromEnv() fallbacks = %+v", got)
	}
}

func TestConfigDefaults(t *testing.T) {
	t.Setenv("AWS_ENDPOINT_URL_S3", "")
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	got := Config{}.withDefaults()
	if got.Endpoint != defaultEndpoint || !got.Secure || got.PartSize != DefaultPartSize ||
		got.Parallel != DefaultParallel || got.MaxRetries != DefaultMaxRetries || got.RetryBase != DefaultRetryBase {
		t.Errorf("defaults = %+v", got)
	}
	if got := (Config{MaxRetries: -1}).withDefaults().MaxRetries; got != 0 {
		t.Errorf("MaxRetries -1 -> %d, want 0 (no retries)", got)
	}
	if got := (Config{MaxRetries: 2, PartSize: 1, Parallel: 9}).withDefaults(); got.MaxRetries != 2 || got.PartSize != 1 || got.Parallel != 9 {
		t.Errorf("explicit values overridden: %+v", got)
	}
}

func TestBackoff(t *testing.T) {
	r := retrier{maxRetries: 10, base: 100 * time.Millisecond}
	for n := range 12 {
		ceiling := min(100*time.Millisecond<<n, maxBackoff)
		for range 50 {
			if d := r.backoff(n); d < 0 || d > ceiling {
				t.Fatalf("backoff(%d) = %v, want within [0, %v]", n, d, ceiling)
			}
		}
	}
	// A base above the cap is honoured rather than cut down.
	big := retrier{base: 10 * time.Second}
	if d := big.backoff(3); d > 10*time.Second {
		t.Errorf("backoff with 10s base = %v", d)
	}
}

func TestRetrierDo(t *testing.T) {
	slowDown := minio.ErrorResponse{Code: "SlowDown", StatusCode: http.StatusServiceUnavailable}
	tests := []struct {
		name      string
		errs      []error // returned by successive attempts; then success
		max       int
		wantCalls int
		wantKind  errKind
		wantErr   bool
	}{
		{"success", nil, 3, 1, 0, false},
		{"transient then success", []error{slowDown, slowDown}, 3, 3, 0, false},
		{"budget spent", []error{slowDown, slowDown, slowDown, slowDown}, 3, 4, kindRetry, true},
		{"no retries", []error{slowDown}, 0, 1, kindRetry, true},
		{"not found is final", []error{minio.ErrorResponse{Code: "NoSuchKey", StatusCode: 404}}, 3, 1, kindNotFound, true},
		{"forbidden is final", []error{minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}}, 3, 1, kindPermanent, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := retrier{maxRetries: tt.max, base: time.Microsecond}
			calls := 0
			kind, err := r.do(context.Background(), func() (bool, error) {
				calls++
				if calls <= len(tt.errs) {
					return false, tt.errs[calls-1]
				}
				return false, nil
			})
			if calls != tt.wantCalls || kind != tt.wantKind || (err != nil) != tt.wantErr {
				t.Errorf("do: calls=%d kind=%v err=%v; want calls=%d kind=%v err=%v",
					calls, kind, err, tt.wantCalls, tt.wantKind, tt.wantErr)
			}
		})
	}

	// A store that throttles is retried past the budget while it has
	// throttled the request for less than the patience; other failures
	// spend the budget as before, and once the patience is spent so do
	// throttled answers.
	busy := minio.ErrorResponse{Code: "ServiceUnavailable", StatusCode: 503}
	tooMany := minio.ErrorResponse{StatusCode: 429}
	for _, tt := range []struct {
		name      string
		errs      []error
		patience  time.Duration
		wantCalls int
		wantErr   bool
	}{
		{"throttled past the budget", []error{slowDown, slowDown, slowDown, slowDown, tooMany, slowDown}, time.Hour, 7, false},
		{"a store down spends the budget", []error{busy, busy, busy, busy}, time.Hour, 4, true},
		{"throttled and down", []error{slowDown, busy, slowDown, busy, busy, slowDown}, time.Hour, 7, false},
		{"down past the budget", []error{slowDown, busy, busy, busy, busy}, time.Hour, 5, true},
		{"no patience", []error{slowDown, slowDown, slowDown, slowDown}, 0, 4, true},
		{"patience spent", []error{slowDown, slowDown, slowDown, slowDown, slowDown}, time.Nanosecond, 4, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := retrier{maxRetries: 3, base: time.Microsecond, patience: tt.patience}
			calls := 0
			_, err := r.do(context.Background(), func() (bool, error) {
				calls++
				if calls <= len(tt.errs) {
					return false, tt.errs[calls-1]
				}
				return false, nil
			})
			if calls != tt.wantCalls || (err != nil) != tt.wantErr {
				t.Errorf("do: %d calls, err %v; want %d calls, an error %v", calls, err, tt.wantCalls, tt.wantErr)
			}
		})
	}

	t.Run("cancelled during backoff", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		r := retrier{maxRetries: 3, base: time.Hour}
		_, err := r.do(ctx, func() (bool, error) {
			cancel()
			return false, slowDown
		})
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	})

	t.Run("progress skips the sleep", func(t *testing.T) {
		r := retrier{maxRetries: 2, base: time.Hour} // a sleep would hang the test
		calls := 0
		_, err := r.do(context.Background(), func() (bool, error) {
			if calls++; calls < 3 {
				return true, io.ErrUnexpectedEOF
			}
			return false, nil
		})
		if err != nil || calls != 3 {
			t.Errorf("err=%v calls=%d, want nil, 3", err, calls)
		}
	})
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want errKind
	}{
		{"NoSuchKey", minio.ErrorResponse{Code: "NoSuchKey", StatusCode: 404}, kindNotFound},
		{"NoSuchBucket", minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: 404}, kindNotFound},
		{"bare 404", minio.ErrorResponse{StatusCode: 404}, kindNotFound},
		{"412", minio.ErrorResponse{Code: "PreconditionFailed", StatusCode: 412}, kindChanged},
		{"416", minio.ErrorResponse{Code: "InvalidRange", StatusCode: 416}, kindRange},
		{"403", minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}, kindPermanent},
		{"SlowDown", minio.ErrorResponse{Code: "SlowDown", StatusCode: 503}, kindRetry},
		{"throttling as 400", minio.ErrorResponse{Code: "ThrottlingException", StatusCode: 400}, kindRetry},
		{"500", minio.ErrorResponse{Code: "InternalError", StatusCode: 500}, kindRetry},
		{"502", minio.ErrorResponse{StatusCode: 502}, kindRetry},
		{"504", minio.ErrorResponse{StatusCode: 504}, kindRetry},
		{"429", minio.ErrorResponse{StatusCode: 429}, kindRetry},
		{"400", minio.ErrorResponse{Code: "InvalidArgument", StatusCode: 400}, kindPermanent},
		{"wrapped", fmt.Errorf("x: %w", minio.ErrorResponse{Code: "SlowDown", StatusCode: 503}), kindRetry},
		{"url error", &url.Error{Op: "Get", URL: "http://x", Err: syscall.ECONNREFUSED}, kindRetry},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), kindRetry},
		{"cut body", io.ErrUnexpectedEOF, kindRetry},
		{"transport deadline", &url.Error{Op: "Get", URL: "http://x", Err: context.DeadlineExceeded}, kindRetry},
		{"sentinel changed", changedError("k", "a", "b"), kindChanged},
		{"sentinel range", ErrOutOfRange, kindRange},
		{"other", errors.New("something odd"), kindPermanent},
	}
	for _, tt := range tests {
		if got := classify(tt.err); got != tt.want {
			t.Errorf("%s: classify(%v) = %v, want %v", tt.name, tt.err, got, tt.want)
		}
	}
}

func TestCheckContentRange(t *testing.T) {
	tests := []struct {
		header      string
		start, last int64
		size        int64 // the object's expected size, -1 if unknown
		ok          bool
		outOfRange  bool
	}{
		{"bytes 0-99/1000", 0, 99, -1, true, false},
		{"bytes 100-199/1000", 100, 199, -1, true, false},
		{"bytes 100-999/1000", 100, 1099, -1, false, true}, // clipped at the end of the object
		{"bytes 0-99/1000", 100, 199, -1, false, false},    // wrong start
		{"", 0, 99, -1, true, false},                       // Range ignored, body starts at 0
		{"", 10, 99, -1, false, false},                     // Range ignored, wrong bytes
		{"bytes */1000", 0, 99, -1, false, false},
		{"garbage", 0, 99, -1, false, false},
		{"bytes 900-999/1000", 900, 999, 1000, true, false}, // the last part of an object of the expected size
		{"bytes 900-999/1200", 900, 999, 1000, false, true}, // the object is longer than expected
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.header != "" {
			h.Set("Content-Range", tt.header)
		}
		err := checkContentRange(h, tt.start, tt.last, tt.size)
		if (err == nil) != tt.ok {
			t.Errorf("checkContentRange(%q, %d, %d, %d) = %v, want ok=%v", tt.header, tt.start, tt.last, tt.size, err, tt.ok)
		}
		if errors.Is(err, ErrOutOfRange) != tt.outOfRange {
			t.Errorf("checkContentRange(%q, %d, %d, %d) = %v; ErrOutOfRange %t expected", tt.header, tt.start, tt.last, tt.size, err, tt.outOfRange)
		}
	}
}

func TestOpOf(t *testing.T) {
	tests := []struct {
		method, url, want string
	}{
		{"GET", "http://h/bucket/key/a.tar", OpGet},
		{"GET", "http://h/bucket/?list-type=2&prefix=x", OpList},
		{"GET", "http://h/bucket?location=", OpOther},
		{"HEAD", "http://h/bucket/key", OpStat},
		{"PUT", "http://h/bucket/key", OpPut},
		{"POST", "http://h/bucket/key?uploads", OpPut},
		{"DELETE", "http://h/bucket/key", OpDelete},
		{"OPTIONS", "http://h/bucket", OpOther},
	}
	for _, tt := range tests {
		req, err := http.NewRequest(tt.method, tt.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := opOf(req); got != tt.want {
			t.Errorf("opOf(%s %s) = %q, want %q", tt.method, tt.url, got, tt.want)
		}
	}
}

func TestOpen(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		url     string
		want    string // String() of the store; "" for an error
		isLocal bool
	}{
		{"s3://bucket", "s3://bucket/", false},
		{"s3://bucket/", "s3://bucket/", false},
		{"s3://bucket/ds/v1/", "s3://bucket/ds/v1", false},
		{"file://" + dir, "file://" + dir, true},
		{"file://localhost" + dir, "file://" + dir, true},
		{dir, "file://" + dir, true},
		{dir + "/sub/../x", "file://" + filepath.Join(dir, "x"), true},
		{"", "", false},
		{"s3://", "", false},
		{"s3://ab/x", "", false},         // bucket name too short
		{"s3://bad!bucket/x", "", false}, // invalid character
		{"s3://bucket/a/../b", "", false},
		{"s3://user:pw@bucket/x", "", false},
		{"s3://bucket/x?versionId=1", "", false},
		{"file://otherhost/dir", "", false},
		{"gs://bucket/x", "", false},
	}
	cfg := Config{Endpoint: "http://127.0.0.1:1", AccessKey: "k", SecretKey: "s", Region: "us-east-1"}
	for _, tt := range tests {
		st, err := Open(context.Background(), tt.url, cfg)
		if tt.want == "" {
			if err == nil {
				t.Errorf("Open(%q) = %v, want an error", tt.url, st)
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%q): %v", tt.url, err)
			continue
		}
		if got := fmt.Sprint(st); got != tt.want {
			t.Errorf("Open(%q) = %s, want %s", tt.url, got, tt.want)
		}
		if _, ok := st.(*Local); ok != tt.isLocal {
			t.Errorf("Open(%q) is %T", tt.url, st)
		}
	}
}

func TestS3StringHidesSecrets(t *testing.T) {
	s, err := NewS3(Config{Endpoint: "https://s3.example.com", AccessKey: "AKIDSECRET", SecretKey: "VERYSECRET"}, "bucket", "p")
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range []string{s.String(), fmt.Sprintf("%v", s)} {
		if strings.Contains(got, "SECRET") {
			t.Errorf("%q leaks a secret", got)
		}
	}
}

func TestS3RejectsBadInput(t *testing.T) {
	s, err := NewS3(Config{Endpoint: "http://127.0.0.1:1", AccessKey: "k", SecretKey: "s", Region: "us-east-1", MaxRetries: -1}, "bucket", "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	buf := make([]byte, 4)
	if err := s.ReadRange(ctx, "../x", "", 0, buf); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("ReadRange(../x) = %v, want ErrInvalidKey", err)
	}
	if _, err := s.Stat(ctx, ""); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Stat(\"\") = %v, want ErrInvalidKey", err)
	}
	if _, err := s.Put(ctx, "/abs", strings.NewReader("x"), 1); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Put(/abs) = %v, want ErrInvalidKey", err)
	}
	if _, err := s.List(ctx, "/"); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("List(/) = %v, want ErrInvalidKey", err)
	}
	if err := s.ReadRange(ctx, "k", "", -1, buf); err == nil {
		t.Error("ReadRange at a negative offset succeeded")
	}
	if err := s.ReadRange(ctx, "k", "", 0, nil); err != nil {
		t.Errorf("empty ReadRange = %v, want nil without a request", err)
	}
}

// A read is split into the whole number of parts nearest to its length
// in part sizes, of equal length: never a sliver of a part at the end.
func TestParts(t *testing.T) {
	const ps = 16 << 20
	tests := []struct {
		name    string
		n       int64
		count   int
		partLen int64
	}{
		{"one byte", 1, 1, 1},
		{"one part", ps, 1, ps},
		{"a packed chunk, a few KiB over", ps + 6144, 1, ps + 6144}, // not a part and a 6 KiB one
		{"under a part and a half", ps + ps/2 - 1, 1, ps + ps/2 - 1},
		{"a part and a half", ps + ps/2, 2, (ps + ps/2) / 2},
		{"a 64 MiB chunk, a few KiB over", 4*ps + 6144, 4, ps + 1536}, // not five parts
		{"uneven", 3*ps + 1, 3, ps + 1},                               // the last one 2 bytes shorter
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			count, partLen := parts(tt.n, ps)
			if count != tt.count || partLen != tt.partLen {
				t.Fatalf("parts(%d) = %d parts of %d, want %d of %d", tt.n, count, partLen, tt.count, tt.partLen)
			}
			if last := tt.n - int64(count-1)*partLen; last <= 0 || last > partLen {
				t.Errorf("the last part is %d bytes", last)
			}
			if count > 1 && (4*partLen < 3*ps || 4*partLen > 5*ps) {
				t.Errorf("%d parts of %d: outside 3/4 to 5/4 of the part size", count, partLen)
			}
		})
	}
}
