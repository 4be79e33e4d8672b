package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/brandgw/brand/dataset"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/gen/synth"
	"github.com/brandgw/brand/s3backend"
)

// TestPrewarmCommand runs `brand prewarm` against a gateway: it prints
// each step to stderr and exits 0 once warm; a job the gateway refuses,
// or a gateway that is not there, is an exit 1 naming why.
func TestPrewarmCommand(t *testing.T) {
	dir := packLocal(t, t.TempDir(), synth.Spec{Samples: 400, MeanBytes: 2000, Seed: 5}, dataset.PackOptions{ChunkSize: 32 << 10, Shuffle: true})
	store, err := s3backend.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	_, url := startGateway(t, store, 64<<20)
	for _, c := range []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"prewarm", "--gateway", url, "--steps", "3", "--job", "seed=2&batch_size=16&world=2"}, 0, "warm: 3 steps, 6 batches"},
		{[]string{"prewarm", "--gateway", url, "--job", "seed=2&batch_size=16&world=2&window=4"}, 0, "warm: "},
		{[]string{"prewarm", "--gateway", url, "--job", "seed=2&nope=1"}, 1, "unknown query parameter"},
		{[]string{"prewarm", "--gateway", url}, 2, "--job is required"},
		{[]string{"prewarm", "--gateway", "http://127.0.0.1:1", "--job", "seed=2"}, 1, "connect"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(t.Context(), &cli.Env{Stdout: &stdout, Stderr: &stderr, Getenv: func(string) string { return "" }}, c.args)
		if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.out) {
			t.Errorf("%v: exit %d, %s%s; want %d and %q", c.args, code, stdout.String(), stderr.String(), c.code, c.out)
		}
	}
}
