package gatewaytest

import (
	"bytes"
	"context"
	"io"
	"net/url"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/brandgw/brand/chunkindex"
)

// The key pair of the S3 face in tests.
const (
	S3ID     = "brandtest"
	S3Secret = "brand-test-secret-key"
)

// AddMembers writes the fixture's member table, read from its chunks as
// `brand index` reads them: the S3 face lists a dataset's files from it.
func (f *Fixture) AddMembers(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	var b chunkindex.MembersBuilder
	for c := range f.Index.NumChunks() {
		ch := f.Index.Chunk(c)
		buf := make([]byte, ch.Size)
		if err := f.Store.ReadRange(ctx, ch.Key, "", 0, buf); err != nil {
			t.Fatal(err)
		}
		first, _ := f.Index.ChunkRange(c)
		i := 0
		if _, err := chunkindex.ScanTar(bytes.NewReader(buf), func(s chunkindex.TarSample) error {
			err := b.Add(first+i, s.Files)
			i++
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	enc, err := b.Encode(ctx, f.Index)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Store.Put(ctx, chunkindex.MembersKey, bytes.NewReader(enc), int64(len(enc))); err != nil {
		t.Fatal(err)
	}
}

// S3Client is a minio-go client of the S3 face at endpoint, signing with
// the key pair (id, secret), path-style, retrying once.
func S3Client(t testing.TB, endpoint, id, secret string) *minio.Client {
	t.Helper()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := minio.New(u.Host, &minio.Options{Creds: credentials.NewStaticV4(id, secret, ""), Region: "us-east-1",
		BucketLookup: minio.BucketLookupPath, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// ReadBucketObject reads object name of bucket whole.
func ReadBucketObject(mc *minio.Client, bucket, name string, opts minio.GetObjectOptions) ([]byte, error) {
	obj, err := mc.GetObject(context.Background(), bucket, name, opts)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	return io.ReadAll(obj)
}
