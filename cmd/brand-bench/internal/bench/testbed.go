package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"golang.org/x/sync/errgroup"

	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
	"github.com/brandgw/brand/s3backend"
)

// testbed is the S3 server and the data every configuration reads: the
// packed dataset (chunks and index) that Brand, the limits and the
// WebDataset baseline read, and the same samples as individual objects for
// the per-object baseline, under separate prefixes of one bucket.
type testbed struct {
	cfg  Config
	srv  *miniotest.Server
	mc   *minio.Client
	spec synth.Spec

	datasetPrefix string // the packed dataset's root in the bucket
	objectPrefix  string // the per-sample objects
	store         *s3backend.S3
	index         *chunkindex.Index
	objects       []object
}

// object is one per-sample object.
type object struct {
	key  string
	size int64
}

// newTestbed connects to srv and makes sure the data is there, generating
// and uploading what an earlier run did not leave behind.
func newTestbed(ctx context.Context, cfg Config, srv *miniotest.Server) (*testbed, error) {
	tb := &testbed{
		cfg:           cfg,
		srv:           srv,
		spec:          synth.Spec{Samples: cfg.Dataset.Samples, MeanBytes: cfg.Dataset.MeanBytes, Classes: 100, Seed: cfg.Dataset.Seed},
		datasetPrefix: fmt.Sprintf("dataset-%d-%d-%d-%d", cfg.Dataset.Samples, cfg.Dataset.MeanBytes, cfg.Dataset.ChunkSize, cfg.Dataset.Seed),
		objectPrefix:  fmt.Sprintf("objects-%d-%d-%d", cfg.Dataset.Samples, cfg.Dataset.MeanBytes, cfg.Dataset.Seed),
	}
	var err error
	tb.mc, err = minio.New(srv.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(srv.AccessKey, srv.SecretKey, ""),
		Secure:       strings.HasPrefix(srv.URL(), "https://"),
		Region:       "us-east-1",
		BucketLookup: minio.BucketLookupPath,
		Transport:    newTransport(128),
	})
	if err != nil {
		return nil, fmt.Errorf("bench: S3 client: %w", err)
	}
	if err := srv.MakeBucket(ctx, cfg.Bucket); err != nil {
		return nil, err
	}
	if tb.store, err = s3backend.NewS3(srv.Config(), cfg.Bucket, tb.datasetPrefix); err != nil {
		return nil, fmt.Errorf("bench: dataset store: %w", err)
	}
	if err := tb.ensureDataset(ctx); err != nil {
		return nil, err
	}
	if cfg.runs(GroupBaselines) || cfg.runs(GroupPython) {
		if err := tb.ensureObjects(ctx); err != nil {
			return nil, err
		}
	}
	return tb, nil
}

// newTransport returns an HTTP/1.1 transport for loopback benchmarking
// that keeps enough idle connections for conns concurrent requests and
// never asks for compression.
func newTransport(conns int) *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = conns + 16
	t.MaxIdleConnsPerHost = conns + 16
	t.DisableCompression = true
	t.ForceAttemptHTTP2 = false
	return t
}

// ensureDataset packs the synthetic dataset into the bucket unless an
// earlier run already did.
func (tb *testbed) ensureDataset(ctx context.Context) error {
	ix, err := stored.ReadIndex(ctx, tb.store)
	if err == nil {
		tb.index = ix
		tb.logf("reusing the packed dataset at s3://%s/%s", tb.cfg.Bucket, tb.datasetPrefix)
		return nil
	}
	if !errors.Is(err, s3backend.ErrNotFound) {
		return fmt.Errorf("bench: reading the dataset index: %w", err)
	}
	src := filepath.Join(tb.cfg.WorkDir, "src")
	if err := os.RemoveAll(src); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(src) // the chunks hold everything once packed
	start := time.Now()
	tb.logf("generating %d synthetic samples (mean %s) in %s", tb.cfg.Dataset.Samples, sizeString(tb.cfg.Dataset.MeanBytes), src)
	if err := tb.spec.WriteTree(src); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	tb.logf("packing into %s chunks at s3://%s/%s", sizeString(tb.cfg.Dataset.ChunkSize), tb.cfg.Bucket, tb.datasetPrefix)
	res, err := dataset.Pack(ctx, src, tb.store, dataset.PackOptions{
		ChunkSize: tb.cfg.Dataset.ChunkSize, Shuffle: true, Seed: tb.cfg.Dataset.Seed, Parallel: 2, Name: "bench", Overwrite: true,
	})
	if err != nil {
		return fmt.Errorf("bench: packing the dataset: %w", err)
	}
	tb.index = res.Index
	tb.logf("packed %d samples into %d chunks (%s) in %s", res.Index.NumSamples(), res.Index.NumChunks(),
		sizeString(res.Index.TotalBytes()), time.Since(start).Round(time.Second))
	return nil
}

// objectsDone marks a complete upload of the per-sample objects, so that a
// run interrupted halfway uploads them again.
const objectsDone = "_complete"

// ensureObjects uploads every sample's image as an object of its own
// unless an earlier run already did.
func (tb *testbed) ensureObjects(ctx context.Context) error {
	marker := tb.objectPrefix + "/" + objectsDone
	if _, err := tb.mc.StatObject(ctx, tb.cfg.Bucket, marker, minio.StatObjectOptions{}); err == nil {
		return tb.listObjects(ctx)
	}
	start := time.Now()
	tb.logf("uploading %d per-sample objects to s3://%s/%s", tb.cfg.Dataset.Samples, tb.cfg.Bucket, tb.objectPrefix)
	tb.objects = make([]object, tb.cfg.Dataset.Samples)
	var next atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	for range 8 {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= tb.cfg.Dataset.Samples {
					return nil
				}
				s := tb.spec.Sample(i)
				o := object{key: tb.objectPrefix + "/" + s.Key + ".jpg", size: int64(len(s.Image))}
				if _, err := tb.mc.PutObject(gctx, tb.cfg.Bucket, o.key, bytes.NewReader(s.Image), o.size,
					minio.PutObjectOptions{ContentType: "image/jpeg"}); err != nil {
					return fmt.Errorf("bench: uploading %s: %w", o.key, err)
				}
				tb.objects[i] = o
			}
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	n := strconv.Itoa(tb.cfg.Dataset.Samples)
	if _, err := tb.mc.PutObject(ctx, tb.cfg.Bucket, marker, strings.NewReader(n), int64(len(n)), minio.PutObjectOptions{}); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	tb.logf("uploaded in %s", time.Since(start).Round(time.Second))
	return nil
}

// listObjects finds the per-sample objects an earlier run uploaded.
func (tb *testbed) listObjects(ctx context.Context) error {
	tb.objects = tb.objects[:0]
	for info := range tb.mc.ListObjects(ctx, tb.cfg.Bucket, minio.ListObjectsOptions{Prefix: tb.objectPrefix + "/", Recursive: true}) {
		if info.Err != nil {
			return fmt.Errorf("bench: listing the per-sample objects: %w", info.Err)
		}
		if strings.HasSuffix(info.Key, ".jpg") {
			tb.objects = append(tb.objects, object{key: info.Key, size: info.Size})
		}
	}
	if len(tb.objects) != tb.cfg.Dataset.Samples {
		return fmt.Errorf("bench: s3://%s/%s holds %d per-sample objects, want %d; remove it to upload them again",
			tb.cfg.Bucket, tb.objectPrefix, len(tb.objects), tb.cfg.Dataset.Samples)
	}
	tb.logf("reusing the per-sample objects at s3://%s/%s", tb.cfg.Bucket, tb.objectPrefix)
	return nil
}

// chunkKeys returns the dataset's chunk object keys, relative to the
// dataset root, and their sizes.
func (tb *testbed) chunkKeys() ([]string, []int64) {
	n := tb.index.NumChunks()
	keys, sizes := make([]string, n), make([]int64, n)
	for c := range n {
		ch := tb.index.Chunk(c)
		keys[c], sizes[c] = ch.Key, ch.Size
	}
	return keys, sizes
}

func (tb *testbed) logf(format string, args ...any) {
	fmt.Fprintf(tb.cfg.Log, time.Now().Format("15:04:05 ")+format+"\n", args...)
}
