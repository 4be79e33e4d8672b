package cli

import (
	"flag"
	"fmt"
	"math"

	"github.com/dustin/go-humanize"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/s3backend"
)

// ByteSize is a flag value that accepts sizes such as 4GiB, 512MiB, 1GB or
// 1000000 (humanize.ParseBytes; not exponents such as 1e9).
type ByteSize int64

func (b *ByteSize) String() string { return humanize.IBytes(uint64(*b)) }

// Set parses s, refusing sizes beyond 2^62 so that sums of a few never
// overflow an int64.
func (b *ByteSize) Set(s string) error {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return fmt.Errorf("not a size (try 64MiB or 4GiB): %q", s)
	}
	if n > 1<<62 {
		return fmt.Errorf("size %q is too large", s)
	}
	*b = ByteSize(n)
	return nil
}

// S3Flags are the object-store flags of every command that opens a store,
// in both binaries, so that the benchmark's limits read the store as the
// gateway under test does. Flags left unset fall back to the standard
// AWS_* variables (see s3backend.ConfigFromEnv).
type S3Flags struct {
	endpoint, region string
	tls              bool
	parallel         int
	partSize         ByteSize
}

// Register adds the --s3-* flags to fs.
func (f *S3Flags) Register(fs *flag.FlagSet) {
	fs.StringVar(&f.endpoint, "s3-endpoint", "", "S3 endpoint host:port or URL (default $AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL)")
	fs.StringVar(&f.region, "s3-region", "", "S3 region (default $AWS_REGION or $AWS_DEFAULT_REGION)")
	fs.BoolVar(&f.tls, "s3-tls", false, "use TLS for an endpoint given without a scheme")
	fs.IntVar(&f.parallel, "s3-parallel", 0, "concurrent ranged GETs per chunk read (default 4)")
	f.partSize = 0
	fs.Var(&f.partSize, "s3-part-size", "about the size of a ranged GET: a chunk read is split into the whole number of parts nearest to its size (default 16MiB)")
}

// Config is the store's configuration: the environment's, overridden by
// the flags that were given.
func (f *S3Flags) Config() s3backend.Config {
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

// PriceFlags are a store's prices, for a plan's bill (api.Prices):
// `brand serve`'s (GET /plan) and `brand plan`'s.
type PriceFlags struct {
	GETs, GiB, CrossGiB float64
	Currency            string
}

// Register adds the price flags to fs.
func (p *PriceFlags) Register(fs *flag.FlagSet) {
	fs.Float64Var(&p.GETs, "price-per-1000-gets", 0, "the store's price of 1,000 GET requests, for a plan's bill (S3 Standard in us-east-1: 0.0004)")
	fs.Float64Var(&p.GiB, "price-per-gib", 0, "the price of a GiB read out of the store, for a plan's bill (S3 to the internet: 0.09; within its region: 0)")
	fs.Float64Var(&p.CrossGiB, "price-cross-node-per-gib", 0, "the price of a GiB sent from node to node, for a cluster plan's bill (across AWS availability zones: 0.02, 0.01 each way)")
	fs.StringVar(&p.Currency, "price-currency", "USD", "the prices' currency, as the bill names it")
}

// Check refuses a price that is not a finite number ≥ 0, naming its
// flag.
func (p PriceFlags) Check() error {
	for _, c := range []struct {
		flag string
		v    float64
	}{{"--price-per-1000-gets", p.GETs}, {"--price-per-gib", p.GiB}, {"--price-cross-node-per-gib", p.CrossGiB}} {
		if math.IsNaN(c.v) || math.IsInf(c.v, 0) || c.v < 0 {
			return fmt.Errorf("%s %v: a price is a finite number ≥ 0", c.flag, c.v)
		}
	}
	return nil
}

// Prices are the flags' prices; none (and no currency) when every price
// is zero.
func (p PriceFlags) Prices() api.Prices {
	if p.GETs == 0 && p.GiB == 0 && p.CrossGiB == 0 {
		return api.Prices{}
	}
	return api.Prices{GETsPer1000: p.GETs, PerGiB: p.GiB, CrossNodePerGiB: p.CrossGiB, Currency: p.Currency}
}
