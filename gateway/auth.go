package gateway

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/brandgw/brand/internal/job/jobsched"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/server/reqbody"
	"github.com/brandgw/brand/internal/server/scope"
)

// tokenSet holds the bearer tokens a gateway accepts, as SHA-256 digests,
// each with its grant: comparing digests of equal length in constant time
// tells an attacker nothing about a token's length or prefix from the
// time a refusal takes.
type tokenSet struct {
	digests [][sha256.Size]byte
	grants  []scope.Grant
}

// newTokenSet holds bare tokens, each admin as every token was before
// scopes (Config.AuthTokens), and scoped ones (Config.Tokens).
func newTokenSet(bare []string, scoped []scope.Token) tokenSet {
	var s tokenSet
	for i, t := range bare {
		scoped = append(scoped, scope.Token{Secret: t, Grant: scope.All("token " + strconv.Itoa(i+1))})
	}
	for _, t := range scoped {
		s.digests = append(s.digests, sha256.Sum256([]byte(t.Secret)))
		s.grants = append(s.grants, t.Grant)
	}
	return s
}

// grant is the grant of the request's bearer token, if it is one of the
// set. It compares against every token, whatever matches first.
func (s tokenSet) grant(r *http.Request) (scope.Grant, bool) {
	h := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return scope.Grant{}, false
	}
	d := sha256.Sum256([]byte(strings.TrimSpace(token)))
	found, at := 0, 0
	for i := range s.digests {
		eq := subtle.ConstantTimeCompare(d[:], s.digests[i][:])
		found |= eq
		at = subtle.ConstantTimeSelect(eq, i, at)
	}
	if found != 1 {
		return scope.Grant{}, false
	}
	return s.grants[at], true
}

// SetTokens replaces the bearer tokens the gateway accepts (as
// Config.Tokens; brand serve re-reads --auth-token-file when it changes):
// a request is checked against the set in force when it arrives. It
// refuses to turn authentication on or off, a restart's decision: a
// gateway started without tokens serves its routes unguarded, and an
// empty set would lock every client out.
func (g *Gateway) SetTokens(tokens []scope.Token) error {
	switch {
	case len(g.tokens.Load().digests) == 0:
		return errors.New("gateway: started without tokens, it takes none later: restart it with --auth-token-file")
	case len(tokens) == 0:
		return errors.New("gateway: no token: the set in force is kept (an empty file would lock every client out)")
	}
	s := newTokenSet(nil, tokens)
	g.tokens.Store(&s)
	return nil
}

type grantKey struct{}

// grantOf is the grant of the token a request was authenticated with;
// false when the gateway takes no tokens (every request may do anything).
func grantOf(ctx context.Context) (scope.Grant, bool) {
	g, ok := ctx.Value(grantKey{}).(scope.Grant)
	return g, ok
}

// allow is nil if the request ctx belongs to may do need over datasets
// and job (scope.Grant.Allow), or takes no token.
func allow(ctx context.Context, need scope.Rights, datasets []string, job string) error {
	if g, ok := grantOf(ctx); ok {
		return g.Allow(need, datasets, job)
	}
	return nil
}

// guard refuses requests without an accepted bearer token, with 401 and a
// WWW-Authenticate challenge, and requests whose token lacks the right
// the endpoint asks over what the request names (table, endpoints.go),
// with 403 naming the right and the token's scope: none of their body
// read, and their connection closed if they have one (reqbody.Refuse).
// It runs after routing (a group's middleware in chi), so it knows the
// route's pattern. With no tokens configured every request passes:

// authorizer is the gateway's part that checks every request's bearer
// token against its endpoint's right and the names it reaches: the
// tokens, the schedules a job's stored datasets are read from, and the
// dataset a request names by default.
type authorizer struct {
	tokens         *atomic.Pointer[tokenSet] // replaced whole by SetTokens
	schedules      *jobsched.Book
	defaultDataset string
}

// authorizer is g's.
func (g *Gateway) authorizer() authorizer {
	return authorizer{tokens: &g.tokens, schedules: g.jobs.Edits().Schedules(), defaultDataset: g.cfg.DefaultDataset}
}

// authentication is opt-in (`brand serve --auth-token-file`).
func (a authorizer) guard(table map[string]endpoint) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		if len(a.tokens.Load().digests) == 0 {
			return next
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			grant, ok := a.tokens.Load().grant(r)
			if !ok {
				reqbody.Refuse(w, r)
				w.Header().Set("WWW-Authenticate", `Bearer realm="brand"`)
				writeJSON(w, http.StatusUnauthorized, api.Error{Error: "a bearer token is required (Authorization: Bearer <token>)", Status: http.StatusUnauthorized})
				return
			}
			ctx := context.WithValue(r.Context(), grantKey{}, grant)
			if err := a.authorize(ctx, r, lookup(table, r)); err != nil {
				refuseBody(w, r)
				writeError(ctx, w, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(ctx))
		})
	}
}

// authorize asks the grant in ctx for e's right over the job and the
// datasets r names where e says it names them: the right and the job
// first, so that a job out of scope is refused before anything of it (its
// stored schedule) is read.
func (a authorizer) authorize(ctx context.Context, r *http.Request, e endpoint) error {
	grant, _ := grantOf(ctx)
	var jobs []string
	if e.names&jobInPath != 0 {
		jobs = []string{chi.URLParam(r, "job")}
	}
	// A token that covers every name needs no more than the right.
	named := grant.Narrowed() && e.names&(jobInQuery|inQuery) != 0
	var v url.Values
	if named {
		// Read as query.Parse reads it: what it cannot read is the 400
		// the handler would answer.
		var err error
		if v, err = url.ParseQuery(r.URL.RawQuery); err != nil {
			return fmt.Errorf("%w: query string: %w", query.ErrBadRequest, err)
		}
		if e.names&jobInQuery != 0 {
			jobs = v[api.ParamJob]
		}
	}
	for _, job := range append(slices.Clip(jobs), "") {
		if err := grant.Allow(e.right, nil, job); err != nil {
			return err
		}
	}
	if !named || e.names&inQuery == 0 {
		return nil
	}
	datasets, err := a.queryDatasets(ctx, v, jobs)
	if err != nil {
		return err
	}
	return grant.Allow(e.right, datasets, "")
}

// queryDatasets are the datasets a job's query names, read as the job's
// parameters are (query.Parse): mix= and mix_schedule='s components, the
// schedule stored under the job's name for schedule=, dataset=, or else
// the default dataset. Every value of a parameter given twice counts (the
// handler refuses it).
func (a authorizer) queryDatasets(ctx context.Context, v url.Values, jobs []string) ([]string, error) {
	var out []string
	for _, s := range v[api.ParamMix] {
		m, err := api.ParseMix(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", query.ErrBadRequest, err)
		}
		for _, c := range m {
			out = append(out, c.Dataset)
		}
	}
	for _, s := range v[api.ParamMixSchedule] {
		sched, err := api.ParseSchedule(s)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", query.ErrBadRequest, err)
		}
		out = append(out, sched.Datasets()...)
	}
	if strings.Join(v[api.ParamScheduleVersion], "") != "" {
		// Every version of a job's schedule reads the datasets of its
		// first (api.Schedule.Edit).
		for _, job := range jobs {
			if err := checkJobName(job); err != nil {
				return nil, err
			}
			stored, err := a.schedules.Current(ctx, job)
			if err != nil {
				return nil, err
			}
			out = append(out, stored.Parsed().Datasets()...)
		}
	}
	for _, s := range v[api.ParamDataset] {
		if s != "" {
			out = append(out, s)
		}
	}
	if len(out) == 0 {
		out = []string{a.defaultDataset}
	}
	return out, nil
}

// scheduleDatasets are the datasets a schedule's text names, each
// component's name before its weight; a text that does not parse is
// refused by the schedule's own parser, after this.
func scheduleDatasets(text string) []string {
	var out []string
	for phase := range strings.SplitSeq(text, ";") {
		_, mix, _ := strings.Cut(phase, ":")
		for c := range strings.SplitSeq(mix, ",") {
			if i := strings.LastIndexByte(c, ':'); i > 0 {
				out = append(out, c[:i])
			}
		}
	}
	return out
}
