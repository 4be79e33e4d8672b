package s3proto

import (
	"net/http"
	"strings"
)

// Op is the S3 operation a request asks for, and the bucket and key it
// names.
type Op struct {
	Name, Bucket, Key string
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

// ParseOp names the operation a path-style request asks for. The name is
// from a fixed set whatever the request: it labels a metric.
func ParseOp(r *http.Request) Op {
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
			return Op{Name: verb + "Object", Bucket: bucket, Key: key}
		case bucket != "":
			return Op{Name: verb + "Bucket", Bucket: bucket}
		}
		return Op{Name: verb}
	}
	switch {
	case bucket == "":
		return Op{Name: "ListBuckets"}
	case key == "":
		if sub := has(unsupportedBucketQuery); sub != "" {
			return Op{Name: "Bucket?" + sub, Bucket: bucket}
		}
		switch {
		case q.Has("location"):
			return Op{Name: "GetBucketLocation", Bucket: bucket}
		case r.Method == http.MethodHead:
			return Op{Name: "HeadBucket", Bucket: bucket}
		case q.Get("list-type") == "2":
			return Op{Name: "ListObjectsV2", Bucket: bucket}
		}
		return Op{Name: "ListObjects", Bucket: bucket}
	}
	if sub := has(unsupportedObjectQuery); sub != "" {
		return Op{Name: "Object?" + sub, Bucket: bucket, Key: key}
	}
	if r.Method == http.MethodHead {
		return Op{Name: "HeadObject", Bucket: bucket, Key: key}
	}
	return Op{Name: "GetObject", Bucket: bucket, Key: key}
}
