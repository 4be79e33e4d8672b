package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/brandgw/brand/internal/cli"
)

// brandBench runs a command line in-process.
func brandBench(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), &cli.Env{Stdout: &out, Stderr: &errOut}, args)
	return code, out.String(), errOut.String()
}

func TestLimitFlags(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"limit", "--kind", "proxy", "--dataset", "file:///data"}, 1, "want s3://bucket/prefix"},
		{[]string{"limit", "--kind", "proxy"}, 1, "want s3://bucket/prefix"},
		{[]string{"limit", "--kind", "fast", "--dataset", "s3://bucket/p", "--s3-endpoint", "127.0.0.1:1"}, 1, `unknown limit "fast"`},
		{[]string{"limit", "--dataset", "s3://bucket/p", "extra"}, 1, `unexpected arguments ["extra"]`},
		{[]string{"limit", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"help", "limit"}, 0, "store-verify"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, out, errOut := brandBench(t, tt.args...)
			if code != tt.code || !strings.Contains(out+errOut, tt.out) {
				t.Fatalf("exit %d, want %d; output:\n%s%s\nwant it to contain %q", code, tt.code, out, errOut, tt.out)
			}
		})
	}
}
