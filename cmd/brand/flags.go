package main

import (
	"flag"
	"fmt"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/brandgw/brand/s3backend"
)

// byteSize is a flag value that accepts sizes such as 4GiB, 512MiB or 1e9.
type byteSize int64

func (b *byteSize) String() string { return humanize.IBytes(uint64(*b)) }

func (b *byteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("not a size (try 64MiB or 4GiB): %q", s)
	}
	if n > 1<<62 {
		return fmt.Errorf("size %q is too large", s)
	}
	*b = byteSize(n)
	return nil
}

// s3Flags are the object-store flags shared by every command that opens a
// store. Unset flags fall back to the standard AWS_* variables.
type s3Flags struct {
	endpoint, region string
	tls              bool
	parallel         int
	partSize         byteSize
}

func (f *s3Flags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.endpoint, "s3-endpoint", "", "S3 endpoint host:port or URL (default $AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL)")
	fs.StringVar(&f.region, "s3-region", "", "S3 region (default $AWS_REGION or $AWS_DEFAULT_REGION)")
	fs.BoolVar(&f.tls, "s3-tls", false, "use TLS for an endpoint given without a scheme")
	fs.IntVar(&f.parallel, "s3-parallel", 0, "concurrent ranged GETs per chunk read (default 4)")
	f.partSize = 0
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

// datasetFlags collects repeated --dataset name=URL (or URL) values.
type datasetFlags []string

func (d *datasetFlags) String() string     { return strings.Join(*d, ",") }
func (d *datasetFlags) Set(v string) error { *d = append(*d, v); return nil }
