package s3face

import (
	"encoding/base64"
	"encoding/binary"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/brandgw/brand/internal/s3face/s3proto"
)

// object is what a GET or HEAD answers of an object before its bytes,
// whichever kind of bucket holds it.
type object struct {
	etag     string // quoted
	modified time.Time
	size     int64
	ext      string // the name's last extension, without its dot: the content type's
	// crc32c, if set, is answered to x-amz-checksum-mode: ENABLED on a
	// whole object (a dataset file's, from its member table).
	crc32c *uint32
}

// span is the part of an object a GET writes, and its status.
type span struct {
	start, n int64
	status   int
}

// prepare is the step every GET and HEAD takes, of either kind of bucket,
// once it knows the object: it sets the object's headers, evaluates the
// preconditions and the Range header as S3 does, and answers what needs
// no byte of the object — a 304, a HEAD, an empty body — itself (done).
// Otherwise it returns the span to write; the body's Content-Type and
// Content-Length are the writer's to send.
func prepare(w http.ResponseWriter, r *http.Request, o object) (s span, done bool, err error) {
	h := w.Header()
	h.Set("ETag", o.etag)
	h.Set("Last-Modified", o.modified.UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	switch s3proto.CheckPreconditions(r.Header, o.etag, o.modified, r.Method) {
	case s3proto.NotModified:
		w.WriteHeader(http.StatusNotModified)
		return s, true, nil
	case s3proto.ConditionFailed:
		h.Del("ETag")
		h.Del("Last-Modified")
		return s, false, s3proto.ErrorOf(s3proto.PreconditionFailed, "At least one of the pre-conditions you specified did not hold")
	}
	s = span{start: 0, n: o.size, status: http.StatusOK}
	if rh := r.Header.Get("Range"); rh != "" {
		start, n, out := s3proto.ParseRange(rh, o.size)
		switch out {
		case s3proto.RangeUnsatisfiable:
			h.Set("Content-Range", "bytes */"+strconv.FormatInt(o.size, 10))
			return s, false, s3proto.ErrorOf(s3proto.InvalidRange, "The requested range is not satisfiable")
		case s3proto.RangeSatisfiable:
			s = span{start: start, n: n, status: http.StatusPartialContent}
			h.Set("Content-Range", s3proto.ContentRange(start, n, o.size))
		}
	}
	h.Set("Content-Type", contentType(o.ext))
	if o.crc32c != nil && s.status == http.StatusOK && strings.EqualFold(r.Header.Get("x-amz-checksum-mode"), "ENABLED") {
		var c [4]byte
		binary.BigEndian.PutUint32(c[:], *o.crc32c)
		h.Set("x-amz-checksum-crc32c", base64.StdEncoding.EncodeToString(c[:]))
	}
	responseOverrides(h, r.URL.Query())
	if r.Method == http.MethodHead || s.n == 0 {
		h.Set("Content-Length", strconv.FormatInt(s.n, 10))
		w.WriteHeader(s.status)
		return s, true, nil
	}
	return s, false, nil
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
