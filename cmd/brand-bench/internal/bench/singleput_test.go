package bench

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// TestSinglePut: --parquet-single-put uploads an object of over 16 MiB in
// one PUT (an ETag without a part count), where the store's Put uploads it
// in parts.
func TestSinglePut(t *testing.T) {
	srv := miniotest.ForTest(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bucket := srv.NewBucket(t)
	body := bytes.Repeat([]byte("parquet!"), (17<<20)/8)
	st, err := s3backend.Open(ctx, "s3://"+bucket+"/parquet", srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	r := &formatsRun{countedStore: &countedStore{srv: srv}}
	one, err := r.singlePutIn(st, bucket, "parquet")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		st    s3backend.Store
		parts bool
	}{{"store", st, true}, {"single", one, false}} {
		if _, err := tt.st.Put(ctx, tt.name, bytes.NewReader(body), int64(len(body))); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		info, err := st.Stat(ctx, tt.name)
		if err != nil {
			t.Fatal(err)
		}
		if info.Size != int64(len(body)) || strings.Contains(info.ETag, "-") != tt.parts {
			t.Errorf("%s: %+v; want %d bytes, uploaded in parts: %v", tt.name, info, len(body), tt.parts)
		}
	}
}
