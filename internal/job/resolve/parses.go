package resolve

import (
	"sync"

	"github.com/brandgw/brand/internal/job/features"
	"github.com/brandgw/brand/internal/job/query"
)

// A job's ranks ask for its batches with one query string each, batch
// after batch: parsing it (query.Parse, with the table's check of which
// parameters go together) and naming its features (features.Requested)
// were a tenth of a warm batch's work in BenchmarkServeBatchWarm. parses
// keeps the queries parsed, with their features.
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
	mu    sync.Mutex
	m     map[string]parsed
	bytes int // the kept query strings' lengths, summed
}

// parsed is a query string parsed, and the features its parameters name
// (features.Requested of its job).
type parsed struct {
	q   query.Query
	set features.Set
}

// Bounds of parses: at most maxParses query strings of at most
// maxParsedBytes each, and maxParsesBytes of them in all (a parse holds
// about ten times its string: a schedule's slices). A node
// serves a handful of jobs at a time, each with one query string a rank;
// when more come, the table starts again rather than keep a rank's query
// string it may never see again. A stream of distinct jobs (a schedule
// edited every batch) holds at most the table's bound:
// visit.TestDistinctMixturesHoldNoMemory.
const (
	maxParses      = 4096
	maxParsedBytes = 4 << 10
	maxParsesBytes = 64 << 10
)

// parse is query.Parse(raw, query.JobParams, defaults, limits), kept for
// raw, with the features the query names.
func (p *parses) parse(raw string, defaults query.Query, limits query.Limits) (query.Query, requested, error) {
	cacheable := len(raw) <= maxParsedBytes
	if cacheable {
		p.mu.Lock()
		e, ok := p.m[raw]
		p.mu.Unlock()
		if ok {
			return e.q, requested{named: e.set, known: true}, nil
		}
	}
	q, err := query.Parse(raw, query.JobParams, defaults, limits)
	if err != nil {
		return q, requested{}, err
	}
	e := parsed{q: q, set: features.Requested(q.Job)}
	if cacheable {
		p.mu.Lock()
		if p.m == nil || len(p.m) >= maxParses || p.bytes+len(raw) > maxParsesBytes {
			p.m, p.bytes = make(map[string]parsed), 0
		}
		if _, ok := p.m[raw]; !ok {
			p.bytes += len(raw)
		}
		p.m[raw] = e
		p.mu.Unlock()
	}
	return e.q, requested{named: e.set, known: true}, nil
}
