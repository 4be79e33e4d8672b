package s3face

import (
	"context"
	"strings"
	"testing"

	"github.com/minio/minio-go/v7"
	"github.com/rs/zerolog"

	"github.com/brandgw/brand/internal/s3face/s3auth"
	"github.com/brandgw/brand/internal/testsupport/s3test"
)

// TestKeyScopes: a key reads the buckets its datasets= covers and no
// other (AccessDenied naming its scope, never its secret), lists those
// alone, and writes nothing, whatever it covers (the face is read-only).
func TestKeyScopes(t *testing.T) {
	d := packTar(t, t.TempDir(), 2, 4, true)
	creds, err := s3auth.ParseCredentials(strings.NewReader(testID + " " + testSecret + "\n" +
		"in-scope in-scope-secret datasets=te*\nout-of-scope out-of-scope-secret datasets=web-*,books name=trainers\n"))
	if err != nil {
		t.Fatal(err)
	}
	face := startTarFace(t, s3test.Wrap(d.store), Config{ReadAhead: -1, Credentials: creds}, zerolog.Nop())
	ctx := context.Background()
	var key string
	for o := range face.mc.ListObjects(ctx, "test", minio.ListObjectsOptions{Recursive: true, MaxKeys: 1}) {
		key = o.Key
		break
	}
	tests := []struct {
		id, secret string
		reads      bool
	}{
		{testID, testSecret, true},
		{"in-scope", "in-scope-secret", true},
		{"out-of-scope", "out-of-scope-secret", false},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			mc := faceClient(t, face.endpoint, tt.id, tt.secret)
			buckets, err := mc.ListBuckets(ctx)
			if err != nil || len(buckets) != map[bool]int{true: 1, false: 0}[tt.reads] {
				t.Errorf("ListBuckets: %v %+v", err, buckets)
			}
			_, err = getObject(mc, "test", key, minio.GetObjectOptions{})
			if tt.reads != (err == nil) {
				t.Fatalf("GetObject: %v", err)
			}
			if !tt.reads {
				msg := minio.ToErrorResponse(err).Message
				if s3Code(err) != "AccessDenied" || !strings.Contains(msg, "trainers") || !strings.Contains(msg, "web-*,books") || strings.Contains(msg, tt.secret) {
					t.Errorf("GetObject out of scope: %s %q", s3Code(err), msg)
				}
				for _, list := range []func() error{
					func() error { _, err := mc.StatObject(ctx, "test", key, minio.StatObjectOptions{}); return err },
					func() error { _, err := mc.BucketExists(ctx, "test"); return err },
					func() error { return (<-mc.ListObjects(ctx, "test", minio.ListObjectsOptions{})).Err },
				} {
					if err := list(); minio.ToErrorResponse(err).StatusCode != 403 {
						t.Errorf("out of scope: %v, want 403", err)
					}
				}
			}
			if _, err := mc.PutObject(ctx, "test", "new.txt", strings.NewReader("x"), 1, minio.PutObjectOptions{}); s3Code(err) != "AccessDenied" {
				t.Errorf("PutObject: %v", err)
			}
		})
	}
}
