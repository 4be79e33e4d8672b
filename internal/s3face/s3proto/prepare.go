package s3proto

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
)

// ObjectMeta is what a GET or HEAD answers of an object before its bytes,
// whichever kind of bucket holds it.
type ObjectMeta struct {
	ETag     string // quoted
	Modified time.Time
	Size     int64
	Ext      string // the name's last extension, without its dot: the content type's
	// CRC32C, if set, is answered to x-amz-checksum-mode: ENABLED on a
	// whole object (a dataset file's, from its member table).
	CRC32C *uint32
}

// Span is the part of an object a GET writes, and its status.
type Span struct {
	Start, N int64
	Status   int
}

// Prepare is the step every GET and HEAD takes, of either kind of bucket,
// once it knows the object: it sets the object's headers, evaluates the
// preconditions and the Range header as S3 does, and answers what needs
// no byte of the object — a 304, a HEAD, an empty body — itself (done).
// Otherwise it returns the span to write; the body's Content-Type and
// Content-Length are the writer's to send.
func Prepare(w http.ResponseWriter, r *http.Request, o ObjectMeta) (s Span, done bool, err error) {
	h := w.Header()
	h.Set("ETag", o.ETag)
	h.Set("Last-Modified", o.Modified.UTC().Format(http.TimeFormat))
	h.Set("Accept-Ranges", "bytes")
	switch CheckPreconditions(r.Header, o.ETag, o.Modified, r.Method) {
	case NotModified:
		w.WriteHeader(http.StatusNotModified)
		return s, true, nil
	case ConditionFailed:
		h.Del("ETag")
		h.Del("Last-Modified")
		return s, false, ErrorOf(PreconditionFailed, "At least one of the pre-conditions you specified did not hold")
	}
	s = Span{Start: 0, N: o.Size, Status: http.StatusOK}
	if rh := r.Header.Get("Range"); rh != "" {
		start, n, out := ParseRange(rh, o.Size)
		switch out {
		case RangeUnsatisfiable:
			h.Set("Content-Range", "bytes */"+strconv.FormatInt(o.Size, 10))
			return s, false, ErrorOf(InvalidRange, "The requested range is not satisfiable")
		case RangeSatisfiable:
			s = Span{Start: start, N: n, Status: http.StatusPartialContent}
			h.Set("Content-Range", ContentRange(start, n, o.Size))
		}
	}
	h.Set("Content-Type", contentType(o.Ext))
	if o.CRC32C != nil && s.Status == http.StatusOK && strings.EqualFold(r.Header.Get("x-amz-checksum-mode"), "ENABLED") {
		var c [4]byte
		binary.BigEndian.PutUint32(c[:], *o.CRC32C)
		h.Set("x-amz-checksum-crc32c", base64.StdEncoding.EncodeToString(c[:]))
	}
	responseOverrides(h, r.URL.Query())
	if r.Method == http.MethodHead || s.N == 0 {
		h.Set("Content-Length", strconv.FormatInt(s.N, 10))
		w.WriteHeader(s.Status)
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
