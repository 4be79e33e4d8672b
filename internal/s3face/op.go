package s3face

import (
	"net/http"

	"github.com/brandgw/brand/internal/s3face/s3proto"
)

// maxKey is the longest key S3 takes, in bytes; a longer one is refused
// before any store is asked (a local file system would fail on it, and
// its error would carry the whole key to the log).
const maxKey = 1024

// keyTooLong is S3's answer to a key over maxKey.
var keyTooLong = s3proto.ErrorCode{Code: "KeyTooLongError", Status: http.StatusBadRequest}

// notImplemented answers an operation the face does not model.
func notImplemented(o s3proto.Op) error {
	return s3proto.ErrorOf(s3proto.NotImplemented, o.Name+" is not implemented by Brand's S3 face")
}
