package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/brandgw/brand/internal/cli"
)

// runHealthcheck is `brand healthcheck`: GET a URL (by default a local
// gateway's /readyz) and exit 0 on a 200, 1 otherwise. The image is
// distroless, with no curl or wget: container healthchecks run this.
func runHealthcheck(ctx context.Context, env *cli.Env, args []string) error {
	var url string
	var timeout time.Duration
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.StringVar(&url, "url", "http://127.0.0.1:8080/readyz", "URL that must answer 200")
	fs.DurationVar(&timeout, "timeout", 3*time.Second, "give up after this long")
	if err := cli.ParseFlags(fs, env, args, "brand healthcheck [--url URL]"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(env, "healthcheck", "unexpected argument %q", fs.Arg(0))
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answered %s: %s", url, resp.Status, body)
	}
	return nil
}
