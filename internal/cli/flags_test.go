package cli

import (
	"flag"
	"io"
	"testing"

	"github.com/brandgw/brand/s3backend"
)

func TestByteSize(t *testing.T) {
	tests := []struct {
		in      string
		want    ByteSize
		wantErr bool
	}{
		{in: "0", want: 0},
		{in: "1024", want: 1024},
		{in: "64KiB", want: 64 << 10},
		{in: "16MiB", want: 16 << 20},
		{in: "4GiB", want: 4 << 30},
		{in: "1000000", want: 1e6},
		{in: "1e9", wantErr: true}, // no exponents, whatever the old doc said
		{in: "1GB", want: 1e9},
		{in: "2 MiB", want: 2 << 20},
		{in: "huge", wantErr: true},
		{in: "", wantErr: true},
		{in: "-1MiB", wantErr: true},
		{in: "8EiB", wantErr: true}, // over 2^62
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			var b ByteSize
			err := b.Set(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Set(%q) = %v, want an error: %v", tt.in, err, tt.wantErr)
			}
			if err == nil && b != tt.want {
				t.Fatalf("Set(%q) = %d, want %d", tt.in, b, tt.want)
			}
		})
	}
	b := ByteSize(16 << 20)
	if got := b.String(); got != "16 MiB" {
		t.Fatalf("String() = %q, want %q", got, "16 MiB")
	}
}

// TestS3FlagsConfig checks that a flag given wins over its AWS_* variable,
// and that a flag left unset leaves the variable's value.
func TestS3FlagsConfig(t *testing.T) {
	env := map[string]string{
		"AWS_ENDPOINT_URL_S3": "",
		"AWS_ENDPOINT_URL":    "http://env:9000",
		"AWS_REGION":          "env-region",
		"AWS_DEFAULT_REGION":  "",
		"AWS_ACCESS_KEY_ID":   "env-key",
	}
	tests := []struct {
		name string
		args []string
		want func(*s3backend.Config) // the change from the environment's
	}{
		{name: "no flags", want: func(*s3backend.Config) {}},
		{name: "endpoint", args: []string{"--s3-endpoint", "flag:9000"},
			want: func(c *s3backend.Config) { c.Endpoint, c.Secure = "flag:9000", false }},
		{name: "endpoint with TLS", args: []string{"--s3-endpoint", "flag:9000", "--s3-tls"},
			want: func(c *s3backend.Config) { c.Endpoint, c.Secure = "flag:9000", true }},
		{name: "region", args: []string{"--s3-region", "flag-region"},
			want: func(c *s3backend.Config) { c.Region = "flag-region" }},
		{name: "parallel and part size", args: []string{"--s3-parallel", "8", "--s3-part-size", "64MiB"},
			want: func(c *s3backend.Config) { c.Parallel, c.PartSize = 8, 64<<20 }},
		{name: "zero is unset", args: []string{"--s3-parallel", "0", "--s3-part-size", "0"},
			want: func(*s3backend.Config) {}},
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var f S3Flags
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			f.Register(fs)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			want := s3backend.Config{Endpoint: "http://env:9000", Region: "env-region", AccessKey: "env-key"}
			tt.want(&want)
			if got := f.Config(); got != want {
				t.Fatalf("Config() = %+v\nwant %+v", got, want)
			}
		})
	}
}
