// Package s3proto holds the parts of the S3 protocol Brand's S3 face
// speaks that do not depend on the gateway: the operation a request asks
// for (ParseOp), the XML of listings and errors, the listing algorithm
// over a sorted set of names, Range headers and conditional requests and
// the one step that answers them for an object of either kind of bucket
// (Prepare), each with S3's own semantics so that unchanged clients
// (boto3, the AWS CLI, minio-go) read through the face as they read S3.
//
// Only what a read-only face needs is modelled: ListBuckets,
// ListObjects (v1 and v2), GetBucketLocation, HeadBucket, GetObject and
// HeadObject. Versioning, multipart parts (partNumber), ACLs and every
// write are not; the handler answers them NotImplemented or AccessDenied.
//
// It imports the standard library alone, and keeps it so: the fuzzing of
// a request's parsing (FuzzRequest) instruments every package its test
// binary depends on, and here that is not the gateway.
package s3proto
