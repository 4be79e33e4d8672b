package main

import (
	"os"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/testsupport/miniotest"
)

// TestPackIntoMissingBucket checks that packing into a bucket that does
// not exist says so and names --create-bucket, rather than reporting a
// missing object; and that --create-bucket then packs.
func TestPackIntoMissingBucket(t *testing.T) {
	srv := miniotest.ForTest(t)
	env := map[string]string{"AWS_ENDPOINT_URL": srv.URL(), "AWS_ACCESS_KEY_ID": srv.AccessKey,
		"AWS_SECRET_ACCESS_KEY": srv.SecretKey, "AWS_REGION": "us-east-1"}
	for k, v := range env {
		t.Setenv(k, v)
	}
	src := synthTree(t, 20)
	run := func(args ...string) (int, string) {
		var out syncBuffer
		code := run(t.Context(), &cli.Env{Stdout: &out, Stderr: &out, Getenv: os.Getenv}, args)
		return code, out.String()
	}
	code, out := run("pack", "--src", src, "--dst", "s3://no-such-bucket/ds", "--chunk-size", "64KiB")
	if code != 1 || !strings.Contains(out, "the bucket of s3://no-such-bucket/ds does not exist: pass --create-bucket") {
		t.Fatalf("pack into a missing bucket exited %d:\n%s", code, out)
	}
	code, out = run("pack", "--src", src, "--dst", "s3://no-such-bucket/ds", "--chunk-size", "64KiB", "--create-bucket")
	if code != 0 {
		t.Fatalf("pack --create-bucket exited %d:\n%s", code, out)
	}
}
