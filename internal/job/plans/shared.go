package plans

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"reflect"
	"strconv"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/server/reqbody"
)

// Shared answers POST /plan, body being its body: several jobs reading
// one dataset at once through this gateway's cache
// (api.SharedPlanRequest), simulated over their merged trace under LRU
// and the optimal policy, and each alone with an equal share of the
// cache. The body is read and checked whole before the plan waits for its
// slot. A body that went past http.MaxBytesReader's bound is refused as
// over api.MaxSharedPlanBodyBytes.
func (m *Maker) Shared(ctx context.Context, body io.Reader) (any, error) {
	job, req, err := m.readSharedPlan(body)
	if err != nil {
		return nil, err
	}
	base, err := m.cfg.Jobs.Resolve(ctx, query.Query{Job: job}, 0, -1, 0)
	if err != nil {
		return nil, err
	}
	ds := base.Source.DS
	for i, j := range req.Jobs {
		if j.Name == "" {
			continue
		}
		// A job named as a job with edits is planned under them, as GET
		// /plan?job= plans it: the jobs share one dataset version, which
		// a chain with appends must have grown the job to.
		named := job
		named.Name, named.Seed, named.Window, named.BatchSize, named.World, named.DropLast = j.Name, j.Seed, j.Window, j.BatchSize, j.World, j.DropLast
		r, err := m.cfg.Jobs.Resolve(ctx, query.Query{Job: named}, uint64(j.FirstEpoch), -1, 0)
		if err != nil {
			return nil, fmt.Errorf("job %d: %w", i, err)
		}
		if id := r.Source.DS.ID(); id != ds.ID() {
			return nil, fmt.Errorf("%w: job %d (%s) reads index %s, which its appends grew it to from index %s: plan the jobs over it (\"index\": %q)",
				query.ErrBadRequest, i, j.Name, id, ds.ID(), id)
		}
		req.Jobs[i].Edit = PlanEdit(r.Source.Edit)
	}
	return m.run(ctx, func(ctx context.Context) (any, error) {
		return m.cfg.Planner.SharedPlan(ctx, Data(ds), req.Jobs, req.CacheSize)
	})
}

// sharedPlanParams are the query parameters of GET /plan that a job of
// POST /plan has too. Each job is checked as that query string would be,
// so that the two endpoints apply one table of limits (package query's).
var sharedPlanParams = []string{api.ParamSeed, api.ParamWindow, api.ParamBatchSize, api.ParamWorld, api.ParamDropLast,
	api.ParamEpochs, api.ParamFirstEpoch, api.ParamJob}

// readSharedPlan decodes a POST /plan body and checks it: one JSON object
// with no unknown field and nothing after it, 1..api.MaxSharedPlanJobs
// jobs of at most api.MaxSharedPlanEpochs epochs in all, each within GET
// /plan's limits. It returns the dataset and index version the request
// names, as a job's (defaults applied), and the request with the cache
// size and every job's fields filled with the gateway's defaults where the
// body left them out. Every error wraps query.ErrBadRequest.
func (m *Maker) readSharedPlan(body io.Reader) (api.Job, api.SharedPlanRequest, error) {
	bad := func(format string, args ...any) (api.Job, api.SharedPlanRequest, error) {
		return api.Job{}, api.SharedPlanRequest{}, fmt.Errorf("%w: "+format, append([]any{query.ErrBadRequest}, args...)...)
	}
	// A job's fields are decoded onto the defaults, so that a field left
	// out keeps its default and one given, zero included, is taken.
	var in struct {
		api.SharedPlanRequest
		Jobs []json.RawMessage `json:"jobs"`
	}
	err := reqbody.DecodeJSON(body, &in)
	switch {
	case tooLarge(err):
		return bad("the body is over %d bytes", api.MaxSharedPlanBodyBytes)
	case errors.Is(err, io.EOF):
		return bad(`empty body: POST /plan takes a JSON object {"jobs": [{...}, ...]} (docs/http-api.md)`)
	case err != nil:
		return bad("body: %s", jsonMessage(err))
	case len(in.Jobs) == 0:
		return bad(`no jobs: POST /plan takes a JSON object {"jobs": [{...}, ...]} (docs/http-api.md)`)
	case len(in.Jobs) > api.MaxSharedPlanJobs:
		return bad("%d jobs; at most %d share a gateway's cache", len(in.Jobs), api.MaxSharedPlanJobs)
	case in.CacheSize < 0:
		return bad("cache_size %d bytes; must be >= 0 (0: the gateway's)", in.CacheSize)
	}

	req := in.SharedPlanRequest
	if req.CacheSize == 0 {
		req.CacheSize = m.cfg.Options.CacheBytes
	}
	v := url.Values{}
	v.Set(api.ParamDataset, req.Dataset)
	v.Set(api.ParamIndex, req.Index)
	q, err := query.Parse(v.Encode(), []string{api.ParamDataset, api.ParamIndex}, m.cfg.Defaults, m.cfg.Limits)
	if err != nil {
		return api.Job{}, api.SharedPlanRequest{}, err
	}
	d := m.cfg.Defaults.Job
	defaults := api.SharedPlanJob{Seed: d.Seed, Window: d.Window, BatchSize: d.BatchSize, World: d.World, Epochs: m.cfg.Options.Epochs,
		DropLast: d.DropLast, Speed: 1}
	req.Jobs = make([]api.SharedPlanJob, len(in.Jobs))
	epochs := 0
	for i, raw := range in.Jobs {
		j := defaults
		// One value of the body, already read whole by DecodeJSON.
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&j); err != nil {
			return api.Job{}, api.SharedPlanRequest{}, fmt.Errorf("job %d: %w: %s", i, query.ErrBadRequest, jsonMessage(err))
		}
		if j.Speed == 0 {
			j.Speed = 1
		}
		if err := m.checkSharedJob(j); err != nil {
			return api.Job{}, api.SharedPlanRequest{}, fmt.Errorf("job %d: %w", i, err)
		}
		req.Jobs[i] = j
		epochs += j.Epochs
	}
	if epochs > api.MaxSharedPlanEpochs {
		return bad("the jobs' epochs sum to %d; at most %d are planned at once", epochs, api.MaxSharedPlanEpochs)
	}
	return q.Job, req, nil
}

// checkSharedJob checks j's fields against GET /plan's limits, through
// the query string that would give them, and its speed and start.
func (m *Maker) checkSharedJob(j api.SharedPlanJob) error {
	v := url.Values{}
	v.Set(api.ParamSeed, strconv.FormatUint(j.Seed, 10))
	v.Set(api.ParamWindow, strconv.Itoa(j.Window))
	v.Set(api.ParamBatchSize, strconv.Itoa(j.BatchSize))
	v.Set(api.ParamWorld, strconv.Itoa(j.World))
	v.Set(api.ParamDropLast, strconv.FormatBool(j.DropLast))
	v.Set(api.ParamEpochs, strconv.Itoa(j.Epochs))
	v.Set(api.ParamFirstEpoch, strconv.Itoa(j.FirstEpoch))
	if j.Name != "" {
		v.Set(api.ParamJob, j.Name)
	}
	if _, err := query.Parse(v.Encode(), sharedPlanParams, query.Query{}, m.cfg.Limits); err != nil {
		return err
	}
	switch {
	case j.Speed < 0:
		return fmt.Errorf("%w: speed %v; must be > 0 (absent: 1)", query.ErrBadRequest, j.Speed)
	case j.Start < 0:
		return fmt.Errorf("%w: start %v; must be >= 0", query.ErrBadRequest, j.Start)
	}
	return nil
}

// jsonMessage is an error of the JSON decoder as a client reads it: a
// value of the wrong type is named by its field and the JSON it should
// be, not by a Go type.
func jsonMessage(err error) string {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		return err.Error()
	}
	want := map[reflect.Kind]string{reflect.Struct: "an object", reflect.Slice: "a list", reflect.String: "a string", reflect.Bool: "true or false",
		reflect.Int: "an integer", reflect.Int64: "an integer", reflect.Uint64: "an integer >= 0", reflect.Float64: "a number"}[te.Type.Kind()]
	if want == "" {
		want = "a " + te.Type.String()
	}
	if te.Field == "" {
		return fmt.Sprintf("a JSON %s; want %s", te.Value, want)
	}
	return fmt.Sprintf("%s: a JSON %s; want %s", te.Field, te.Value, want)
}

// tooLarge reports whether err is http.MaxBytesReader's: the body went
// past its bound.
func tooLarge(err error) bool {
	var mb *http.MaxBytesError
	return errors.As(err, &mb)
}
