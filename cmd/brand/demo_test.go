package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/internal/cli"
)

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startCommand runs a long-running subcommand in-process and waits until
// its stdout matches ready; it returns the first submatch and a stop
// function that cancels it and returns its exit code.
func startCommand(t *testing.T, ready *regexp.Regexp, args ...string) (string, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, &cli.Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}, args)
	}()
	deadline := time.After(60 * time.Second)
	for {
		if m := ready.FindStringSubmatch(stdout.String()); m != nil {
			var once sync.Once
			code := 0
			return m[1], func() int {
				once.Do(func() { cancel(); code = <-done })
				return code
			}
		}
		select {
		case code := <-done:
			cancel()
			t.Fatalf("brand %s exited with %d before it was ready:\n%s\n%s", args[0], code, stdout.String(), stderr.String())
		case <-deadline:
			cancel()
			t.Fatalf("brand %s not ready after 60 s:\n%s\n%s", args[0], stdout.String(), stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func httpGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

func TestDemoServesBatches(t *testing.T) {
	dir := t.TempDir()
	args := []string{"demo", "--listen", "127.0.0.1:0", "--dir", dir, "--samples", "300", "--mean-bytes", "2KiB", "--chunk-size", "128KiB", "--log-level", "warn", "--memory-limit", "off"}
	base, stop := startCommand(t, regexp.MustCompile(`serving \d+ synthetic samples at (http://\S+)`), args...)
	code, body := httpGet(t, base+"/epoch/0/batch/0")
	if code != 200 {
		t.Fatalf("batch: %d %s", code, body)
	}
	tr := tar.NewReader(bytes.NewReader(body))
	members := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(h.Name, ".jpg") && !strings.HasSuffix(h.Name, ".cls") {
			t.Fatalf("unexpected member %s", h.Name)
		}
		members++
	}
	if members != 64 { // 32 samples, .cls and .jpg each
		t.Fatalf("batch 0 holds %d members, want 64", members)
	}
	if code := stop(); code != 0 {
		t.Fatalf("demo exited with %d after SIGTERM-equivalent", code)
	}
	// A second run reuses the packed dataset and serves the same bytes.
	base, stop = startCommand(t, regexp.MustCompile(`serving \d+ synthetic samples at (http://\S+)`), args...)
	defer stop()
	if _, again := httpGet(t, base+"/epoch/0/batch/0"); !bytes.Equal(again, body) {
		t.Fatal("a second demo run served different bytes")
	}
}

func TestHelpAndUsage(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
		not  string // must not be in the output, if set
	}{
		{[]string{"help"}, 0, "Commands:", ""},
		{[]string{}, 2, "Usage: brand <command>", ""},
		{[]string{"nope"}, 2, `unknown command "nope"`, ""},
		{[]string{"help", "serve"}, 0, "-cache-size", ""},
		{[]string{"serve", "--bogus"}, 2, "flag provided but not defined", ""},
		{[]string{"serve"}, 1, "no --dataset given", ""},
		{[]string{"serve", "--dataset", "x", "--log-level", "loud"}, 1, "--log-level", ""},
		{[]string{"version"}, 0, "brand dev", ""},
		{[]string{"help", "serve"}, 0, "(default 4.0 GiB)", ""},
		{[]string{"help", "demo"}, 0, "(default 256 MiB)", "4.0 GiB"},
		{[]string{"demo", "--dataset", "other=/nonexistent"}, 2, "--dataset is not accepted", ""},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			code := run(context.Background(), &cli.Env{Stdout: &out, Stderr: &out, Getenv: func(string) string { return "" }}, tt.args)
			if code != tt.code || !strings.Contains(out.String(), tt.out) || (tt.not != "" && strings.Contains(out.String(), tt.not)) {
				t.Fatalf("exit %d, want %d; output:\n%s\nwant it to contain %q", code, tt.code, out.String(), tt.out)
			}
		})
	}
}
