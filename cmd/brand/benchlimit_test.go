package main

import (
	"strings"
	"testing"
)

func TestBenchLimitFlags(t *testing.T) {
	tests := []struct {
		args []string
		code int
		out  string
	}{
		{[]string{"bench-limit", "--kind", "proxy", "--dataset", "file:///data"}, 1, "want s3://bucket/prefix"},
		{[]string{"bench-limit", "--kind", "proxy"}, 1, "want s3://bucket/prefix"},
		{[]string{"bench-limit", "--kind", "fast", "--dataset", "s3://bucket/p", "--s3-endpoint", "127.0.0.1:1"}, 1, `unknown limit "fast"`},
		{[]string{"bench-limit", "--dataset", "s3://bucket/p", "extra"}, 1, `unexpected arguments ["extra"]`},
		{[]string{"bench-limit", "--bogus"}, 2, "flag provided but not defined"},
		{[]string{"help", "bench-limit"}, 0, "store-verify"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args[1:], " "), func(t *testing.T) {
			code, out, errOut := brand(t, tt.args...)
			if code != tt.code || !strings.Contains(out+errOut, tt.out) {
				t.Fatalf("exit %d, want %d; output:\n%s%s\nwant it to contain %q", code, tt.code, out, errOut, tt.out)
			}
		})
	}
}
