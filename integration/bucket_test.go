package integration

import (
	"bytes"
	"context"
	"testing"

	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

func TestEnsureBucket(t *testing.T) {
	ctx := context.Background()
	srv := miniotest.ForTest(t)
	url := "s3://made-by-brand/demo"
	for range 2 { // the second call finds the bucket and does nothing
		if err := s3backend.EnsureBucket(ctx, url, srv.Config()); err != nil {
			t.Fatal(err)
		}
	}
	st, err := s3backend.Open(ctx, url, srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(ctx, "x", bytes.NewReader([]byte("hello")), 5); err != nil {
		t.Fatalf("put into the new bucket: %v", err)
	}
	dir := t.TempDir() + "/a/b"
	if err := s3backend.EnsureBucket(ctx, dir, s3backend.Config{}); err != nil {
		t.Fatal(err)
	}
}
