package s3backend

import (
	"context"
	"fmt"
	"os"

	"github.com/minio/minio-go/v7"
)

// EnsureBucket makes sure the place a store URL points at exists: the bucket
// of an s3:// URL (created in cfg.Region if missing) or the directory of a
// local one. Brand's one-shot setup jobs (the dev stack's packer) use it;
// serving never creates anything.
func EnsureBucket(ctx context.Context, rawURL string, cfg Config) error {
	st, err := Open(ctx, rawURL, cfg)
	if err != nil {
		return err
	}
	switch st := st.(type) {
	case *S3:
		ok, err := st.core.BucketExists(ctx, st.bucket)
		if err != nil {
			return fmt.Errorf("s3backend: checking bucket %s: %w", st.bucket, err)
		}
		if ok {
			return nil
		}
		if err := st.core.MakeBucket(ctx, st.bucket, minio.MakeBucketOptions{Region: cfg.Region}); err != nil {
			return fmt.Errorf("s3backend: creating bucket %s: %w", st.bucket, err)
		}
		return nil
	case *Local:
		return os.MkdirAll(st.Dir(), 0o755)
	default:
		return fmt.Errorf("s3backend: cannot create the location of %T", st)
	}
}
