// Package s3auth verifies AWS Signature Version 4 on the requests of
// Brand's S3 face, so that unchanged S3 clients — boto3, the AWS CLI,
// minio-go, presigned URLs — authenticate to it with key pairs the
// gateway is given (a credentials file, several pairs).
//
// Verified: the Authorization header (AWS4-HMAC-SHA256) and presigned
// URLs (X-Amz-Signature in the query), the request time within 15 minutes
// of the gateway's clock, a presigned URL's expiry, the credential scope's
// region when one is required, and the declared payload hash of a request
// without a body.
//
// Signature Version 2 (header and presigned URLs) is verified too:
// boto3's generate_presigned_url still signs with it by default.
//
// Not verified, by design: the hash of a request body (the face is
// read-only and refuses every request with one before reading it);
// anonymous requests are refused; chunked (STREAMING-*) uploads are
// NotImplemented.
//
// A key reads the buckets its credentials line's datasets= covers
// (Credentials.Grant, internal/server/scope: a token's scope, read alone);
// the face holds each request's bucket to it.
//
// Errors carry S3's code and status (Describe), so that the face answers
// them as S3 does.
package s3auth
