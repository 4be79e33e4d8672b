package miniotest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// Environment variables naming an external S3 server for tests, used
// instead of starting MinIO (e.g. a CI service container).
const (
	EnvEndpoint  = "BRAND_S3_ENDPOINT" // host:port or http(s)://host:port
	EnvAccessKey = "BRAND_S3_ACCESS_KEY"
	EnvSecretKey = "BRAND_S3_SECRET_KEY"
)

// ForTest returns a server for the test: the external one the BRAND_S3_*
// variables name if they are set, otherwise a new MinIO with its data in
// t.TempDir(), stopped by t.Cleanup. If no server is available it skips the
// test with the command that installs MinIO, or fails it when CI=true, so a
// CI run can never pass by skipping.
func ForTest(t testing.TB) *Server {
	t.Helper()
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		s, err := external(ep, os.Getenv(EnvAccessKey), os.Getenv(EnvSecretKey))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	bin := BinaryPath()
	if bin == "" || !isExecutable(bin) {
		msg := "miniotest: no MinIO binary at " + quoteOrUnknown(bin) + "; install it with: " + InstallCommand() +
			" (or set " + EnvEndpoint + ", " + EnvAccessKey + " and " + EnvSecretKey + " to use an existing server)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir() // registered first, so removed after the server stops
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	s, err := Start(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("miniotest: close: %v", err)
		}
	})
	return s
}

// NewBucket creates a bucket with a fresh name for the test and returns the
// name. The name is unique, so tests sharing an external server do not see
// each other's objects; buckets are not removed (the server of a local test
// is discarded with its data).
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	name := "brand-" + bucketSafe(t.Name(), 40) + "-" + hex.EncodeToString(b)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.MakeBucket(ctx, name); err != nil {
		t.Fatal(err)
	}
	return name
}

// bucketSafe maps a test name onto the characters bucket names allow
// (lower-case letters, digits, hyphens), at most n of them.
func bucketSafe(name string, n int) string {
	var b strings.Builder
	for _, r := range strings.ToLower(name) {
		if b.Len() == n {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
		case b.Len() > 0 && !strings.HasSuffix(b.String(), "-"):
			b.WriteByte('-')
		}
	}
	return strings.Trim(b.String(), "-")
}

// external describes a server somebody else runs.
func external(endpoint, accessKey, secretKey string) (*Server, error) {
	if accessKey == "" || secretKey == "" {
		return nil, fmt.Errorf("miniotest: %s is set but %s or %s is not", EnvEndpoint, EnvAccessKey, EnvSecretKey)
	}
	s := &Server{Endpoint: endpoint, AccessKey: accessKey, SecretKey: secretKey}
	if strings.Contains(endpoint, "://") {
		u, err := url.Parse(endpoint)
		if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
			return nil, fmt.Errorf("miniotest: %s=%q: want host:port or http(s)://host:port", EnvEndpoint, endpoint)
		}
		s.Endpoint, s.secure = u.Host, u.Scheme == "https"
	}
	return s, nil
}

// InstallCommand returns the command that installs the pinned MinIO:
// scripts/ensure-minio.sh, by absolute path when this source tree is
// available.
func InstallCommand() string {
	const rel = "scripts/ensure-minio.sh"
	_, file, _, ok := runtime.Caller(0)
	if ok && filepath.IsAbs(file) {
		script := filepath.Join(filepath.Dir(file), "..", "..", filepath.FromSlash(rel))
		if _, err := os.Stat(script); err == nil {
			return script
		}
	}
	return rel + " (from the repository root)"
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

func quoteOrUnknown(p string) string {
	if p == "" {
		return "(unknown path: neither BRAND_MINIO_BIN nor a user cache directory is set)"
	}
	return p
}
