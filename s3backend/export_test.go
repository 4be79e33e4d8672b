package s3backend

import (
	"net/http"
	"testing"
)

// DefaultTransport exposes the default transport to the black-box tests,
// which count its dials.
func DefaultTransport(parallel int) *http.Transport { return newTransport(parallel) }

// CopyTree copies the directory src to dst file by file as `cp -r` does:
// the same bytes under new inodes and modification times.
func CopyTree(t *testing.T, src, dst string) { copyTree(t, src, dst, newMtime) }
