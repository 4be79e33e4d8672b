package main

import (
	"context"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
)

// TestComposeStack runs the commands docker-compose.yml gives its one-shot
// pack job and its gateway, in-process against a real MinIO, so the dev
// stack's wiring (flags, environment, bucket creation, dataset URL) is
// checked on machines without a Docker engine. The gateway runs first
// before the pack job, as an engine that ignores depends_on's conditions
// starts it: it must exit with a failure, which the service's restart
// policy answers by starting it again until the index exists.
func TestComposeStack(t *testing.T) {
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Image       string
			Build       any
			PullPolicy  string `yaml:"pull_policy"`
			Restart     string
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
	// brand:dev is built here and in no registry: a service that names
	// it builds it and is never pulled (pull_policy build), or waits for
	// that build (never). The reproduction: the first `up` tried to pull
	// brand:dev from Docker Hub.
	built := false
	for name, svc := range compose.Services {
		if !strings.HasPrefix(svc.Image, "brand:") {
			continue
		}
		switch {
		case svc.Build != nil && svc.PullPolicy == "build":
			built = true
		case svc.Build == nil && svc.PullPolicy == "never":
		default:
			t.Errorf("service %s (image %s, build %v) has pull_policy %q: Compose would try to pull the locally built image (want build with build:, never without)", name, svc.Image, svc.Build != nil, svc.PullPolicy)
		}
	}
	if !built {
		t.Errorf("no service builds brand:dev with pull_policy: build")
	}
	// Run again until they succeed: see the gateway's first run below.
	for name, svc := range map[string]string{"pack": pack.Restart, "gateway": gw.Restart} {
		if !strings.HasPrefix(svc, "on-failure") && svc != "always" && svc != "unless-stopped" {
			t.Errorf("service %s has restart %q: started before what it needs exists, it stays down", name, svc)
		}
	}
	if addr, ok := flagValue(gw.Command[1:], "listen"); !ok || strings.HasPrefix(addr, "127.") || strings.HasPrefix(addr, "localhost:") {
		t.Errorf("the gateway's command %q listens on %q: the published port reaches the container's own address (give --listen :8080)", gw.Command, addr)
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

	gwArgs := slices.Clone(gw.Command)
	for i, a := range gwArgs {
		if a == "--listen" {
			gwArgs[i+1] = "127.0.0.1:0"
		}
	}
	gwArgs = append(gwArgs, "--memory-limit", "off")

	// The gateway before the pack job: no bucket, no index. It must stop
	// with a failure (restart: on-failure starts it again), not wait.
	{
		var out syncBuffer
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		code := run(ctx, &cli.Env{Stdout: &out, Stderr: &out, Getenv: os.Getenv}, gwArgs)
		waited := ctx.Err()
		cancel()
		if code == 0 || waited != nil {
			t.Fatalf("the gateway started before the pack job exited %d (%v), want a failure the restart policy answers:\n%s", code, waited, out.String())
		}
	}

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

	args = gwArgs
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
