package gateway

import (
	"net/http"

	"github.com/brandgw/brand/internal/job/query"
)

// params refuses a request whose query names a parameter its route does
// not take, gives one twice, or does not parse (query.Known), before its
// handler runs and before any of its body is read: for the routes whose
// handler reads no job's parameters, as query.Parse refuses the same for
// the others. A typo (schedule edits took ?dry_run=1 and made the edit)
// is never ignored on any route; TestUnknownParametersOfEveryRoute holds
// every route to it.
func params(accepted ...string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if _, err := query.Known(r.URL.RawQuery, accepted); err != nil {
				refuseBody(w, r)
				writeError(r.Context(), w, err)
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}

// The parameters of Go's profiles (net/http/pprof): a named profile's
// debug=, gc= (the heap's) and seconds= (a delta over that long), and
// seconds= of a CPU profile or a trace.
var (
	profileParams = []string{"debug", "gc", "seconds"}
	secondsParam  = []string{"seconds"}
)
