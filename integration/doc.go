// Package integration holds Brand's end-to-end tests against a real S3
// server: a pinned MinIO that internal/miniotest starts on loopback
// (install it with scripts/ensure-minio.sh; scripts/test.sh does). With
// CI=true a missing server fails these tests; elsewhere they skip with the
// command to install it.
package integration
