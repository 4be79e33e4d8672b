package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/brandgw/brand/internal/bench"
	"github.com/brandgw/brand/s3backend"
)

// runLimit serves one of the benchmark's limits ((a) a reverse proxy, (a′)
// store-and-forward, (a″) the same verifying CRCs, (b) from memory) as a
// process of its own; the run command starts it once per limit, from this
// same executable. See bench.ServeLimit.
func runLimit(ctx context.Context, env *cliEnv, args []string) error {
	var (
		kind, listen, ds string
		s3               s3Flags
	)
	fs := flag.NewFlagSet("limit", flag.ContinueOnError)
	fs.StringVar(&kind, "kind", "", "the limit to serve: "+strings.Join(bench.LimitKinds, ", "))
	fs.StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on")
	fs.StringVar(&ds, "dataset", "", "the packed dataset, s3://bucket/prefix")
	s3.bind(fs)
	if err := parseFlags(fs, env, args, "limit --kind KIND --dataset s3://bucket/prefix [flags]"); err != nil {
		return err
	}
	u, err := url.Parse(ds)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return fmt.Errorf("--dataset %q: want s3://bucket/prefix", ds)
	}
	return bench.ServeLimit(ctx, bench.LimitServerConfig{
		Kind:    kind,
		Backend: s3.config(),
		Bucket:  u.Host,
		Prefix:  strings.Trim(u.Path, "/"),
		Listen:  listen,
		Log:     env.stdout,
	})
}

// s3Flags are the object-store flags of the limit command, the same as
// `brand serve`'s so that a limit reads the store as the gateway does.
// Unset flags fall back to the standard AWS_* variables.
type s3Flags struct {
	endpoint, region string
	tls              bool
	parallel         int
	partSize         byteSize
}

func (f *s3Flags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.endpoint, "s3-endpoint", "", "S3 endpoint host:port or URL (default $AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL)")
	fs.StringVar(&f.region, "s3-region", "", "S3 region (default $AWS_REGION or $AWS_DEFAULT_REGION)")
	fs.BoolVar(&f.tls, "s3-tls", false, "use TLS for an endpoint given without a scheme")
	fs.IntVar(&f.parallel, "s3-parallel", 0, "concurrent ranged GETs per chunk read (default 4)")
	fs.Var(&f.partSize, "s3-part-size", "ranged GET part size (default 16MiB)")
}

func (f *s3Flags) config() s3backend.Config {
	cfg := s3backend.ConfigFromEnv()
	if f.endpoint != "" {
		cfg.Endpoint = f.endpoint
	}
	if f.region != "" {
		cfg.Region = f.region
	}
	if f.tls {
		cfg.Secure = true
	}
	if f.parallel > 0 {
		cfg.Parallel = f.parallel
	}
	if f.partSize > 0 {
		cfg.PartSize = int64(f.partSize)
	}
	return cfg
}
