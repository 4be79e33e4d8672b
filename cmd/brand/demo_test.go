package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"image/jpeg"
	"io"
	"iter"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/brandgw/brand/client"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/transform"
	"github.com/brandgw/brand/transform/video"
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
	m, _, stop := startCommandOutput(t, ready, args...)
	return m, stop
}

// startCommandOutput is startCommand that also returns what the command
// has written to stdout so far.
func startCommandOutput(t *testing.T, ready *regexp.Regexp, args ...string) (string, func() string, func() int) {
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
			return m[1], stdout.String, func() int {
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

// tarMembers yields the members of a tar stream and their contents.
func tarMembers(t *testing.T, b []byte) iter.Seq2[*tar.Header, []byte] {
	return func(yield func(*tar.Header, []byte) bool) {
		tr := tar.NewReader(bytes.NewReader(b))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if !yield(h, data) {
				return
			}
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

// TestDemoServesBatches: the demo serves batches of photos and their
// labels, the tensors of the transform curl it prints (a user's first
// try: with random bytes for images it answered 422), members stamped
// with the pack's time rather than 1970, and a second run reuses the
// packed dataset.
func TestDemoServesBatches(t *testing.T) {
	dir := t.TempDir()
	args := []string{"demo", "--listen", "127.0.0.1:0", "--dir", dir, "--samples", "300", "--image-side", "48", "--chunk-size", "128KiB", "--log-level", "warn", "--memory-limit", "off"}
	ready := regexp.MustCompile(`serving \d+ photos at (http://\S+)`)
	started := time.Now().Add(-time.Second)
	base, stdout, stop := startCommandOutput(t, ready, args...)
	code, first := httpGet(t, base+"/epoch/0/batch/0")
	if code != 200 {
		t.Fatalf("batch: %d %s", code, first)
	}
	members := 0
	for h, data := range tarMembers(t, first) {
		if h.ModTime.Before(started) {
			t.Fatalf("member %s modified %v, before the demo packed it", h.Name, h.ModTime)
		}
		switch {
		case strings.HasSuffix(h.Name, ".jpg"):
			if _, err := jpeg.DecodeConfig(bytes.NewReader(data)); err != nil {
				t.Fatalf("member %s is no JPEG: %v", h.Name, err)
			}
		case strings.HasSuffix(h.Name, ".cls"):
		default:
			t.Fatalf("unexpected member %s", h.Name)
		}
		members++
	}
	if members != 64 { // 32 samples, .cls and .jpg each
		t.Fatalf("batch 0 holds %d members, want 64", members)
	}

	// The transform curl it prints answers tensors.
	m := regexp.MustCompile(`(?m)^  curl -s '(\S+transform=imagenet-train)' \| tar -tvf -`).FindStringSubmatch(stdout())
	if m == nil {
		t.Fatalf("the demo printed no transform curl:\n%s", stdout())
	}
	code, body := httpGet(t, m[1])
	if code != 200 {
		t.Fatalf("%s: %d %s", m[1], code, body)
	}
	tensors := 0
	for h, data := range tarMembers(t, body) {
		if !strings.HasSuffix(h.Name, ".npy") {
			continue
		}
		tn, err := client.ParseNPY(data)
		if err != nil || !slices.Equal(tn.Shape, []int{3, 224, 224}) {
			t.Fatalf("member %s: %v %v, want a 3×224×224 tensor", h.Name, tn.Shape, err)
		}
		tensors++
	}
	if tensors != 32 {
		t.Fatalf("the transform batch holds %d tensors, want 32", tensors)
	}
	for _, want := range []string{`brand.Tensors("` + base + `", "demo"`, `transform="imagenet-train"`} {
		if !strings.Contains(stdout(), want) {
			t.Errorf("the demo's PyTorch loop lacks %q:\n%s", want, stdout())
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("demo exited with %d after SIGTERM-equivalent", code)
	}
	// A second run reuses the packed dataset and serves the same bytes.
	base, stop = startCommand(t, ready, args...)
	defer stop()
	if _, again := httpGet(t, base+"/epoch/0/batch/0"); !bytes.Equal(again, first) {
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
		{[]string{"version"}, 0, "JPEG decoder: " + transform.JPEGDecoderBuild(), ""},
		{[]string{"version"}, 0, "Video decoder: " + video.Build(), ""},
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
