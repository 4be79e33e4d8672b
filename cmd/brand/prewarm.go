package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cli"
)

// runPrewarm is `brand prewarm`: read a job's first steps into a
// gateway's (or a cluster's) caches before the job starts (POST
// /prewarm), printing each step's progress, and exit 0 once the job is
// warm: a Kubernetes init step before the trainers start, or an admission
// check of a queueing controller.
func runPrewarm(ctx context.Context, env *cli.Env, args []string) error {
	var gw, token, job string
	var epoch, steps int
	var timeout time.Duration
	fs := flag.NewFlagSet("prewarm", flag.ContinueOnError)
	fs.StringVar(&gw, "gateway", "http://127.0.0.1:8080", "the gateway (any node of a cluster)")
	fs.StringVar(&job, "job", "", "the job's parameters, as its batch URLs' query: 'dataset=imagenet&seed=7&batch_size=256&world=64' (required)")
	fs.StringVar(&token, "token", "", "a bearer token with read over the job (default: $BRAND_TOKEN)")
	fs.IntVar(&epoch, "epoch", 0, "the epoch the job starts at")
	fs.IntVar(&steps, "steps", 0, "steps to read, every rank's batch of each (default: the steps of the job's first window of chunks)")
	fs.DurationVar(&timeout, "timeout", 30*time.Minute, "give up after this long")
	if err := cli.ParseFlags(fs, env, args, "brand prewarm [--gateway URL] [--epoch E] [--steps K] --job 'JOB PARAMETERS'"); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError(env, "prewarm", "unexpected argument %q", fs.Arg(0))
	}
	if job == "" {
		return usageError(env, "prewarm", "--job is required: the job's parameters, as its batch URLs' query: 'dataset=imagenet&seed=7&batch_size=256&world=64'")
	}
	v, err := url.ParseQuery(strings.TrimPrefix(job, "?"))
	if err != nil {
		return usageError(env, "prewarm", "the job's parameters: %v", err)
	}
	v.Set("epoch", strconv.Itoa(epoch))
	if steps > 0 {
		v.Set("steps", strconv.Itoa(steps))
	}
	if token == "" && env.Getenv != nil {
		token = env.Getenv("BRAND_TOKEN")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(gw, "/")+"/prewarm?"+v.Encode(), nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e api.Error
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("%s refused the prewarm: %s: %s", gw, resp.Status, e.Error)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		var p api.PrewarmProgress
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			return fmt.Errorf("%s answered a line that is not progress: %q", gw, sc.Text())
		}
		switch {
		case p.Error != "":
			return fmt.Errorf("the prewarm failed at step %d of %d: %s", p.Steps, p.Of, p.Error)
		case p.Warm:
			fmt.Fprintf(env.Stdout, "warm: %d steps, %d batches, %d bytes in %.1f s\n", p.Steps, p.Batches, p.Bytes, p.Seconds)
			return nil
		default:
			fmt.Fprintf(env.Stderr, "step %d of %d read\n", p.Steps, p.Of)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("the prewarm's answer ended: %w", err)
	}
	return fmt.Errorf("the prewarm's answer ended before the job was warm")
}
