// Package integration holds Brand's end-to-end tests against a real S3
// server: a pinned MinIO that internal/testsupport/miniotest starts on loopback
// (install it with scripts/ensure-minio.sh; scripts/test.sh does). With
// CI=true a missing server fails these tests; elsewhere they skip with the
// command to install it. So do the other programs some of them run:
// DuckDB's node package, which writes Parquet as a second writer beside
// arrow-go (scripts/ensure-duckdb.sh); Hugging Face tokenizers' node
// package, the reference a tokenizer.json's IDs are held to
// (scripts/ensure-hf-tokenizers.sh); a Python with numpy and zstd, for
// format/mds's MDS writer (scripts/ensure-numpy.sh), with torch, for
// PyTorch's DataLoader over the Python client (scripts/test.sh installs
// it), with boto3, and the AWS CLI, for the S3 face
// (scripts/ensure-s3-clients.sh), and with Pillow, which writes the
// progressive JPEGs the memory test decodes (scripts/ensure-pil.sh).
package integration
