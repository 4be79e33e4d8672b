package s3proto

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// opNames is every name ParseOp may give, from a fixed set whatever the
// request: it labels a metric.
func opNames() []string {
	names := []string{"ListBuckets", "GetBucketLocation", "HeadBucket", "ListObjectsV2", "ListObjects", "HeadObject", "GetObject", "Other",
		"OtherObject", "OtherBucket"}
	for _, v := range writeVerbs {
		names = append(names, v, v+"Object", v+"Bucket")
	}
	for _, s := range unsupportedBucketQuery {
		names = append(names, "Bucket?"+s)
	}
	for _, s := range unsupportedObjectQuery {
		names = append(names, "Object?"+s)
	}
	return names
}

func TestParseOp(t *testing.T) {
	tests := []struct {
		method, target string
		want           Op
	}{
		{"GET", "/", Op{Name: "ListBuckets"}},
		{"GET", "/b", Op{Name: "ListObjects", Bucket: "b"}},
		{"GET", "/b/", Op{Name: "ListObjects", Bucket: "b"}},
		{"GET", "/b?list-type=2&prefix=x", Op{Name: "ListObjectsV2", Bucket: "b"}},
		{"GET", "/b?location", Op{Name: "GetBucketLocation", Bucket: "b"}},
		{"HEAD", "/b", Op{Name: "HeadBucket", Bucket: "b"}},
		{"GET", "/b?versioning", Op{Name: "Bucket?versioning", Bucket: "b"}},
		{"GET", "/b/a/k.jpg", Op{Name: "GetObject", Bucket: "b", Key: "a/k.jpg"}},
		{"HEAD", "/b/a/k.jpg", Op{Name: "HeadObject", Bucket: "b", Key: "a/k.jpg"}},
		{"GET", "/b/k?partNumber=1", Op{Name: "Object?partNumber", Bucket: "b", Key: "k"}},
		{"GET", "/b/k?acl", Op{Name: "Object?acl", Bucket: "b", Key: "k"}},
		{"GET", "/b/k%2Fx", Op{Name: "GetObject", Bucket: "b", Key: "k/x"}},
		{"PUT", "/b/k", Op{Name: "PutObject", Bucket: "b", Key: "k"}},
		{"DELETE", "/b", Op{Name: "DeleteBucket", Bucket: "b"}},
		{"PROPFIND", "/", Op{Name: "Other"}},
	}
	for _, tt := range tests {
		got := ParseOp(httptest.NewRequest(tt.method, tt.target, nil))
		if got != tt.want {
			t.Errorf("%s %s: %+v, want %+v", tt.method, tt.target, got, tt.want)
		}
	}
}

// TestPrepare: the one step of every GET and HEAD — headers,
// preconditions with S3's precedence, the Range — for an object of 100
// bytes last modified at noon.
func TestPrepare(t *testing.T) {
	noon := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	before, after := noon.Add(-time.Hour).Format(http.TimeFormat), noon.Add(time.Hour).Format(http.TimeFormat)
	crc := uint32(0x01020304)
	o := ObjectMeta{ETag: `"abc"`, Modified: noon, Size: 100, Ext: "jpg", CRC32C: &crc}
	tests := []struct {
		name   string
		method string
		hdr    []string
		status int   // written by Prepare (done) or the error's
		span   *Span // when neither: what the GET writes
		header []string
	}{
		{"whole", "GET", nil, 0, &Span{0, 100, 200}, []string{"Content-Type", "image/jpeg", "ETag", `"abc"`}},
		{"head", "HEAD", nil, 200, nil, []string{"Content-Length", "100"}},
		{"range", "GET", []string{"Range", "bytes=10-19"}, 0, &Span{10, 10, 206}, []string{"Content-Range", "bytes 10-19/100"}},
		{"range head", "HEAD", []string{"Range", "bytes=-5"}, 206, nil, []string{"Content-Length", "5", "Content-Range", "bytes 95-99/100"}},
		{"range past the end", "GET", []string{"Range", "bytes=100-"}, 416, nil, []string{"Content-Range", "bytes */100"}},
		{"several ranges", "GET", []string{"Range", "bytes=0-1,5-6"}, 0, &Span{0, 100, 200}, nil},
		{"if-none-match", "GET", []string{"If-None-Match", `"abc"`}, 304, nil, []string{"ETag", `"abc"`}},
		{"if-none-match other", "GET", []string{"If-None-Match", `"x"`, "If-Modified-Since", after}, 0, &Span{0, 100, 200}, nil},
		{"if-match other", "GET", []string{"If-Match", `"x"`}, 412, nil, nil},
		{"if-match and unmodified-since", "GET", []string{"If-Match", `"abc"`, "If-Unmodified-Since", before}, 0, &Span{0, 100, 200}, nil},
		{"if-modified-since later", "GET", []string{"If-Modified-Since", after}, 304, nil, nil},
		{"if-modified-since earlier", "GET", []string{"If-Modified-Since", before}, 0, &Span{0, 100, 200}, nil},
		{"if-unmodified-since earlier", "GET", []string{"If-Unmodified-Since", before}, 412, nil, nil},
		{"checksum", "GET", []string{"x-amz-checksum-mode", "ENABLED"}, 0, &Span{0, 100, 200}, []string{"x-amz-checksum-crc32c", "AQIDBA=="}},
		{"overrides", "GET", nil, 0, &Span{0, 100, 200}, nil},
	}
	for _, tt := range tests {
		target := "/b/k.jpg"
		if tt.name == "overrides" {
			target += "?response-content-type=text%2Fplain"
		}
		r := httptest.NewRequest(tt.method, target, nil)
		for i := 0; i+1 < len(tt.hdr); i += 2 {
			r.Header.Set(tt.hdr[i], tt.hdr[i+1])
		}
		w := httptest.NewRecorder()
		s, done, err := Prepare(w, r, o)
		var pe *Error
		switch {
		case err != nil && errors.As(err, &pe):
			if pe.Status != tt.status {
				t.Errorf("%s: %v, want status %d", tt.name, err, tt.status)
			}
		case err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case done:
			if w.Code != tt.status || tt.span != nil {
				t.Errorf("%s: answered %d, want %d (span %v)", tt.name, w.Code, tt.status, tt.span)
			}
		case tt.span == nil || s != *tt.span:
			t.Errorf("%s: span %+v, want %+v", tt.name, s, tt.span)
		}
		for i := 0; i+1 < len(tt.header); i += 2 {
			if got := w.Header().Get(tt.header[i]); got != tt.header[i+1] {
				t.Errorf("%s: %s %q, want %q", tt.name, tt.header[i], got, tt.header[i+1])
			}
		}
		if tt.name == "overrides" && w.Header().Get("Content-Type") != "text/plain" {
			t.Errorf("response-content-type: %q", w.Header().Get("Content-Type"))
		}
	}
}

// FuzzRequest holds the face's parsing of a request — its operation and
// key, its listing parameters, its Range and preconditions — to what S3
// promises, whatever the request: no panic; an operation name from the
// fixed set; bucket and key as the path names them; a listing page of
// names under the prefix, in order, within max-keys; a range inside the
// object; a precondition step that writes what it says it did.
func FuzzRequest(f *testing.F) {
	f.Add("GET", "/b/k.jpg", "", "bytes=0-9", "", "", "")
	f.Add("GET", "/b", "list-type=2&prefix=a%2F&delimiter=%2F&max-keys=2&start-after=a", "", "", "", "")
	f.Add("GET", "/b", "prefix=..%2F&marker=z&encoding-type=url", "", "", "", "")
	f.Add("GET", "/b", "list-type=2&continuation-token=YnJhbmQxOmEvYg", "", "", "", "")
	f.Add("HEAD", "/b/k", "partNumber=1", "bytes=9223372036854775808-", `"abc"`, "", "")
	f.Add("GET", "/b/"+strings.Repeat("k", 1100), "", "bytes=-18446744073709551616", "", `W/"abc", "x"`, "Sat, 01 Mar 2025 12:00:00 GMT")
	f.Add("PUT", "//b//k", "acl&location", "bytes=5-1", "*", "*", "garbage")
	names := sliceNames{"a", "a/b", "a/b/c.jpg", "a/c", "b.txt", "b/", "c/d/e", "z"}
	f.Fuzz(func(t *testing.T, method, path, query, rng, ifMatch, ifNoneMatch, ifModifiedSince string) {
		r := &http.Request{Method: method, URL: &url.URL{Path: path, RawQuery: query}, Header: http.Header{}}
		o := ParseOp(r)
		if !slices.Contains(opNames(), o.Name) {
			t.Fatalf("operation name %q is not of the fixed set", o.Name)
		}
		if o.Key != "" && strings.TrimPrefix(path, "/") != o.Bucket+"/"+o.Key {
			t.Fatalf("path %q parsed as bucket %q, key %q", path, o.Bucket, o.Key)
		}
		if p, err := ParseListParams(r.URL.Query(), o.Name == "ListObjects"); err == nil {
			if p.MaxKeys < 0 || p.MaxKeys > MaxKeys {
				t.Fatalf("max-keys %d", p.MaxKeys)
			}
			page, err := List(names, p)
			if err == nil {
				if len(page.Contents)+len(page.CommonPrefixes) > p.MaxKeys {
					t.Fatalf("%d keys and %d prefixes over max-keys %d", len(page.Contents), len(page.CommonPrefixes), p.MaxKeys)
				}
				for i, n := range page.Contents {
					if !strings.HasPrefix(names[n], p.Prefix) || (i > 0 && n <= page.Contents[i-1]) {
						t.Fatalf("listed %v of %v under prefix %q", page.Contents, names, p.Prefix)
					}
				}
			}
		}
		for _, size := range []int64{0, 1, 100, 1 << 40} {
			start, n, out := ParseRange(rng, size)
			if out == RangeSatisfiable && (start < 0 || n < 1 || start+n > size) {
				t.Fatalf("range %q of %d bytes: %d+%d", rng, size, start, n)
			}
		}
		r.Header.Set("Range", rng)
		r.Header.Set("If-Match", ifMatch)
		r.Header.Set("If-None-Match", ifNoneMatch)
		r.Header.Set("If-Modified-Since", ifModifiedSince)
		w := httptest.NewRecorder()
		s, done, err := Prepare(w, r, ObjectMeta{ETag: `"abc"`, Modified: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), Size: 100, Ext: "jpg"})
		switch {
		case err != nil:
			var pe *Error
			if !errors.As(err, &pe) || (pe.Status != http.StatusPreconditionFailed && pe.Status != http.StatusRequestedRangeNotSatisfiable) {
				t.Fatalf("Prepare: %v", err)
			}
		case done:
			if w.Code != http.StatusNotModified && w.Header().Get("Content-Length") != strconv.FormatInt(s.N, 10) {
				t.Fatalf("answered %d with Content-Length %q for a span of %d", w.Code, w.Header().Get("Content-Length"), s.N)
			}
		default:
			if s.Start < 0 || s.N < 1 || s.Start+s.N > 100 || (s.Status != http.StatusOK && s.Status != http.StatusPartialContent) {
				t.Fatalf("span %+v", s)
			}
		}
	})
}
