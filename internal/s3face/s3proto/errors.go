package s3proto

import (
	"errors"
	"net/http"
)

// ErrorCode is an S3 error code and the HTTP status S3 answers it with.
type ErrorCode struct {
	Code   string
	Status int
}

// The error codes a read-only S3 face answers.
var (
	AccessDenied       = ErrorCode{"AccessDenied", http.StatusForbidden}
	NoSuchBucket       = ErrorCode{"NoSuchBucket", http.StatusNotFound}
	NoSuchKey          = ErrorCode{"NoSuchKey", http.StatusNotFound}
	InvalidRange       = ErrorCode{"InvalidRange", http.StatusRequestedRangeNotSatisfiable}
	PreconditionFailed = ErrorCode{"PreconditionFailed", http.StatusPreconditionFailed}
	NotImplemented     = ErrorCode{"NotImplemented", http.StatusNotImplemented}
	InvalidArgument    = ErrorCode{"InvalidArgument", http.StatusBadRequest}
	InvalidRequest     = ErrorCode{"InvalidRequest", http.StatusBadRequest}
	InvalidBucketName  = ErrorCode{"InvalidBucketName", http.StatusBadRequest}
	MethodNotAllowed   = ErrorCode{"MethodNotAllowed", http.StatusMethodNotAllowed}
	InternalError      = ErrorCode{"InternalError", http.StatusInternalServerError}
	SlowDown           = ErrorCode{"SlowDown", http.StatusServiceUnavailable}
	ServiceUnavailable = ErrorCode{"ServiceUnavailable", http.StatusServiceUnavailable}
)

// Error is an S3 error response: the body S3 sends, and its status.
type Error struct {
	XMLName   struct{} `xml:"Error"`
	Code      string
	Message   string
	Resource  string `xml:",omitempty"`
	RequestID string `xml:"RequestId,omitempty"`
	Status    int    `xml:"-"`
}

// ErrorOf is an error with code c and message.
func ErrorOf(c ErrorCode, message string) *Error {
	return &Error{Code: c.Code, Status: c.Status, Message: message}
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Is matches another *Error by code, so that errors.Is(err,
// ErrorOf(NoSuchKey, "")) asks "is it a NoSuchKey".
func (e *Error) Is(target error) bool {
	var t *Error
	return errors.As(target, &t) && t.Code == e.Code
}
