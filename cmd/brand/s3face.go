package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strings"

	"github.com/rs/zerolog"

	"github.com/brandgw/brand/gateway"
	"github.com/brandgw/brand/internal/cli"
	"github.com/brandgw/brand/internal/s3face/s3auth"
)

// s3FaceFlags configure the S3 face: the datasets as read-only buckets of
// their samples' files for unchanged S3 clients, on a listener of its own
// (docs/http-api.md "S3 face").
type s3FaceFlags struct {
	listen      string
	credentials string
	region      string
	readAhead   int
	buckets     datasetFlags
	wholeObject cli.ByteSize
	block       cli.ByteSize
}

func (f *s3FaceFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.listen, "s3-face-listen", "", "serve the S3 face (datasets as read-only buckets, for S3 clients) on this address, e.g. 127.0.0.1:9100; needs --s3-face-credentials")
	fs.StringVar(&f.credentials, "s3-face-credentials", "", "file of the S3 face's key pairs, one `ACCESS_KEY_ID SECRET_ACCESS_KEY` per line; requests must be signed (Signature V4) with one")
	fs.StringVar(&f.region, "s3-face-region", "", "the only region S3 requests may be signed for (default: any)")
	fs.Var(&f.buckets, "s3-face-bucket", "a read-through bucket of the S3 face, NAME=URL (repeatable): the objects under URL (s3://bucket/prefix, file:///dir or a directory) served and cached through the gateway")
	fs.Var(&f.wholeObject, "s3-face-whole-object", "read-through objects up to this size are cached whole; larger ones in blocks (default 64MiB, at most an eighth of the cache)")
	fs.Var(&f.block, "s3-face-block", "block size read-through objects larger than --s3-face-whole-object are cached in (default 8MiB)")
	fs.IntVar(&f.readAhead, "s3-face-read-ahead", gateway.DefaultS3ReadAhead, "chunks loaded ahead when the S3 face reads a dataset's chunks in order; 0 disables")
}

// errS3FaceFlags is a half-configured S3 face.
var errS3FaceFlags = errors.New("--s3-face-listen and --s3-face-credentials go together: the S3 face has no anonymous access")

// config is the gateway's S3Config, reading the credentials file.
func (f *s3FaceFlags) config() (gateway.S3Config, error) {
	if (f.listen == "") != (f.credentials == "") {
		return gateway.S3Config{}, errS3FaceFlags
	}
	if f.listen == "" {
		if len(f.buckets) > 0 {
			return gateway.S3Config{}, errors.New("--s3-face-bucket needs --s3-face-listen and --s3-face-credentials")
		}
		return gateway.S3Config{}, nil
	}
	creds, err := s3auth.LoadCredentials(f.credentials)
	if err != nil {
		return gateway.S3Config{}, fmt.Errorf("--s3-face-credentials: %w", err)
	}
	ahead := f.readAhead
	if ahead == 0 {
		ahead = -1 // the gateway's "none"
	}
	cfg := gateway.S3Config{Credentials: creds, Region: f.region, ReadAhead: ahead,
		WholeObject: int64(f.wholeObject), Block: int64(f.block)}
	for _, b := range f.buckets {
		name, url, ok := strings.Cut(b, "=")
		if !ok || name == "" || url == "" {
			return gateway.S3Config{}, fmt.Errorf("--s3-face-bucket %q: want NAME=URL", b)
		}
		cfg.Buckets = append(cfg.Buckets, gateway.S3Bucket{Name: name, URL: url})
	}
	return cfg, nil
}

// serveS3 serves the S3 face on ln until ctx ends; before the datasets
// are loaded it answers ServiceUnavailable, which S3 clients retry.
func serveS3(ctx context.Context, log zerolog.Logger, g *gateway.Gateway, ln net.Listener, maxIdle int) {
	srv := newServer(g.S3Handler(), maxIdle)
	go func() { <-ctx.Done(); _ = srv.Close() }()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn().Err(err).Msg("S3 listener stopped")
		}
	}()
	log.Info().Str("addr", ln.Addr().String()).Msg("serving the S3 face")
}
