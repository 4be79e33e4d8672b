package gateway

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/dustin/go-humanize"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/importance"
)

// Defaults are the job parameters used when a request does not give them,
// so that plain curl needs none.
type Defaults struct {
	Seed      uint64
	BatchSize int  // default 32
	Window    int  // default 8
	DropLast  bool // default false
}

// Limits bound what one request may ask for.
type Limits struct {
	MaxBatchSize int    // default 65536
	MaxWindow    int    // default 65536
	MaxWorld     int    // default 65536
	MaxEpoch     uint64 // epochs are 0..MaxEpoch; default and at most 1<<31-1
}

func (d *Defaults) fill() {
	if d.BatchSize == 0 {
		d.BatchSize = 32
	}
	if d.Window == 0 {
		d.Window = 8
	}
}

// maxEpoch is the largest epoch number: statistics and the planner keep
// epochs in 32 bits.
const maxEpoch = 1<<31 - 1

func (l *Limits) fill() {
	if l.MaxBatchSize == 0 {
		l.MaxBatchSize = 65536
	}
	if l.MaxWindow == 0 {
		l.MaxWindow = 65536
	}
	if l.MaxWorld == 0 {
		l.MaxWorld = 65536
	}
	if l.MaxEpoch == 0 || l.MaxEpoch > maxEpoch {
		l.MaxEpoch = maxEpoch
	}
}

// query is what a request's query string says, every default applied.
type query struct {
	job      api.Job
	sampling string // as given; parseQuery checks it against the importance parameters
	// The importance endpoints' own: the epoch their feedback is for
	// (epochSet: given), the snapshot a seal builds on, and the index
	// version a peer asks about.
	epoch    uint64
	epochSet bool
	prev     string
	index    string
	plan     api.PlanOptions
	format   string
}

// param parses the value v of the query parameter name into q, within a
// gateway's limits.
type param func(q *query, name, v string, l Limits) error

// params is the one table of every query parameter the API knows. Each
// endpoint accepts a subset (see batchParams and the others); parsing goes
// through here for all of them, so a parameter means the same thing
// everywhere. It is never modified.
var params = map[string]param{
	api.ParamDataset: func(q *query, _, v string, _ Limits) error { q.job.Dataset = v; return nil },
	api.ParamSeed: func(q *query, _, v string, _ Limits) error {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("%w: seed must be an unsigned 64-bit integer, got %q", ErrBadRequest, v)
		}
		q.job.Seed = n
		return nil
	},
	api.ParamBatchSize: intParam(func(q *query) *int { return &q.job.BatchSize }, 1, func(l Limits) int { return l.MaxBatchSize }, "the server's --max-batch-size"),
	api.ParamWindow:    intParam(func(q *query) *int { return &q.job.Window }, 1, func(l Limits) int { return l.MaxWindow }, "the server limit"),
	api.ParamWorld:     intParam(func(q *query) *int { return &q.job.World }, 1, func(l Limits) int { return l.MaxWorld }, "the server limit"),
	api.ParamRank:      intParam(func(q *query) *int { return &q.job.Rank }, 0, nil, ""),
	api.ParamOffset:    intParam(func(q *query) *int { return &q.job.Offset }, 0, nil, ""),
	api.ParamDropLast: func(q *query, _, v string, _ Limits) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%w: drop_last must be true or false, got %q", ErrBadRequest, v)
		}
		q.job.DropLast = b
		return nil
	},
	api.ParamLocality: func(q *query, _, v string, _ Limits) error {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%w: locality must be true or false, got %q", ErrBadRequest, v)
		}
		q.job.NoLocality = !b
		return nil
	},
	api.ParamSampling: func(q *query, _, v string, _ Limits) error {
		switch v {
		case api.SamplingUniform, api.SamplingImportance:
			q.sampling = v
			return nil
		}
		return fmt.Errorf("%w: sampling must be uniform or importance, got %q", ErrBadRequest, v)
	},
	api.ParamJob: func(q *query, _, v string, _ Limits) error {
		if err := importance.ValidJobName(v); err != nil {
			return fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		q.job.Importance.Job = v
		return nil
	},
	api.ParamImportance: func(q *query, _, v string, _ Limits) error {
		if !validVersion(v) {
			return fmt.Errorf("%w: importance must be a snapshot version (16 hex digits), got %q", ErrBadRequest, v)
		}
		q.job.Importance.Version = v
		return nil
	},
	api.ParamHot: intParam(func(q *query) *int { return &q.job.Importance.Hot }, 0, nil, ""),
	paramEpoch: func(q *query, name, v string, l Limits) error {
		n, err := parseNumber(name, v, l.MaxEpoch)
		q.epoch, q.epochSet = n, err == nil
		return err
	},
	paramPrev: func(q *query, _, v string, _ Limits) error {
		if !validVersion(v) {
			return fmt.Errorf("%w: prev must be a snapshot version (16 hex digits), got %q", ErrBadRequest, v)
		}
		q.prev = v
		return nil
	},
	paramIndex: func(q *query, _, v string, _ Limits) error { q.index = v; return nil },
	api.ParamFormat: func(q *query, _, v string, _ Limits) error {
		if v != "json" && v != "tar" {
			return fmt.Errorf("%w: format must be tar or json, got %q", ErrBadRequest, v)
		}
		q.format = v
		return nil
	},
	api.ParamCacheSize: func(q *query, _, v string, _ Limits) error {
		n, err := humanize.ParseBytes(v)
		if err != nil || n > 1<<62 {
			return fmt.Errorf("%w: cache_size must be a size such as 2GiB, got %q", ErrBadRequest, v)
		}
		q.plan.CacheBytes = int64(n)
		return nil
	},
	api.ParamEpochs:          intParam(func(q *query) *int { return &q.plan.Epochs }, 2, fixed(20), "the planner's limit"),
	api.ParamFirstEpoch:      intParam(func(q *query) *int { return &q.plan.FirstEpoch }, 0, fixed(1<<30), "the planner's limit"),
	api.ParamPrefetchWindows: intParam(func(q *query) *int { return &q.plan.PrefetchWindows }, 0, fixed(64), "the planner's limit"),
	api.ParamBandwidth:       rateParam(func(q *query) *float64 { return &q.plan.BackendBytesPerSec }),
	api.ParamConsume:         rateParam(func(q *query) *float64 { return &q.plan.ConsumeBytesPerSec }),
}

// The parameters each kind of endpoint accepts. The epoch, batch and
// manifest endpoints take the same ones, format included, so that one query
// string works for all three.
var (
	jobParams    = append(append([]string{}, api.JobParams...), api.ParamFormat)
	planParams   = append(append([]string{}, api.JobParams...), api.ParamCacheSize, api.ParamEpochs, api.ParamFirstEpoch, api.ParamBandwidth, api.ParamConsume, api.ParamPrefetchWindows)
	sampleParams = []string{api.ParamDataset}

	// Importance feedback and seals name their epoch in the query; a seal
	// also the snapshot it builds on; a peer handing over its feedback the
	// index version it is asked about.
	feedbackParams     = []string{api.ParamDataset, paramEpoch}
	sealParams         = []string{api.ParamDataset, paramEpoch, paramPrev}
	sealedParams       = []string{api.ParamDataset}
	peerFeedbackParams = []string{api.ParamDataset, paramEpoch, paramIndex}
)

// Query parameters of the importance endpoints (docs/http-api.md) and of
// the peers' internal ones.
const (
	paramEpoch = "epoch"
	paramPrev  = "prev"
	paramIndex = "index"
)

// intParam is an integer parameter of at least lo and, if hi is not nil,
// at most hi(limits); hint names where the upper bound comes from.
func intParam(dst func(*query) *int, lo int, hi func(Limits) int, hint string) param {
	return func(q *query, name, v string, l Limits) error {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			return fmt.Errorf("%w: %s must be an integer, got %q", ErrBadRequest, name, v)
		case hi != nil && (n < lo || n > hi(l)):
			return fmt.Errorf("%w: %s must be between %d and %d (%s), got %d", ErrBadRequest, name, lo, hi(l), hint, n)
		case n < lo:
			return fmt.Errorf("%w: %s must be at least %d, got %d", ErrBadRequest, name, lo, n)
		}
		*dst(q) = n
		return nil
	}
}

func fixed(n int) func(Limits) int { return func(Limits) int { return n } }

// rateParam is a positive rate in bytes per second, such as 500MiB.
func rateParam(dst func(*query) *float64) param {
	return func(q *query, name, v string, _ Limits) error {
		n, err := humanize.ParseBytes(v)
		if err != nil || n == 0 {
			return fmt.Errorf("%w: %s must be a positive rate in bytes per second such as 500MiB, got %q", ErrBadRequest, name, v)
		}
		*dst(q) = float64(n)
		return nil
	}
}

// parseQuery reads the parameters an endpoint accepts from a raw query
// string onto base (the gateway's defaults). Unknown parameters are
// rejected so that a typo such as "batchsize" does not silently fall back
// to a default, and so is a query url.ParseQuery cannot read whole: past
// its limit of 10,000 parameters (GODEBUG urlmaxqueryparams) it returns
// none, and r.URL.Query() would hide that behind the defaults.
func parseQuery(raw string, accepted []string, base query, l Limits) (query, error) {
	values, err := url.ParseQuery(raw)
	if err != nil {
		return query{}, fmt.Errorf("%w: query string: %w", ErrBadRequest, err)
	}
	q := base
	for k := range values {
		if !slices.Contains(accepted, k) {
			return query{}, fmt.Errorf("%w: unknown query parameter %q (known here: %s)", ErrBadRequest, k, strings.Join(accepted, ", "))
		}
	}
	for _, name := range accepted {
		// An empty value means the default, as if the parameter were absent.
		if v := values.Get(name); v != "" {
			if err := params[name](&q, name, v, l); err != nil {
				return query{}, err
			}
		}
	}
	if q.job.Rank >= q.job.World {
		return query{}, fmt.Errorf("%w: rank %d out of range: with world=%d, rank must be 0..%d", ErrNotFound, q.job.Rank, q.job.World, q.job.World-1)
	}
	imp := q.job.Importance
	switch {
	case q.sampling == api.SamplingImportance && !imp.On():
		return query{}, fmt.Errorf("%w: sampling=importance needs job=NAME, the name the job's feedback is sent under", ErrBadRequest)
	case q.sampling != api.SamplingImportance && (imp.On() || imp.Version != "" || imp.Hot != 0):
		return query{}, fmt.Errorf("%w: job, importance and hot apply only with sampling=importance", ErrBadRequest)
	}
	return q, nil
}

// validVersion reports whether v looks like a snapshot version: 16
// lowercase hex digits (importance.Snapshot.Version).
func validVersion(v string) bool {
	if len(v) != 16 {
		return false
	}
	for _, c := range v {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// parseNumber reads a path number such as the N of /epoch/N.
func parseNumber(name, v string, maxValue uint64) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %s must be a non-negative integer, got %q", ErrBadRequest, name, v)
	}
	if n > maxValue {
		return 0, fmt.Errorf("%w: %s %d out of range: valid %s numbers are 0..%d", ErrNotFound, name, n, name, maxValue)
	}
	return n, nil
}
