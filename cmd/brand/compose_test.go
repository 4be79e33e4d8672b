package main

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
)

// TestComposeStack runs the commands docker-compose.yml gives its one-shot
// pack job and its gateway, in-process against a real MinIO, so the dev
// stack's wiring (flags, environment, bucket creation, dataset URL) is
// checked on machines without a Docker engine.
func TestComposeStack(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image       string
			Command     []string
			Environment map[string]string
			Healthcheck struct{ Test []string }
			DependsOn   map[string]struct{ Condition string } `yaml:"depends_on"`
		}
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	pack, gw := compose.Services["pack"], compose.Services["gateway"]
	if len(pack.Command) == 0 || len(gw.Command) == 0 || compose.Services["minio"].Image == "" {
		t.Fatalf("docker-compose.yml lacks the minio, pack or gateway service: %+v", compose.Services)
	}
	if !regexp.MustCompile(`^minio/minio:RELEASE\.[^@]+@sha256:[0-9a-f]{64}$`).MatchString(compose.Services["minio"].Image) {
		t.Errorf("the MinIO image %q is not pinned to a release tag and digest", compose.Services["minio"].Image)
	}
	if c := pack.DependsOn["minio"].Condition; c != "service_healthy" {
		t.Errorf("pack waits for minio with condition %q, want service_healthy", c)
	}
	hc := gw.Healthcheck.Test
	if len(hc) < 3 || hc[0] != "CMD" || hc[1] != "/usr/local/bin/brand" || hc[2] != "healthcheck" {
		t.Fatalf("the gateway's healthcheck %q does not run brand healthcheck (the image has no shell or curl)", hc)
	}
	srv := miniotest.ForTest(t)
	for k, v := range pack.Environment {
		t.Setenv(k, v)
	}
	// The stack's MinIO is at http://minio:9000 with the stack's
	// credentials; here it is the test server.
	t.Setenv("AWS_ENDPOINT_URL", srv.URL())
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)

	args := slices.Clone(pack.Command)
	for i, a := range args {
		if a == "--dir" {
			args[i+1] = t.TempDir()
		}
	}
	// Keep the test quick: fewer, smaller samples than the stack packs.
	args = append(args, "--samples", "200", "--image-side", "48", "--chunk-size", "256KiB")
	for range 2 { // the job must be idempotent: compose may run it again
		var out syncBuffer
		if code := run(t.Context(), &cli.Env{Stdout: &out, Stderr: &out, Getenv: os.Getenv}, args); code != 0 {
			t.Fatalf("pack job %q exited %d:\n%s", args, code, out.String())
		}
	}

	args = slices.Clone(gw.Command)
	for i, a := range args {
		if a == "--listen" {
			args[i+1] = "127.0.0.1:0"
		}
	}
	args = append(args, "--memory-limit", "off")
	ctx := t.Context()
	var stderr syncBuffer
	done := make(chan int, 1)
	sctx, stop := context.WithCancel(ctx)
	go func() { done <- run(sctx, &cli.Env{Stdout: &stderr, Stderr: &stderr, Getenv: os.Getenv}, args) }()
	base := waitReady(t, &stderr, done)
	if code, body := httpGet(t, base+"/epoch/0/batch/0"); code != 200 || len(body) < 1024 {
		t.Fatalf("gateway batch: %d, %d bytes", code, len(body))
	}
	// The healthcheck, pointed at this gateway, passes; at a 404 it fails.
	check := slices.Clone(hc[2:])
	for i, a := range check {
		if a == "--url" {
			check[i+1] = strings.Replace(check[i+1], "http://127.0.0.1:8080", base, 1)
		}
	}
	for _, tt := range []struct {
		args []string
		code int
	}{{check, 0}, {[]string{"healthcheck", "--url", base + "/nope"}, 1}} {
		var out syncBuffer
		if code := run(ctx, &cli.Env{Stdout: &out, Stderr: &out, Getenv: os.Getenv}, tt.args); code != tt.code {
			t.Errorf("%q exited %d, want %d:\n%s", tt.args, code, tt.code, out.String())
		}
	}
	stop()
	if code := <-done; code != 0 {
		t.Fatalf("gateway exited %d:\n%s", code, stderr.String())
	}
}
