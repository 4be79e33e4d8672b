package resolve

import (
	"sync"

	"github.com/brandgw/brand/internal/job/query"
)

// A job's ranks ask for its batches with one query string each, batch
// after batch: parsing it (query.Parse, with the table's check of which
// parameters go together) was a tenth of a warm batch's work in
// BenchmarkServeBatchWarm. parses keeps the queries parsed.
//
// What is kept is only what query.Parse returns, a pure function of the
// query string under the Resolver's defaults and limits, which are fixed:
// nothing a job reads (its dataset's version, its membership, its stored
// edits and schedules) is kept here, so no edit or new index can make an
// entry stale. A refused query is not kept: it is parsed again, and
// refused again, each time.
//
// A kept Query's slices (a mixture, its schedule, columns) are shared by
// every request that hits it; the resolver and the layout replace them
// and never write into them.
type parses struct {
	mu sync.Mutex
	m  map[string]query.Query
}

// Bounds of parses: at most maxParses query strings of at most
// maxParsedBytes each. A node serves a handful of jobs at a time, each
// with one query string a rank; when more come, the table starts again
// rather than keep a rank's query string it may never see again.
const (
	maxParses      = 4096
	maxParsedBytes = 4 << 10
)

// parse is query.Parse(raw, query.JobParams, defaults, limits), kept for
// raw.
func (p *parses) parse(raw string, defaults query.Query, limits query.Limits) (query.Query, error) {
	if len(raw) > maxParsedBytes {
		return query.Parse(raw, query.JobParams, defaults, limits)
	}
	p.mu.Lock()
	q, ok := p.m[raw]
	p.mu.Unlock()
	if ok {
		return q, nil
	}
	q, err := query.Parse(raw, query.JobParams, defaults, limits)
	if err != nil {
		return q, err
	}
	p.mu.Lock()
	if p.m == nil || len(p.m) >= maxParses {
		p.m = make(map[string]query.Query)
	}
	p.m[raw] = q
	p.mu.Unlock()
	return q, nil
}
