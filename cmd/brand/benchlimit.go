package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"strings"

	"github.com/brandgw/brand/bench"
)

// runBenchLimit serves one of the benchmark's limits ((a) a reverse proxy,
// (a′) store-and-forward, (b) from memory) as a process of its own; `brand
// bench` starts it once per limit. See bench.ServeLimit.
func runBenchLimit(ctx context.Context, env *cliEnv, args []string) error {
	var (
		kind, listen, ds string
		s3               s3Flags
	)
	fs := flag.NewFlagSet("bench-limit", flag.ContinueOnError)
	fs.StringVar(&kind, "kind", "", "the limit to serve: "+strings.Join(bench.LimitKinds, ", "))
	fs.StringVar(&listen, "listen", "127.0.0.1:0", "address to listen on")
	fs.StringVar(&ds, "dataset", "", "the packed dataset, s3://bucket/prefix")
	s3.register(fs)
	if err := parseFlags(fs, env, args, "bench-limit --kind KIND --dataset s3://bucket/prefix [flags]"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
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
