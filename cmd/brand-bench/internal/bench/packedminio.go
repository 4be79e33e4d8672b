package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// syntheticInMinIO is a MinIO started over workDir/NAME-minio holding,
// in bucket NAME, a synthetic dataset of spec packed shuffled in chunks
// of chunkSize: packed once, and read back by a later run over the same
// work directory. It returns the server (the caller closes it), the
// dataset's s3:// URL and its index.
func syntheticInMinIO(ctx context.Context, workDir, name string, spec synth.Spec, chunkSize int64) (*miniotest.Server, string, *chunkindex.Index, error) {
	srv, err := miniotest.Start(ctx, filepath.Join(workDir, name+"-minio"))
	if err != nil {
		return nil, "", nil, err
	}
	fail := func(err error) (*miniotest.Server, string, *chunkindex.Index, error) {
		srv.Close()
		return nil, "", nil, err
	}
	if err := srv.MakeBucket(ctx, name); err != nil {
		return fail(err)
	}
	prefix := fmt.Sprintf("packed-%d-%d-%d-%d", spec.Samples, spec.MeanBytes, chunkSize, spec.Seed)
	store, err := s3backend.NewS3(srv.Config(), name, prefix)
	if err != nil {
		return fail(fmt.Errorf("bench: %w", err))
	}
	ix, err := stored.ReadIndex(ctx, store)
	if errors.Is(err, s3backend.ErrNotFound) {
		src := filepath.Join(workDir, name+"-src")
		_ = os.RemoveAll(src)
		if err := spec.WriteTree(src); err != nil {
			return fail(fmt.Errorf("bench: %w", err))
		}
		res, perr := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: chunkSize, Shuffle: true, Seed: spec.Seed, Parallel: 2, Name: name, Overwrite: true})
		_ = os.RemoveAll(src)
		if perr != nil {
			return fail(fmt.Errorf("bench: packing the dataset: %w", perr))
		}
		ix, err = res.Index, nil
	}
	if err != nil {
		return fail(fmt.Errorf("bench: reading the index: %w", err))
	}
	return srv, "s3://" + name + "/" + prefix, ix, nil
}
