package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/dataset/stored"
	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/gen/photos"
	"github.com/brandgw/brand/internal/server/idleconns"
	"github.com/brandgw/brand/s3backend"
)

// runDemo is Brand with nothing configured: it generates a small dataset
// of photo-like JPEGs with class labels, packs it into a local store,
// serves it and prints commands to try, the tensors of a transform among
// them. A second run reuses the packed dataset.
func runDemo(ctx context.Context, env *cli.Env, args []string) error {
	var f serveFlags
	var dir, dst string
	var samples, side int
	var createBucket, packOnly bool
	var chunk cli.ByteSize
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	f.register(fs, defaultListen)
	cache, _ := os.UserCacheDir()
	if cache == "" {
		cache = os.TempDir()
	}
	fs.StringVar(&dir, "dir", filepath.Join(cache, "brand", "demo"), "where the demo dataset is generated and packed")
	fs.IntVar(&samples, "samples", 2000, "photos to generate, each with a class label")
	fs.IntVar(&side, "image-side", photos.DefaultMaxSide, "the photos' longest side in pixels: each side is drawn between half of it and it")
	chunk = 4 << 20
	fs.Var(&chunk, "chunk-size", "target chunk size for the demo dataset")
	fs.StringVar(&dst, "dst", "", "pack the demo dataset into this store URL (e.g. s3://bucket/demo) instead of a local directory")
	fs.BoolVar(&createBucket, "create-bucket", false, "with an s3:// --dst, create the bucket if it does not exist")
	fs.BoolVar(&packOnly, "pack-only", false, "pack the dataset (if not packed yet) and exit without serving")
	// The demo's own defaults: what `brand help demo` shows must be what
	// it uses, and it serves only the dataset it generates.
	f.cacheSize = 256 << 20
	fs.Lookup("cache-size").DefValue = f.cacheSize.String()
	fs.Lookup("dataset").Usage = "not accepted by demo, which serves the dataset it generates (use brand serve)"
	if err := cli.ParseFlags(fs, env, args, "brand demo [flags]"); err != nil {
		return err
	}
	if len(f.datasets) > 0 {
		return usageError(env, "demo", "--dataset is not accepted: demo serves the dataset it generates; use `brand serve --dataset` to serve others")
	}
	if samples <= 0 || side <= 0 || chunk <= 0 {
		return errors.New("--samples, --image-side and --chunk-size must be positive")
	}
	log, flush, err := f.logger(env.Stderr)
	if err != nil {
		return err
	}
	defer flush()
	tree := photos.Tree{Samples: samples, MaxSide: side, Classes: 10, Seed: 1}
	storeURL := dst
	if storeURL == "" {
		storeURL = filepath.Join(dir, fmt.Sprintf("photos-%d-%d-%d", samples, side, int64(chunk)))
		if err := os.MkdirAll(storeURL, 0o755); err != nil {
			return err
		}
	}
	if createBucket {
		if err := s3backend.EnsureBucket(ctx, storeURL, f.s3.Config()); err != nil {
			return err
		}
	}
	store, err := s3backend.Open(ctx, storeURL, f.s3.Config())
	if err != nil {
		return err
	}
	if _, err := stored.ReadIndex(ctx, store); err != nil {
		if !errors.Is(err, s3backend.ErrNotFound) {
			return err
		}
		src := filepath.Join(dir, fmt.Sprintf("src-photos-%d-%d", samples, side))
		fmt.Fprintf(env.Stderr, "generating %d photos in %s ...\n", samples, src)
		if err := os.RemoveAll(src); err != nil {
			return err
		}
		if err := tree.Write(ctx, src); err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "packing into %s ...\n", storeURL)
		res, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: int64(chunk), Shuffle: true, Seed: 1, Name: "demo", Tool: "brand " + version})
		if err != nil {
			return err
		}
		fmt.Fprintf(env.Stderr, "packed %d samples into %d chunks (%d bytes)\n", res.Index.NumSamples(), res.Index.NumChunks(), res.Index.TotalBytes())
		_ = os.RemoveAll(src) // the chunks hold everything now
	}
	if packOnly {
		fmt.Fprintf(env.Stdout, "demo dataset ready at %s\n", storeURL)
		return nil
	}
	f.datasets = datasetFlags{"demo=" + storeURL}
	cfg, err := f.gatewayConfig(log)
	if err != nil {
		return err
	}
	if err := f.applyMemoryLimit(log, env.Getenv, &cfg); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("%w (another brand demo running? try --listen 127.0.0.1:0)", err)
	}
	base := "http://" + ln.Addr().String()
	return serve(ctx, log, cfg, ln, idleconns.DefaultMax, stopping{drain: f.shutdownTimeout}, nil, func(*gateway.Gateway) {
		fmt.Fprint(env.Stdout, demoCommands(samples, base))
	})
}

// demoCommands is what the demo prints once it serves: commands to try,
// the tensors of a transform among them, and a PyTorch loop.
func demoCommands(samples int, base string) string {
	return strings.NewReplacer("BASE", base, "SAMPLES", strconv.Itoa(samples)).Replace(`
Brand demo is serving SAMPLES photos at BASE

Try:
  curl -s BASE/datasets
  curl -s BASE/epoch/0
  curl -s 'BASE/epoch/0/batch/0?format=json' | head -30
  curl -s BASE/epoch/0/batch/0 | tar -tvf - | head
  curl -s 'BASE/epoch/1/batch/3?batch_size=8&world=2&rank=1' | tar -tf -
  curl -s BASE/metrics | grep brand_cache

Tensors, decoded and augmented by the gateway (.npy, uint8, 3×224×224):
  curl -s 'BASE/epoch/0/batch/0?transform=imagenet-train' | tar -tvf - | head -4

Python (standard library only):
  python3 -c "
import io, tarfile, urllib.request
for m in range(3):
    with urllib.request.urlopen('BASE/epoch/0/batch/%d' % m) as r:
        t = tarfile.open(fileobj=io.BytesIO(r.read()))
        print('batch', m, [x.name for x in t.getmembers()][:4])
"

PyTorch (pip install ./python, or PYTHONPATH=python in this repository):
  import brand
  ds = brand.Tensors("BASE", "demo", transform="imagenet-train", batch_size=32, seed=7)
  for b in ds.loader(num_workers=2):
      print(b.images.shape, b.labels[:4])  # torch.Size([32, 3, 224, 224]) uint8, int64 labels

Press Ctrl-C to stop.
`)
}
