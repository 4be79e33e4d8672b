package gateway

import (
	"net/http"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/s3face"
)

// S3Config configures the S3 face (S3Handler): the gateway's datasets as
// read-only buckets of their samples' files, and read-through buckets of
// a store's objects, for unchanged S3 clients (internal/s3face).
type S3Config = s3face.Config

// S3Bucket is a read-through bucket of the S3 face.
type S3Bucket = s3face.Bucket

// Defaults of S3Config.
const (
	DefaultS3ReadAhead   = s3face.DefaultReadAhead
	DefaultS3WholeObject = s3face.DefaultWholeObject
	DefaultS3Block       = s3face.DefaultBlock
)

// S3Handler is the S3 face, to be served on a listener of its own
// (`brand serve --s3-face-listen`): path-style requests only, signed by
// one of S3Config's credentials, each logged and counted as the
// gateway's own are. It is nil when the gateway was configured without
// credentials.
func (g *Gateway) S3Handler() http.Handler {
	if g.s3 == nil {
		return nil
	}
	return middleware.RequestID(g.logRequests(middleware.Recoverer(g.s3)))
}

// newS3Face builds the S3 face on the gateway's parts: the reader, the
// writer, the preloads and the router every request uses, and
// the version rule every request reads by (resolve.Resolver.Version). objects are
// the read-through buckets, whose loader the cache was built with.
func (g *Gateway) newS3Face(objects *s3face.ReadThrough, rt s3face.Cluster) *s3face.Face {
	cfg := g.cfg
	return s3face.New(cfg.S3, s3face.Deps{Versions: s3Versions{catalog: g.catalog, version: g.jobs.Version},
		Reader: g.reader, Writer: g.out, Preload: g.preload, Cluster: rt, Ready: s3face.ReadinessFunc(g.ready.refusing),
		Objects: objects, FetchTimeout: cfg.FetchTimeout, BodyTimeout: cfg.BodyTimeout, Started: g.started, Registry: cfg.Registry, Log: cfg.Logger})
}

// s3Versions is the datasets as the S3 face sees them: the names
// configured, and the version of each that a request reads now.
type s3Versions struct {
	catalog *catalog.Catalog
	version func(api.Job) (*catalog.Dataset, error)
}

func (v s3Versions) Names() []string { return v.catalog.Names() }

func (v s3Versions) Version(name string) (*catalog.Dataset, error) {
	return v.version(api.Job{Dataset: name})
}
