package client

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/job/features"
)

// Defaults that New applies to zero Options fields.
const (
	DefaultAhead      = 2
	DefaultMaxRetries = 5
	DefaultBackoff    = 200 * time.Millisecond
	DefaultMaxBackoff = 10 * time.Second
)

// userAgent identifies the client in gateway logs.
const userAgent = "brand-client/1"

// Options configures a Client. The zero value asks for seed 0 without
// drop_last, leaves the other job parameters to the gateway's defaults, and
// uses the default transport and retry policy.
type Options struct {
	// HTTPClient sends the requests. Nil means a client whose transport
	// keeps enough idle connections for Ahead parallel requests, bounds the
	// dial, TLS and response-header waits, and never asks for gzip: a batch
	// is mostly already-compressed media, and transparent decompression
	// would hide the Content-Length the client verifies. It has no overall
	// timeout because a batch can be large; bound calls with their context.
	HTTPClient *http.Client

	// Token, if set, is sent as a bearer token (Authorization: Bearer) with
	// every request, for a gateway started with --auth-token-file. It is
	// never logged or shown in errors.
	Token string
	// CAFile, if set, names a PEM file of certificate authorities to trust
	// for an https gateway, beside the system's (for a gateway whose
	// certificate a private CA signed). It applies to the default
	// HTTPClient; with your own, configure its transport instead.
	CAFile string

	// Job is the training job whose batches the client reads. Its zero
	// Dataset, BatchSize, Window and World take the gateway's defaults;
	// Seed and DropLast are always sent, so the zero Job asks for seed 0
	// and drop_last=false rather than for whatever the gateway was started
	// with (see api.Job.Values). Rank needs World: a rank means nothing
	// without the number of ranks it is one of.
	//
	// Job.Offset must be 0. An offset belongs to one epoch, the one a job
	// was interrupted in, so it is an argument of EpochFrom; as an option
	// it would apply to every epoch and silently skip the start of each.
	//
	// Job.Mix reads a mixture of datasets instead of one (see the package
	// doc, "Mixtures"): it excludes Dataset, Index and Importance, and
	// MixBlock and MixSamples apply only with it.
	Job api.Job

	// Ahead is how many batches Epoch keeps requested beyond the one the
	// caller is consuming, so that the next batch is usually on the wire
	// before it is needed. 0 means DefaultAhead; a negative value disables
	// read-ahead (one request at a time).
	Ahead int
	// MaxRetries bounds the retries of one call after its first attempt.
	// 0 means DefaultMaxRetries; a negative value disables retries.
	MaxRetries int
	// Backoff is the wait before the first retry; it doubles with every
	// further retry and is jittered so that many workers do not retry in
	// lockstep. 0 means DefaultBackoff.
	Backoff time.Duration
	// MaxBackoff caps every wait between attempts, including one the
	// gateway asks for with Retry-After, so a misconfigured gateway cannot
	// stall a training job for hours. 0 means DefaultMaxBackoff.
	MaxBackoff time.Duration

	// Peers lists the gateways of a cluster in order, node k being
	// Peers[k]: the list every node was given as brand serve --peers,
	// StatefulSet patterns such as http://brand-{0..3}.brand.ns.svc:8080
	// included. The client then sends its requests to its rank's home,
	// node ⌊Rank·N/World⌋ of the N nodes, which caches the rank's samples;
	// when an attempt there fails as a retry would (refused or reset
	// connection, timeout, 502, 503, 504), the next attempts go to the
	// following nodes in order (home+1, home+2, … mod N) and the home is
	// tried again after HomeRetry. Every node answers every request with
	// the same bytes, so a failover changes only where a batch comes
	// from (Batch.Node says where). The retry budget is MaxRetries as
	// without peers; a first attempt on another node is made at once.
	// With Peers the base URL is not contacted and may be empty.
	Peers []string
	// Discover makes the client ask the base URL for the cluster's peer
	// list (GET /cluster) before its first request, and then route as
	// with Peers. The layout is kept until an epoch pins a membership
	// version other than the one it lists (nodes joined or left: see
	// Members), when the client asks again, through the nodes it knows,
	// keeping the old layout if none answers; liveness never changes it.
	// A failed first discovery is tried again at the next call. A single
	// gateway, or one that predates clusters, is used alone at the base
	// URL. It excludes Peers.
	Discover bool
	// HomeRetry is how long a node whose attempt failed is passed over
	// before requests are sent to it again, so that a rank returns to
	// its home once it is back. 0 means DefaultHomeRetry.
	HomeRetry time.Duration
	// ProbeAfter is, for a client of several nodes (Peers, or Discover
	// finding a cluster), how long an attempt waits for a node's response
	// headers before the client asks whether the node is alive at all:
	// GET /healthz on the same HTTPClient, unauthenticated, waiting 1 s
	// for an answer. A node that does not answer (a stopped process,
	// whose socket still accepts connections; a machine gone silent) has
	// its attempt abandoned and is passed over as any failed node is,
	// and the request goes to the next node at once, a few seconds after
	// it was sent rather than after the transport's two-minute header
	// timeout. A node that answers, with any status, is alive and maybe
	// reading a cold batch from the store: the attempt goes on waiting,
	// and the node is probed again every ProbeAfter. The body is watched
	// once the headers have come (below). A single gateway is never
	// probed, since there is nowhere else to go. 0 means
	// DefaultProbeAfter (3 s).
	//
	// ProbeAfter is a ceiling: the first probe of an attempt comes sooner,
	// after a deadline learnt from the client's answers (three times the
	// 95th percentile of its recent attempts' time to headers, at least
	// 100 ms; 250 ms until it has seen 16 answers), and that probe waits
	// as long for an answer (between 250 ms and 1 s). So a node that stops
	// answering mid-request costs a job's step a fraction of a second.
	// A node that answers its probe but has sent no headers once the
	// deadline has passed again (slow on a cold batch, or its connection
	// stalled by a flapping link) has the request hedged: it is also sent
	// to the next node, within 20 hedges a second, and the first headers
	// win. A body that sends no byte for the deadline (at least 250 ms)
	// has its attempt abandoned and the request sent to the next node at
	// once, without a probe: a node sends headers only once it holds the
	// whole batch, so its body stops only when the node or its connection
	// has (a node stopped while it wrote a batch, a link that flaps).
	ProbeAfter time.Duration
}

// validate reports the first option that can never produce a valid request,
// so that a typo fails at New rather than at the first batch.
func (o *Options) validate() error {
	j := &o.Job
	for _, f := range []struct {
		name string
		v    int
	}{{"BatchSize", j.BatchSize}, {"Window", j.Window}, {"World", j.World}, {"Rank", j.Rank},
		{"MixBlock", j.MixBlock}, {"MixSamples", j.MixSamples}} {
		if f.v < 0 {
			return fmt.Errorf("%w: Options.Job.%s is %d; must be >= 0 (0 means the gateway default)", ErrInvalid, f.name, f.v)
		}
	}
	switch {
	case j.World == 0 && j.Rank > 0:
		return fmt.Errorf("%w: Options.Job.Rank %d without Options.Job.World; set the number of ranks", ErrInvalid, j.Rank)
	case j.World > 0 && j.Rank >= j.World:
		return fmt.Errorf("%w: Options.Job.Rank %d out of range for World %d (valid ranks are 0..%d)", ErrInvalid, j.Rank, j.World, j.World-1)
	case j.Offset != 0:
		return fmt.Errorf("%w: Options.Job.Offset is %d; must be 0 (resume an epoch with EpochFrom)", ErrInvalid, j.Offset)
	case o.Backoff < 0 || o.MaxBackoff < 0 || o.HomeRetry < 0 || o.ProbeAfter < 0:
		return fmt.Errorf("%w: Options.Backoff, MaxBackoff, HomeRetry and ProbeAfter must be >= 0", ErrInvalid)
	case o.Discover && len(o.Peers) > 0:
		return fmt.Errorf("%w: Options.Peers and Discover exclude each other: give the peer list or ask for it", ErrInvalid)
	case j.Name != "" && j.Importance.Job != "" && j.Name != j.Importance.Job:
		return fmt.Errorf("%w: Options.Job.Name %q and Options.Job.Importance.Job %q differ; a job has one name", ErrInvalid, j.Name, j.Importance.Job)
	case !(j.Weight >= 0 && j.Weight <= 100):
		return fmt.Errorf("%w: Options.Job.Weight %v; must be in (0, 100], or 0 for the default 1", ErrInvalid, j.Weight)
	case len(j.Mix) == 0 && len(j.Schedule) == 0 && j.ScheduleVersion == "" && (j.MixBlock != 0 || j.MixSamples != 0):
		return fmt.Errorf("%w: Options.Job.MixBlock and MixSamples apply only to a mixture (Options.Job.Mix)", ErrInvalid)
	}
	if j.Name != "" {
		if err := importance.ValidJobName(j.Name); err != nil {
			return fmt.Errorf("%w: Options.Job.Name: %w", ErrInvalid, err)
		}
	}
	// Which of the job's features go together is the gateway's table
	// (internal/job/features), asked of the parameters the job sends.
	v := j.Values()
	if imp := j.Importance; !imp.On() {
		// Values writes them for an importance job alone; the options
		// may name them without one.
		if imp.Version != "" {
			v.Set(api.ParamImportance, imp.Version)
		}
		if imp.Hot != 0 {
			v.Set(api.ParamHot, strconv.Itoa(imp.Hot))
		}
	}
	if err := features.CheckParams(v); err != nil {
		return fmt.Errorf("%w: Options.Job: %w", ErrInvalid, err)
	}
	if j.ScheduleVersion != "" {
		// Without Options.Job.Name the table refused it above (schedule=
		// without job=).
		switch {
		case j.Dataset != "" || len(j.Mix) > 0 || len(j.Schedule) > 0:
			return fmt.Errorf("%w: Options.Job.ScheduleVersion reads the job's stored schedule in place of Dataset, Mix and Schedule", ErrInvalid)
		case j.ScheduleVersion != "latest" && !validScheduleVersion(j.ScheduleVersion):
			return fmt.Errorf("%w: Options.Job.ScheduleVersion %q: \"latest\" or a version (16 hex digits)", ErrInvalid, j.ScheduleVersion)
		}
		return nil
	}
	if len(j.Schedule) > 0 {
		if len(j.Mix) > 0 && j.Mix.String() != j.Schedule[0].Mix.String() {
			return fmt.Errorf("%w: Options.Job.Mix and Schedule exclude each other: a schedule's phases are its mixtures", ErrInvalid)
		}
		if _, err := api.ParseSchedule(j.Schedule.String()); err != nil {
			return fmt.Errorf("%w: Options.Job.Schedule: %w", ErrInvalid, err)
		}
		j.Mix = j.Schedule[0].Mix
	}
	if len(j.Mix) > 0 {
		return validateMix(j)
	}
	return nil
}

func validScheduleVersion(v string) bool {
	if len(v) != 16 {
		return false
	}
	for i := range len(v) {
		if c := v[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// validateMix checks a job over a mixture: the gateway would refuse it
// with 400 at the first request.
func validateMix(j *api.Job) error {
	// Which features go with a mixture is the table's (validate asks it).
	for _, c := range j.Mix {
		// The query writes a mixture as name:weight,name:weight.
		if strings.ContainsAny(c.Dataset, ",:") {
			return fmt.Errorf("%w: Options.Job.Mix: dataset name %q holds ',' or ':'", ErrInvalid, c.Dataset)
		}
	}
	if len(j.Schedule) > 0 {
		return nil // its phases' weights, 0 among them, checked as a schedule's
	}
	if _, err := api.ParseMix(j.Mix.String()); err != nil {
		return fmt.Errorf("%w: Options.Job.Mix: %w", ErrInvalid, err)
	}
	return nil
}

// Client fetches batches, epoch plans and samples from one Brand gateway
// (or a load balancer in front of several), or from a cluster's nodes (see
// Options.Peers). It is safe for concurrent use.
//
// Client is the API: what a trainer asks for and how an answer becomes a
// Batch, an EpochInfo or an error. How a request reaches a gateway (the
// routing among a cluster's nodes, retries, probes, the membership pin) is
// its transport's; what the answers pinned of the order the job reads
// (index, mixing block, stored schedule) is its pins'.
type Client struct {
	t         *transport
	pins      *pins
	opts      Options // a private copy with defaults applied
	ahead     int     // >= 1 requests in flight while Epoch waits
	readAhead bool    // whether Epoch requests ahead of the consumer
	bufs      buffers // released batches' memory, for later batches
}

// New returns a client of the gateway at baseURL (http or https, optionally
// with a path prefix such as http://lb/brand). It checks the URL and the
// options but does not contact the gateway. With Options.Peers, baseURL may
// be empty.
func New(baseURL string, opts Options) (*Client, error) {
	var peers []node
	if len(opts.Peers) > 0 {
		var err error
		if peers, err = parseNodes(opts.Peers); err != nil {
			return nil, fmt.Errorf("%w: Options.Peers: %w", ErrInvalid, err)
		}
		if baseURL == "" {
			baseURL = peers[0].name
		}
	}
	base, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("%w: base URL: %w", ErrInvalid, err)
	}
	if base.Scheme != "http" && base.Scheme != "https" {
		return nil, fmt.Errorf("%w: base URL %q: scheme must be http or https", ErrInvalid, baseURL)
	}
	if base.Host == "" {
		return nil, fmt.Errorf("%w: base URL %q has no host", ErrInvalid, baseURL)
	}
	if base.RawQuery != "" || base.ForceQuery || base.Fragment != "" {
		return nil, fmt.Errorf("%w: base URL %q must not have a query or fragment; set job parameters in Options", ErrInvalid, baseURL)
	}
	base.Path = strings.TrimSuffix(base.Path, "/")
	base.RawPath = ""
	if err := opts.validate(); err != nil {
		return nil, err
	}
	c := &Client{}
	t := &transport{base: base, sleep: sleepContext, now: time.Now}
	switch {
	case opts.Ahead == 0:
		c.ahead, c.readAhead = DefaultAhead, true
	case opts.Ahead > 0:
		c.ahead, c.readAhead = opts.Ahead, true
	default:
		c.ahead, c.readAhead = 1, false
	}
	switch {
	case opts.MaxRetries == 0:
		t.maxRetries = DefaultMaxRetries
	case opts.MaxRetries > 0:
		t.maxRetries = opts.MaxRetries
	}
	if opts.Backoff == 0 {
		opts.Backoff = DefaultBackoff
	}
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.HomeRetry == 0 {
		opts.HomeRetry = DefaultHomeRetry
	}
	if opts.ProbeAfter == 0 {
		opts.ProbeAfter = DefaultProbeAfter
	}
	if opts.HTTPClient == nil {
		hc, err := defaultHTTPClient(c.ahead, opts.CAFile)
		if err != nil {
			return nil, err
		}
		opts.HTTPClient = hc
	} else if opts.CAFile != "" {
		return nil, fmt.Errorf("%w: Options.CAFile applies to the default HTTPClient; configure your own client's TLS instead", ErrInvalid)
	}
	t.hc = opts.HTTPClient
	t.opts = opts
	t.lag = newLag(opts.ProbeAfter)
	c.opts = opts
	// The clock is read through t.now so that tests can replace it after
	// New.
	now := func() time.Time { return t.now() }
	if peers != nil {
		t.router = newRouter(peers, homeOf(opts.Job, len(peers)), opts.HomeRetry, now)
	} else {
		t.router = newRouter([]node{{url: base, name: base.String()}}, 0, opts.HomeRetry, now)
	}
	c.pins = &pins{job: &c.opts.Job}
	if id := opts.Job.Index; id != "" {
		c.pins.index.Store(&id)
	}
	if j := opts.Job; len(j.Mix) > 0 || j.ScheduleVersion != "" {
		// A mixture's block is pinned, so that a job resumed at another
		// world keeps its order (docs/shuffle.md §11.5): the job's, or
		// its default, batch_size × world. A bucketed mixture's is 0
		// (its blocks are its steps, whatever the world; a bucket job
		// gives no batch_size): none is sent.
		k := j.MixBlock
		if k == 0 && j.BatchSize > 0 && j.World > 0 {
			k = j.Block()
		}
		c.pins.block.Store(int64(k))
	}
	t.answered = c.pins.learn
	c.t = t
	return c, nil
}

// defaultHTTPClient is the client used when Options.HTTPClient is nil.
func defaultHTTPClient(ahead int, caFile string) (*http.Client, error) {
	t, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		// A program replaced the default; start from the standard values.
		t = &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			DialContext:         (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:   true,
			MaxIdleConns:        100,
			IdleConnTimeout:     90 * time.Second,
			TLSHandshakeTimeout: 10 * time.Second,
		}
	}
	t = t.Clone()
	// The standard default keeps 2 idle connections per host, which makes
	// Epoch with Ahead > 2 reconnect for nearly every batch.
	t.MaxIdleConnsPerHost = max(16, ahead+2)
	// A cold batch may wait for the gateway to fetch chunks from object
	// storage before the first byte; anything beyond this is a hung server,
	// and the timeout becomes a retried transport error. A client of a
	// cluster learns of a silent node long before, by probing it (see
	// Options.ProbeAfter).
	t.ResponseHeaderTimeout = 2 * time.Minute
	t.DisableCompression = true
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: Options.CAFile: %w", ErrInvalid, err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: Options.CAFile %s holds no PEM certificate", ErrInvalid, caFile)
		}
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if t.TLSClientConfig != nil {
			tc = t.TLSClientConfig.Clone()
		}
		tc.RootCAs = pool
		t.TLSClientConfig = tc
	}
	return &http.Client{Transport: t}, nil
}

// pins is what the answers of a client's gateways pinned of the order
// its job reads: the index version, a mixture's block, a stored
// schedule's version and the mixture its plans named. Each is pinned by
// the first answer that names it; a later answer naming another is the
// gateway serving another order, an error. The membership version,
// which says where samples are read rather than which, is the
// transport's (see transport.pinMembers).
type pins struct {
	// job is the client's job (its Options.Job), which SetImportance
	// edits.
	job *api.Job
	// index is the dataset's index version the client reads: the job's
	// Index, or the one the first answer named (see Client.Index).
	index atomic.Pointer[string]
	// block is the mixing block of the job's mixture, 0 until known (see
	// Client.MixBlock).
	block atomic.Int64
	// schedVersion is the stored schedule's version pinned for the latest
	// epoch read, storedMix the mixture its plan named (see
	// Client.ScheduleVersion).
	schedVersion atomic.Pointer[string]
	storedMix    atomic.Pointer[api.Mix]
}

// current is the client's job with its mixture's block once known
// (MixBlock), and for a stored schedule the version pinned (latest before
// the first plan) and the mixture its plans named.
func (p *pins) current() api.Job {
	j := *p.job
	if j.ScheduleVersion != "" {
		if v := p.scheduleVersion(); v != "" {
			j.ScheduleVersion = v
		}
		if m := p.storedMix.Load(); m != nil {
			j.Mix = *m
		}
	}
	if len(j.Mix) > 0 {
		j.MixBlock = int(p.block.Load())
	}
	return j
}

// ScheduleVersion returns the version of the job's stored schedule
// (Options.Job.ScheduleVersion) the client reads: the one the latest epoch
// plan was laid out under, every batch of that epoch pinned to it; before
// the first plan, the version Options gave ("latest" asks for the
// current one). Store it in a checkpoint and give it back as
// Options.Job.ScheduleVersion: a resumed job reads, step for step, what
// it would have read uninterrupted. "" for a job without a stored
// schedule.
func (c *Client) ScheduleVersion() string { return c.pins.scheduleVersion() }

func (p *pins) scheduleVersion() string {
	if v := p.schedVersion.Load(); v != nil {
		return *v
	}
	return p.job.ScheduleVersion
}

// learnSchedule pins the stored schedule's version and mixture a plan
// names.
func (p *pins) learnSchedule(plan *EpochInfo) {
	if p.job.ScheduleVersion == "" || plan.ScheduleVersion == "" || plan.Mix == nil {
		return
	}
	v := plan.ScheduleVersion
	p.schedVersion.Store(&v)
	m := make(api.Mix, len(plan.Mix.Components))
	for i, comp := range plan.Mix.Components {
		m[i] = api.MixComponent{Dataset: comp.Dataset, Weight: comp.Weight}
	}
	p.storedMix.Store(&m)
}

// jobQuery is query of the client's current job.
func (p *pins) jobQuery() url.Values { return p.query(p.current()) }

// query returns job's parameters as a query, leaving those the caller
// left zero to the gateway (see Options.Job), and the index version the
// client reads once it knows it (Index) or, for a mixture, its block
// (MixBlock); job is the client's (current) or a variant of it (another
// offset). A mixture's index versions are never sent: the gateway
// refuses index= with mix=. It returns a fresh map each time; callers may
// add to it.
func (p *pins) query(job api.Job) url.Values {
	v := job.Values()
	if id := p.indexVersion(); id != "" && len(job.Mix) == 0 {
		v.Set(api.ParamIndex, id)
	}
	return v
}

// Index returns the version of the dataset's index (the ID of the
// Brand-Index header and /datasets) this client reads: Options.Job.Index
// if set, else the version the first answer to a job request named, from
// when it arrived; "" before. Every request of the client then names it
// (index=), so a dataset re-packed under a running job never changes the
// order the job reads: a gateway that no longer holds the version answers
// 409, the client tries the cluster's other nodes, and the call fails with
// ErrIndexChanged if none holds it. Store it in a checkpoint and give it
// back as Options.Job.Index to resume on the same version.
//
// For a mixture (Options.Job.Mix) it is the components' versions,
// comma-separated in the mixture's order (Brand-Mix-Index), pinned by the
// first answer in the same way but never sent: a gateway reads each
// component's current version and refuses index= with mix=. An answer
// from other versions, a component re-packed under the job, fails with
// ErrIndexChanged, so that an epoch never mixes two orders.
func (c *Client) Index() string { return c.pins.indexVersion() }

func (p *pins) indexVersion() string {
	if v := p.index.Load(); v != nil {
		return *v
	}
	return ""
}

// MixBlock returns the mixing block K of the client's mixture
// (Options.Job.Mix): the epoch positions over which each component's
// share is rounded. It is Options.Job.MixBlock if set, else BatchSize ×
// World when the job gives both, else the block the first answer named,
// from the gateway's defaults; 0 before that, and for a job over one
// dataset. Every request of the client then names it (mix_block=).
//
// The mixture's order depends on K, and K by default on the world size: a
// job that resumes at another world size (EpochFrom) reads the rest of
// the order it began only with the K it began with. Store MixBlock in the
// checkpoint beside the offset (ResumeOffset) and give it back as
// Options.Job.MixBlock.
func (c *Client) MixBlock() int { return int(c.pins.block.Load()) }

// learn records what an answer to a job request says of the order the
// client reads: the index version, or a mixture's components' versions
// and its block. Other answers name none of them. The transport shows it
// every 2xx answer before the caller reads it.
func (p *pins) learn(h http.Header) error {
	if len(p.current().Mix) == 0 {
		return p.learnIndex(h.Get(api.HeaderIndex))
	}
	if err := p.learnIndex(h.Get(api.HeaderMixIndex)); err != nil {
		return err
	}
	v := h.Get(api.HeaderMixBlock)
	if v == "" {
		return nil
	}
	k, err := strconv.Atoi(v)
	if err != nil || k < 0 {
		return fmt.Errorf("%w: header %s is %q; want a non-negative integer", ErrBadResponse, api.HeaderMixBlock, v)
	}
	return p.learnMixBlock(k)
}

// learnMixBlock records the mixing block an answer names: the first one
// pins it (when the job left it to the gateway); another one is a gateway
// serving another order.
func (p *pins) learnMixBlock(k int) error {
	if p.block.CompareAndSwap(0, int64(k)) {
		return nil
	}
	if pin := int(p.block.Load()); pin != k {
		return fmt.Errorf("%w: this client reads its mixture with mix_block=%d, a gateway answered with %d", ErrBadResponse, pin, k)
	}
	return nil
}

// learnIndex records the index version an answer names: the first one
// pins it; another one afterwards (an answer to a request sent before the
// pin, served after a repack) is ErrIndexChanged.
func (p *pins) learnIndex(id string) error {
	if id == "" {
		return nil
	}
	if p.index.CompareAndSwap(nil, &id) {
		return nil
	}
	if pin := p.indexVersion(); pin != id {
		return fmt.Errorf("%w: %w: this client reads index %s, a gateway answered from %s", ErrIndexChanged, ErrBadResponse, pin, id)
	}
	return nil
}

// checkPosition rejects negative epoch and batch numbers before they cost a
// round trip.
func checkPosition(epoch, batch int) error {
	if epoch < 0 {
		return fmt.Errorf("%w: epoch %d; must be >= 0", ErrInvalid, epoch)
	}
	if batch < 0 {
		return fmt.Errorf("%w: batch %d; must be >= 0", ErrInvalid, batch)
	}
	return nil
}

func batchPath(epoch, batch int) string {
	return "/epoch/" + strconv.Itoa(epoch) + "/batch/" + strconv.Itoa(batch)
}
