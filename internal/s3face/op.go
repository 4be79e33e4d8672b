package s3face

import (
	"net/http"
	"strings"

	"github.com/brandgw/brand/internal/s3face/s3proto"
)

// maxKey is the longest key S3 takes, in bytes; a longer one is refused
// before any store is asked (a local file system would fail on it, and
// its error would carry the whole key to the log).
const maxKey = 1024

// keyTooLong is S3's answer to a key over maxKey.
var keyTooLong = s3proto.ErrorCode{Code: "KeyTooLongError", Status: http.StatusBadRequest}

// op is one S3 operation the face answers.
type op struct {
	name, bucket, key string
}

// unsupportedBucketQuery and unsupportedObjectQuery are the sub-resources
// of S3's read API the face does not model; a request for one is answered
// NotImplemented rather than with a listing or an object it did not ask
// for. partNumber asks for one part of a multipart upload, which the face
// has no record of.
var (
	unsupportedBucketQuery = []string{"acl", "policy", "policyStatus", "cors", "lifecycle", "versioning", "tagging", "uploads",
		"versions", "object-lock", "encryption", "website", "logging", "notification", "replication", "accelerate",
		"requestPayment", "ownershipControls", "publicAccessBlock", "analytics", "metrics", "inventory",
		"intelligent-tiering", "delete", "select"}
	unsupportedObjectQuery = []string{"acl", "tagging", "torrent", "attributes", "retention", "legal-hold", "uploadId",
		"uploads", "select", "restore", "versionId", "partNumber"}
)

// writeVerbs name the writes in logs and metrics, from a fixed set: a
// method is the client's to choose.
var writeVerbs = map[string]string{http.MethodPut: "Put", http.MethodPost: "Post", http.MethodDelete: "Delete",
	http.MethodPatch: "Patch", http.MethodOptions: "Options"}

// parseOp names the operation a path-style request asks for. The name is
// from a fixed set whatever the request: it labels a metric.
func parseOp(r *http.Request) op {
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
		verb := writeVerbs[r.Method]
		if verb == "" {
			verb = "Other"
		}
		switch {
		case key != "":
			return op{name: verb + "Object", bucket: bucket, key: key}
		case bucket != "":
			return op{name: verb + "Bucket", bucket: bucket}
		}
		return op{name: verb}
	}
	switch {
	case bucket == "":
		return op{name: "ListBuckets"}
	case key == "":
		if sub := has(unsupportedBucketQuery); sub != "" {
			return op{name: "Bucket?" + sub, bucket: bucket}
		}
		switch {
		case q.Has("location"):
			return op{name: "GetBucketLocation", bucket: bucket}
		case r.Method == http.MethodHead:
			return op{name: "HeadBucket", bucket: bucket}
		case q.Get("list-type") == "2":
			return op{name: "ListObjectsV2", bucket: bucket}
		}
		return op{name: "ListObjects", bucket: bucket}
	}
	if sub := has(unsupportedObjectQuery); sub != "" {
		return op{name: "Object?" + sub, bucket: bucket, key: key}
	}
	if r.Method == http.MethodHead {
		return op{name: "HeadObject", bucket: bucket, key: key}
	}
	return op{name: "GetObject", bucket: bucket, key: key}
}

// notImplemented answers an operation the face does not model.
func notImplemented(o op) error {
	return s3proto.ErrorOf(s3proto.NotImplemented, o.name+" is not implemented by Brand's S3 face")
}
