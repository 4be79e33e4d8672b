package main

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/synth"
	"github.com/brandgw/brand/s3backend"
)

// TestServeDrainsInFlightOnShutdown starts `brand serve` on a packed local
// dataset, begins reading a large batch slowly, stops the server (as SIGTERM
// does) and checks the response still completes in full.
func TestServeDrainsInFlightOnShutdown(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	src := filepath.Join(root, "src")
	if err := (synth.Spec{Samples: 400, MeanBytes: 32 << 10, Seed: 2}).WriteTree(src); err != nil {
		t.Fatal(err)
	}
	storeDir := filepath.Join(root, "store")
	store, err := s3backend.NewLocal(storeDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dataset.Pack(ctx, src, store, dataset.PackOptions{ChunkSize: 1 << 20, Shuffle: true}); err != nil {
		t.Fatal(err)
	}
	var stderr syncBuffer
	sctx, stop := context.WithCancel(ctx)
	done := make(chan int, 1)
	go func() {
		done <- run(sctx, &cli.Env{Stdout: io.Discard, Stderr: &stderr, Getenv: func(string) string { return "" }},
			[]string{"serve", "--listen", "127.0.0.1:0", "--dataset", "d=" + storeDir, "--log-format", "json", "--batch-size", "300", "--shutdown-timeout", "20s", "--memory-limit", "off"})
	}()
	base := waitReady(t, &stderr, done)
	resp, err := http.Get(base + "/epoch/0/batch/0")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	want, _ := strconv.Atoi(resp.Header.Get("Content-Length"))
	if want < 1<<20 {
		t.Fatalf("batch of %d bytes is too small for this test", want)
	}
	first := make([]byte, 4096)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	stop() // what SIGTERM does
	time.Sleep(100 * time.Millisecond)
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("in-flight response cut off by shutdown: %v", err)
	}
	if got := len(first) + len(rest); got != want {
		t.Fatalf("read %d bytes of %d", got, want)
	}
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("serve exited with %d: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after shutdown")
	}
}

var listening = regexp.MustCompile(`"addr":"([^"]+)"`)

// waitReady waits for a serve command logging JSON to stderr to listen and
// answer /readyz, and returns its base URL.
func waitReady(t *testing.T, stderr *syncBuffer, done <-chan int) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	base := ""
	for {
		select {
		case code := <-done:
			t.Fatalf("serve exited with %d: %s", code, stderr.String())
		default:
		}
		if base == "" {
			if m := listening.FindStringSubmatch(stderr.String()); m != nil {
				base = "http://" + m[1]
			}
		}
		if base != "" {
			if resp, err := http.Get(base + "/readyz"); err == nil { // else: not listening yet
				resp.Body.Close()
				if resp.StatusCode == 200 {
					return base
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never became ready: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
