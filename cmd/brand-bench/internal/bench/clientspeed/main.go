// Command clientspeed reads epochs of a Brand gateway with the Go client
// and prints, for each, one JSON line of what python/bench/loaders.py's
// client mode prints for the Python client: samples, HTTP body bytes,
// seconds from the first request to the last sample, and the CPU time this
// process spent. python/bench/client_speed.py runs the two side by side.
//
//	go run ./cmd/brand-bench/internal/bench/clientspeed --url http://127.0.0.1:8080 --batch-size 64 --epochs 1,2
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/shuffle"
)

type result struct {
	Mode       string  `json:"mode"`
	Epoch      int     `json:"epoch"`
	Samples    int64   `json:"samples"`
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
}

// countingBody counts a response body's bytes as the client reads them.
type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(req)
	if err == nil && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-tar") {
		resp.Body = countingBody{resp.Body, &t.n}
	}
	return resp, err
}

func cpu() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "the gateway")
	dataset := flag.String("dataset", "", "dataset name (empty: the gateway's default)")
	batch := flag.Int("batch-size", 64, "samples per batch")
	window := flag.Int("window", 0, "shuffle window in chunks (0: the gateway's default)")
	seed := flag.Uint64("seed", 1, "shuffle seed")
	ahead := flag.Int("ahead", 2, "batches kept in flight")
	epochs := flag.String("epochs", "1", "comma-separated epochs to read, one JSON line each")
	flag.Parse()

	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = *ahead + 4
	tr.DisableCompression = true
	ct := &countingTransport{base: tr}
	c, err := client.New(*url, client.Options{
		HTTPClient: &http.Client{Transport: ct},
		Job:        api.Job{Dataset: *dataset, Params: shuffle.Params{Seed: *seed, BatchSize: *batch, Window: *window, World: 1}},
		Ahead:      *ahead,
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "clientspeed:", err)
		os.Exit(2)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, f := range strings.Split(*epochs, ",") {
		e, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			fmt.Fprintln(os.Stderr, "clientspeed: --epochs:", err)
			os.Exit(2)
		}
		r := result{Mode: "go-client", Epoch: e}
		n0, cpu0, start := ct.n.Load(), cpu(), time.Now()
		for b, err := range c.Epoch(context.Background(), e) {
			if err != nil {
				fmt.Fprintln(os.Stderr, "clientspeed:", err)
				os.Exit(1)
			}
			r.Samples += int64(len(b.Samples))
			b.Release()
		}
		r.Seconds, r.CPUSeconds, r.Bytes = time.Since(start).Seconds(), cpu()-cpu0, ct.n.Load()-n0
		_ = enc.Encode(r)
	}
}
