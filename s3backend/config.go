package s3backend

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Defaults applied by NewS3 to zero Config fields.
const (
	DefaultPartSize   = 16 << 20
	DefaultParallel   = 4
	DefaultMaxRetries = 5
	// DefaultThrottlePatience is Config.ThrottlePatience's default.
	DefaultThrottlePatience = 30 * time.Second
	DefaultRetryBase        = 100 * time.Millisecond
	// DefaultIdleTimeout abandons a part GET that has delivered no byte
	// for this long.
	DefaultIdleTimeout = 30 * time.Second

	// unknownSizePartSize is the multipart part size of a Put of unknown
	// size: it bounds the upload buffer and allows objects up to 640 GiB.
	unknownSizePartSize = 64 << 20

	// defaultEndpoint is used when neither Config nor the environment name one.
	defaultEndpoint = "s3.amazonaws.com"
	// maxBackoff caps one retry's sleep unless RetryBase itself is larger.
	maxBackoff = 5 * time.Second
)

// Config configures the S3 backend. The zero value is usable: zero fields
// get the defaults documented on each field.
type Config struct {
	// Endpoint is host:port or a URL (http:// or https://). Default: the
	// environment (AWS_ENDPOINT_URL_S3, then AWS_ENDPOINT_URL), then
	// s3.amazonaws.com over TLS.
	Endpoint string

	// Static credentials. When AccessKey is empty the credential chain is
	// used: AWS_* environment variables, MINIO_* environment variables,
	// ~/.aws/credentials, then the EC2/ECS/EKS instance role.
	AccessKey, SecretKey, SessionToken string

	// Region for request signing. Default: AWS_REGION, then
	// AWS_DEFAULT_REGION; if still empty the bucket's location is looked up
	// once and cached.
	Region string

	// Secure selects TLS for a host:port Endpoint; a URL endpoint's scheme
	// decides instead.
	Secure bool

	// PartSize is about the size of the ranged GETs a large ReadRange is
	// split into: the whole number of parts nearest to the read's length
	// in part sizes, of equal length, so that a chunk packed at the part
	// size, which ends a few KiB over it, is one GET. Default 16 MiB:
	// within the 8–16 MB that AWS recommends for ranged reads, and each
	// GET costs a request charge on S3 and a request's work on any server
	// (on a loopback MinIO, reading 16 MiB chunks in one GET instead of
	// two made a cold epoch 7 % faster, measured at 41fdec6).
	// Parallelism across chunks comes from the gateway's prefetch workers.
	PartSize int64

	// Parallel is the number of part GETs one ReadRange runs concurrently.
	// Default 4.
	Parallel int

	// MaxRetries is how many times one request is retried after its first
	// attempt; a resumed read of a body cut short counts as a retry.
	// Default 5; negative disables retries.
	MaxRetries int

	// RetryBase is the first backoff; each retry doubles it (capped at 5 s
	// or RetryBase, whichever is larger) and sleeps a uniformly random
	// duration up to that bound ("full jitter"). Default 100 ms.
	//
	// minio-go itself pauses for a random 0-200 ms after a failed request
	// before reporting it (its own retry timer, which cannot be configured
	// per client), so the effective pause between attempts is somewhat
	// longer than this.
	RetryBase time.Duration

	// ThrottlePatience is how long a request the store throttles (429, or
	// 503 SlowDown and its kin) is retried, counted from its first
	// refusal, however many retries MaxRetries allows: a store that
	// refuses past its rate is up, and a rank should see a slower batch,
	// not the store's 503. Retries past MaxRetries are only ever of
	// throttled answers; a store that throttles every request this long
	// fails the read as any other failure does. Default 30 s; negative
	// disables it (throttled answers spend MaxRetries as other failures),
	// as do retries turned off.
	ThrottlePatience time.Duration

	// IdleTimeout abandons one GET of a read (a part) that has delivered
	// no byte for this long, headers included, and retries it from the
	// byte it stopped at. A stall that made progress is resumed without a
	// backoff sleep, as a body cut short is, and counts against MaxRetries.
	// It is what ends a stalled body long before the gateway's whole-chunk
	// fetch timeout. Its clock stands while a request waits in a Pacer to
	// be sent: the store has not been asked yet. Default 30 s; negative
	// disables it.
	IdleTimeout time.Duration

	// Transport carries the HTTP requests; tests inject faults here.
	// Default: an HTTP/1.1 transport whose idle pool fits the parallelism.
	Transport http.RoundTripper

	// Observer, if set, is told about every HTTP request made.
	Observer Observer
}

// ConfigFromEnv returns the configuration the standard AWS environment
// variables describe: AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL),
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and AWS_REGION
// (or AWS_DEFAULT_REGION). Secure is set for an https:// endpoint. Other
// fields are left zero, i.e. default.
func ConfigFromEnv() Config {
	cfg := Config{
		Endpoint:     firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		AccessKey:    os.Getenv("AWS_ACCESS_KEY_ID"),
		SecretKey:    os.Getenv("AWS_SECRET_ACCESS_KEY"),
		SessionToken: os.Getenv("AWS_SESSION_TOKEN"),
		Region:       firstEnv("AWS_REGION", "AWS_DEFAULT_REGION"),
	}
	cfg.Secure = strings.HasPrefix(strings.ToLower(cfg.Endpoint), "https://")
	return cfg
}

func firstEnv(names ...string) string {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return v
		}
	}
	return ""
}

// withDefaults returns cfg with zero fields filled in.
func (cfg Config) withDefaults() Config {
	if cfg.Endpoint == "" {
		if cfg.Endpoint = firstEnv("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"); cfg.Endpoint == "" {
			cfg.Endpoint, cfg.Secure = defaultEndpoint, true
		}
	}
	if cfg.Region == "" {
		cfg.Region = firstEnv("AWS_REGION", "AWS_DEFAULT_REGION")
	}
	if cfg.PartSize <= 0 {
		cfg.PartSize = DefaultPartSize
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = DefaultParallel
	}
	switch {
	case cfg.MaxRetries == 0:
		cfg.MaxRetries = DefaultMaxRetries
	case cfg.MaxRetries < 0:
		cfg.MaxRetries = 0
	}
	if cfg.RetryBase <= 0 {
		cfg.RetryBase = DefaultRetryBase
	}
	switch {
	case cfg.MaxRetries == 0 || cfg.ThrottlePatience < 0:
		cfg.ThrottlePatience = 0
	case cfg.ThrottlePatience == 0:
		cfg.ThrottlePatience = DefaultThrottlePatience
	}
	switch {
	case cfg.IdleTimeout == 0:
		cfg.IdleTimeout = DefaultIdleTimeout
	case cfg.IdleTimeout < 0:
		cfg.IdleTimeout = 0
	}
	return cfg
}

// parseEndpoint splits Endpoint into the host:port minio-go wants and
// whether to use TLS.
func parseEndpoint(endpoint string, secure bool) (host string, tls bool, err error) {
	if !strings.Contains(endpoint, "://") {
		if endpoint == "" || strings.ContainsAny(endpoint, "/?#@") {
			return "", false, fmt.Errorf("s3backend: endpoint %q: want host:port or http(s)://host:port", endpoint)
		}
		return endpoint, secure, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", false, fmt.Errorf("s3backend: endpoint %q: %w", endpoint, err)
	}
	switch strings.ToLower(u.Scheme) {
	case "http":
		tls = false
	case "https":
		tls = true
	default:
		return "", false, fmt.Errorf("s3backend: endpoint %q: scheme must be http or https", endpoint)
	}
	if u.Host == "" || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.User != nil {
		return "", false, fmt.Errorf("s3backend: endpoint %q: want scheme://host[:port] with no path, query or credentials", endpoint)
	}
	return u.Host, tls, nil
}

// SharedTransport returns cfg with one HTTP transport that every store
// opened with it uses — one pool of connections to the endpoint however
// many stores are opened (a gateway opens one per dataset, and again on
// each index poll) — and a func that closes the pool's idle connections.
// Without it each store keeps connections of its own: a gateway over 100
// datasets held 100 idle connections, 200 goroutines, from loading their
// indexes alone. A cfg that names its own Transport is returned as is,
// with a func that does nothing.
func (cfg Config) SharedTransport() (Config, func()) {
	if cfg.Transport != nil {
		return cfg, func() {}
	}
	t := newTransport(cfg.withDefaults().Parallel)
	cfg.Transport = t
	return cfg, t.CloseIdleConnections
}

// newTransport returns the default transport: HTTP/1.1 only (parallel
// ranged GETs over separate connections beat multiplexing them on one
// HTTP/2 connection for bulk reads), with an idle pool large enough that the
// connections of concurrent ReadRange calls are reused rather than redialled.
func newTransport(parallel int) *http.Transport {
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		Protocols:             protocols,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   max(64, 8*parallel),
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		// A request the server accepted but never answers is retried
		// rather than hanging a reader forever.
		ResponseHeaderTimeout: 60 * time.Second,
		// Ranges address stored bytes; a compressed response would break them.
		DisableCompression: true,
		// A body read of at least ReadBufferSize bytes fills the caller's
		// slice straight from the socket; a smaller one is read into the
		// transport's buffer and copied. Bulk reads ask for 256 KiB
		// (ReadRangeProgress) either way, but a decoder streaming a range
		// (OpenRange) asks for a snappy literal at a time, up to 64 KiB:
		// with a 64 KiB buffer every image of a streamed Parquet page was
		// copied once more (TestTransportReadsIntoCaller).
		ReadBufferSize:  4 << 10,
		WriteBufferSize: 64 << 10,
	}
}
