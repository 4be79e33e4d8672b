package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/brandgw/brand/cmd/brand-bench/internal/bench"
	"github.com/brandgw/brand/internal/cli"
)

// runLimit serves one of the benchmark's limits ((a) a reverse proxy, (a′)
// store-and-forward, (a″) the same verifying CRCs, (b) from memory) as a
// process of its own; the run command starts it once per limit, from this
// same executable. See bench.ServeLimit.
func runLimit(ctx context.Context, env *cli.Env, args []string) error {
	var (
		kind, listen, ds string
		s3               cli.S3Flags
	)
	fs := flag.NewFlagSet("limit", flag.ContinueOnError)
	fs.StringVar(&kind, "kind", "", "the limit to serve: "+strings.Join(bench.LimitKinds, ", "))
	fs.StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on")
	fs.StringVar(&ds, "dataset", "", "the packed dataset, s3://bucket/prefix")
	s3.Register(fs)
	if err := parseFlags(fs, env, args, limitSynopsis); err != nil {
		return err
	}
	u, err := url.Parse(ds)
	if err != nil || u.Scheme != "s3" || u.Host == "" {
		return fmt.Errorf("--dataset %q: want s3://bucket/prefix", ds)
	}
	return bench.ServeLimit(ctx, bench.LimitServerConfig{
		Kind:    kind,
		Backend: s3.Config(),
		Bucket:  u.Host,
		Prefix:  strings.Trim(u.Path, "/"),
		Listen:  listen,
		Log:     env.Stdout,
	})
}
