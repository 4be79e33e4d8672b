package gateway

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-json-experiment/json"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/chunkindex"
	"github.com/brandgw/brand/internal/batch/layout"
	"github.com/brandgw/brand/internal/batch/reader"
	"github.com/brandgw/brand/internal/batch/respond"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/internal/server/reqbody"
	"github.com/brandgw/brand/internal/task"
)

// taskAPI serves task streams (docs/tasks.md) over package task's book of
// the node's task jobs: the HTTP face alone, naming prompts by their keys
// in the job's index version and reading their bytes through the one
// path samples are read by.
type taskAPI struct {
	book    *task.Book
	catalog *catalog.Catalog
	jobs    *resolve.Resolver
	reader  *reader.Reader
	out     *respond.Writer
}

// maxTaskBodyBytes bounds a task request's body: a feedback of MaxLease
// results of MaxScores scores is the largest.
const maxTaskBodyBytes = 64 << 20

// dataset is the dataset a task request names (dataset=, or the one the
// gateway serves by default), as it is now.
func (a taskAPI) dataset(r *http.Request) (string, *catalog.Dataset, error) {
	raw := r.URL.RawQuery
	if r.Method != http.MethodPost && chi.RouteContext(r.Context()).RoutePattern() == "/tasks/{job}/leases" {
		// GET …/leases?generator=G names the generator beside the
		// dataset, once.
		v, err := query.Known(raw, append(slices.Clip(query.SampleParams), "generator"))
		if err != nil {
			return "", nil, err
		}
		v.Del("generator")
		raw = v.Encode()
	}
	q, err := query.Parse(raw, query.SampleParams, a.jobs.Defaults(), a.jobs.Limits())
	if err != nil {
		return "", nil, err
	}
	ds, err := a.jobs.Version(q.Job)
	if err != nil {
		return "", nil, err
	}
	return ds.Name, ds, nil
}

// fresh is stream, having read what other nodes wrote to the job's log:
// for the reads that answer from the plan as it is.
func (a taskAPI) fresh(r *http.Request) (*task.Stream, *catalog.Dataset, error) {
	s, ds, err := a.stream(r)
	if err == nil {
		err = s.Refresh(r.Context())
	}
	return s, ds, err
}

// stream is the task job a request names, with the version of its
// dataset it was made over.
func (a taskAPI) stream(r *http.Request) (*task.Stream, *catalog.Dataset, error) {
	job := chi.URLParam(r, "job")
	if err := checkJobName(job); err != nil {
		return nil, nil, err
	}
	name, ds, err := a.dataset(r)
	if err != nil {
		return nil, nil, err
	}
	s, err := a.book.Open(r.Context(), ds.Store, name, job)
	if err != nil {
		return nil, nil, err
	}
	if id := s.Spec().Index; id != ds.ID() {
		if ds, err = a.catalog.Version(name, id); err != nil {
			return nil, nil, fmt.Errorf("task job %s was made over index %s of dataset %s: %w", job, id, name, err)
		}
	}
	return s, ds, nil
}

// handleMake serves PUT /tasks/{job}.
func (a taskAPI) handleMake(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	job := chi.URLParam(r, "job")
	var spec task.Spec
	var ds *catalog.Dataset
	err := checkJobName(job)
	if err == nil {
		// The query before the body: a refused one is answered at once.
		_, ds, err = a.dataset(r)
	}
	if err == nil {
		if err = reqbody.DecodeJSON(r.Body, &spec); err != nil {
			err = fmt.Errorf("%w: the body is a task job's spec, a JSON object such as {\"step\": 64, \"policy\": \"curriculum\"} (docs/tasks.md): %w", query.ErrBadRequest, err)
		}
	}
	var s *task.Stream
	made := false
	if err == nil {
		spec.Dataset, spec.Index, spec.Prompts, spec.Made, spec.Tag = "", "", 0, 0, ""
		prompts := ds.Index.NumSamples()
		if len(spec.Domains) > 0 {
			// A job of domains: its log is kept in the dataset the request
			// names, its prompts are its domains'.
			prompts, err = a.makeDomains(&spec)
		}
		if err == nil {
			s, made, err = a.book.Make(ctx, ds.Store, ds.Name, job, ds.ID(), prompts, spec)
		}
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	status := http.StatusOK
	if made {
		status = http.StatusCreated
	}
	writeJSON(w, status, taskPlan(job, s))
}

// handlePlan serves GET /tasks/{job}.
func (a taskAPI) handlePlan(w http.ResponseWriter, r *http.Request) {
	s, _, err := a.fresh(r)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	writeJSON(w, http.StatusOK, taskPlan(chi.URLParam(r, "job"), s))
}

func taskPlan(job string, s *task.Stream) api.TaskPlan {
	sp := s.Spec()
	out := api.TaskPlan{Job: job, Dataset: sp.Dataset, Index: sp.Index, Spec: sp}
	now := s.Now()
	s.View(func(p *task.Plan) {
		c := p.Count()
		// A lease past its deadline is held by no one, though the plan
		// expires it only at its next record.
		out.OverdueLeases, out.Overdue = p.Leases().Overdue(now)
		c.OpenLeases -= out.OverdueLeases
		c.Leased -= out.Overdue
		out.Pass, out.PassesDone = c.Pass, c.PassesDone
		out.Pending, out.Leased, out.Front, out.Waiting, out.Retired, out.InBand = c.Pending, c.Leased, c.Front, c.Waiting, c.Retired, c.InBand
		out.Counted, out.Redrawn, out.Rested, out.Expired, out.FeedbackRows, out.Repeats = c.Counted, c.Redrawn, c.Rested, c.Expired, c.Rows, c.Repeats
		out.LastPassCounted, out.Excluded = c.LastPassCounted, c.Excluded
		out.Domains, out.Ratios = taskDomains(sp, p)
		out.Leases, out.OpenLeases, out.StepsFull, out.Trainer = p.Leases().Made(), c.OpenLeases, p.Steps().Full(), p.Trainer()
		out.Digest = fmt.Sprintf("%016x", p.Digest())
		out.Prompts = p.Prompts()
	})
	out.Segments, out.LogBytes, out.DamagedSegments, _ = s.Log()
	return out
}

// leaseOf is lease l on the wire.
func leaseOf(p *task.Plan, t taskSets, l task.Lease) api.TaskLease {
	out := api.TaskLease{Lease: p.LeaseName(l.ID), Generator: l.Gen, Step: l.Step, Request: l.Req,
		Expires: p.Time(p.Leases().Deadline(l.ID)).UTC().Format(time.RFC3339Nano), Prompts: make([]api.TaskPrompt, len(l.Prompts))}
	for i, q := range l.Prompts {
		key, dataset := t.key(p, q)
		out.Prompts[i] = api.TaskPrompt{Key: key, ID: int(q), Pass: l.Passes[i], Dataset: dataset}
	}
	return out
}

// handleLease serves POST /tasks/{job}/leases.
func (a taskAPI) handleLease(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, _, err := a.stream(r)
	var req api.TaskLeaseRequest
	if err == nil {
		if err = reqbody.DecodeJSON(r.Body, &req); err != nil {
			err = fmt.Errorf("%w: the body is {\"generator\": \"gen-1\", \"prompts\": 64, \"request\": \"an ID of this ask\"}: %w", query.ErrBadRequest, err)
		}
	}
	var l task.Lease
	if err == nil {
		l, err = s.LeaseOnce(ctx, req.Generator, req.Prompts, req.Request)
	}
	var t taskSets
	if err == nil {
		t, err = a.sets(s)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	var out api.TaskLease
	s.View(func(p *task.Plan) { out = leaseOf(p, t, l) })
	writeJSON(w, http.StatusCreated, out)
}

// handleOpen serves GET /tasks/{job}/leases?generator=G.
func (a taskAPI) handleOpen(w http.ResponseWriter, r *http.Request) {
	s, _, err := a.fresh(r)
	var t taskSets
	if err == nil {
		t, err = a.sets(s)
	}
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	gen := r.URL.Query().Get("generator")
	if len(gen) > task.MaxGenName {
		// No lease is of it; refused, as a lease ask naming it is.
		writeError(r.Context(), w, fmt.Errorf("%w: generator=%s: a name of 1 to %d printable bytes", query.ErrBadRequest, quote.Input(gen), task.MaxGenName))
		return
	}
	out := api.TaskLeases{Leases: []api.TaskLease{}}
	now := s.Now()
	s.View(func(p *task.Plan) {
		for _, l := range p.Leases().OpenOf(gen, now) {
			out.Leases = append(out.Leases, leaseOf(p, t, l))
		}
	})
	writeJSON(w, http.StatusOK, out)
}

// leaseIn is the number of the lease a request's path names.
func leaseIn(r *http.Request, s *task.Stream) (uint64, error) {
	return s.LeaseID(chi.URLParam(r, "lease"))
}

// handleSamples serves GET /tasks/{job}/leases/{lease}/samples: a tar of
// the open lease's prompts not yet answered, as /samples/KEY serves one.
func (a taskAPI) handleSamples(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, _, err := a.fresh(r)
	var id uint64
	if err == nil {
		id, err = leaseIn(r, s)
	}
	var t taskSets
	if err == nil {
		t, err = a.sets(s)
	}
	// The lease's prompts in order, as runs of one domain's: each run
	// read as a batch of that dataset's samples is.
	type run struct {
		dom    int
		locals []int
	}
	var runs []run
	if err == nil {
		s.View(func(p *task.Plan) {
			l, open := p.Leases().Open(id)
			if !open {
				err = fmt.Errorf("%w: lease %s is not open: its prompts were answered, or it expired", task.ErrLease, p.LeaseName(id))
				return
			}
			for _, q := range l.Prompts {
				d, local := p.PromptOf(q)
				if k := len(runs); k == 0 || runs[k-1].dom != d {
					runs = append(runs, run{dom: d})
				}
				runs[len(runs)-1].locals = append(runs[len(runs)-1].locals, local)
			}
		})
	}
	var results []*reader.Result
	defer func() {
		for _, res := range results {
			res.Release()
		}
	}()
	for _, x := range runs {
		if err != nil {
			break
		}
		var smp layout.Samples
		if smp, err = layout.NewSamples(ctx, t.sets[x.dom], x.locals); err != nil {
			break
		}
		var res *reader.Result
		if res, err = a.reader.Read(ctx, reader.Request{Samples: smp}); err == nil {
			results = append(results, res)
			if len(res.MissingPos) > 0 {
				err = fmt.Errorf("%w: a prompt of lease %s is in a chunk damaged at rest", catalog.ErrCorrupt, chi.URLParam(r, "lease"))
			}
		}
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	p := respond.Payload{N: int64(len(chunkindex.EndOfArchive))}
	for _, res := range results {
		p.Parts = append(p.Parts, res.Parts...)
		p.N += res.Bytes
	}
	p.Parts = append(p.Parts, chunkindex.EndOfArchive[:])
	if len(results) == 1 {
		p.Relieve = results[0].Relieve
	}
	_, _ = a.out.Write(w, r, "application/x-tar", p)
}

// handleFeedback serves POST /tasks/{job}/leases/{lease}/feedback.
func (a taskAPI) handleFeedback(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, _, err := a.stream(r)
	var id uint64
	if err == nil {
		id, err = leaseIn(r, s)
	}
	var fb api.TaskFeedback
	if err == nil {
		if err = reqbody.DecodeJSON(r.Body, &fb); err != nil {
			err = fmt.Errorf("%w: the body is {\"results\": [{\"key\": K, \"scores\": [..]} or {\"key\": K, \"passes\": P, \"n\": N}, ...]}: %w", query.ErrBadRequest, err)
		}
	}
	var t taskSets
	if err == nil {
		t, err = a.sets(s)
	}
	var rows []task.Row
	if err == nil {
		rows, err = taskRows(ctx, s, t, id, fb.Results)
	}
	var ans task.Answer
	if err == nil {
		ans, err = s.Answer(ctx, id, rows)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	out := api.TaskAnswered{Lease: chi.URLParam(r, "lease"), Applied: ans.Applied, Counted: ans.Counted, Redrawn: ans.Redrawn,
		Rested: ans.Rested, Retired: ans.Retired, Repeats: ans.Repeats, Excluded: ans.Excluded, Steps: ans.Steps}
	if out.Steps == nil {
		out.Steps = []uint64{}
	}
	writeJSON(w, http.StatusOK, out)
}

// taskRows are results as the plan's rows. Of a job of one dataset, their
// keys are looked up in its index; of a job of domains, among the
// prompts of lease id (a key two of its prompts share needs its
// dataset). A key it does not hold is refused, naming it.
func taskRows(ctx context.Context, s *task.Stream, t taskSets, id uint64, results []api.TaskResult) ([]task.Row, error) {
	if len(results) == 0 || len(results) > task.MaxLease {
		return nil, fmt.Errorf("%w: %d results: 1 to %d", query.ErrBadRequest, len(results), task.MaxLease)
	}
	keys := make([]string, len(results))
	for i, x := range results {
		keys[i] = x.Key
	}
	ids := make([]uint32, len(results))
	if len(t.sets) == 1 {
		locals, found, err := t.sets[0].Index.LookupMany(ctx, keys)
		if err != nil {
			return nil, err
		}
		for i, x := range results {
			if !found[i] {
				return nil, fmt.Errorf("%w: no prompt with key %s in dataset %s", task.ErrBadAnswer, quote.Input(x.Key), t.sets[0].Name)
			}
			ids[i] = uint32(locals[i])
		}
	} else {
		known, err := t.inLease(s, id, results, ids)
		if err == nil && !known {
			// A lease another node made, not yet read here: the log
			// read again first. Still not open, it closed: the plan
			// answers how (Stream.Answer), whatever its rows name.
			if err = s.Refresh(ctx); err == nil {
				_, err = t.inLease(s, id, results, ids)
			}
		}
		if err != nil {
			return nil, err
		}
	}
	rows := make([]task.Row, len(results))
	for i, x := range results {
		w := task.Row{Prompt: ids[i], Version: x.Version}
		switch {
		case x.Scores != nil && x.Passes != nil:
			return nil, fmt.Errorf("%w: %s: scores or passes, not both", task.ErrBadAnswer, quote.Input(x.Key))
		case x.Scores != nil:
			if len(x.Scores) > task.MaxScores {
				return nil, fmt.Errorf("%w: %s: %d scores, at most %d", task.ErrBadAnswer, quote.Input(x.Key), len(x.Scores), task.MaxScores)
			}
			w.Scores = make([]float32, len(x.Scores))
			for j, v := range x.Scores {
				if !(v >= 0 && v <= 1) {
					return nil, fmt.Errorf("%w: %s: score %v: each score is in [0, 1]", task.ErrBadAnswer, quote.Input(x.Key), v)
				}
				w.Scores[j] = float32(v)
			}
		case x.Passes != nil:
			if *x.Passes < 0 || x.N < 1 || x.N > 65535 || *x.Passes > x.N {
				return nil, fmt.Errorf("%w: %s: passes=%d of n=%d: 0 ≤ passes ≤ n, 1 ≤ n ≤ 65535", task.ErrBadAnswer, quote.Input(x.Key), *x.Passes, x.N)
			}
			w.Passes, w.N = uint16(*x.Passes), uint16(x.N)
		default:
			return nil, fmt.Errorf("%w: %s: give its group's scores, or passes of n", task.ErrBadAnswer, quote.Input(x.Key))
		}
		if x.Counts != nil {
			w.Counts = 1
			if *x.Counts {
				w.Counts = 2
			}
		}
		rows[i] = w
	}
	return rows, nil
}

// handleStep serves GET /tasks/{job}/steps/{step}.
func (a taskAPI) handleStep(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, _, err := a.stream(r)
	var n uint64
	if err == nil {
		n, err = query.ParseNumber("step", chi.URLParam(r, "step"), 1<<62)
	}
	var t taskSets
	if err == nil {
		t, err = a.sets(s)
	}
	out := api.TaskStep{Step: n}
	if err == nil {
		err = s.Step(ctx, n, func(p *task.Plan, c []task.Counted) {
			out.Prompts = make([]api.TaskCounted, len(c))
			for i, x := range c {
				key, dataset := t.key(p, x.Prompt)
				o := api.TaskCounted{Key: key, Dataset: dataset, ID: int(x.Prompt), Lease: p.LeaseName(x.Lease), Pass: x.Pass, Version: x.Version}
				if o.Scores = p.Steps().Scores(x); o.Scores == nil {
					ps := int(x.Passes)
					o.Passes, o.N = &ps, int(x.N)
				}
				out.Prompts[i] = o
			}
		})
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// handleTrainer serves POST /tasks/{job}/trainer.
func (a taskAPI) handleTrainer(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, _, err := a.stream(r)
	var t api.TaskTrainer
	if err == nil {
		if err = reqbody.DecodeJSON(r.Body, &t); err != nil {
			err = fmt.Errorf("%w: the body is {\"step\": S}: the trainer consumed the steps below S: %w", query.ErrBadRequest, err)
		}
	}
	if err == nil {
		err = s.Train(ctx, t.Step)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	out := api.TaskTrainer{}
	s.View(func(p *task.Plan) { out.Step = p.Trainer() })
	writeJSON(w, http.StatusOK, out)
}

// handleReplay serves GET /tasks/{job}/replay: the log replayed from the
// store on a plan of its own, as JSON lines.
func (a taskAPI) handleReplay(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, _, err := a.stream(r)
	var t taskSets
	if err == nil {
		t, err = a.sets(s)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	w.Header().Set("Content-Type", "application/jsonl")
	line := func(v any) {
		b, _ := json.Marshal(v)
		_, _ = w.Write(append(b, '\n'))
	}
	type leaseLine struct {
		Lease     string   `json:"lease"`
		Generator string   `json:"generator"`
		Step      uint64   `json:"step"`
		Prompts   []string `json:"prompts"`
	}
	type stepLine struct {
		Step    uint64   `json:"step"`
		Prompts []string `json:"prompts"`
	}
	// A prompt's key, of a job of domains its dataset's name before it
	// (DATASET/KEY).
	keys := func(p *task.Plan, n int, at func(int) uint32) []string {
		out := make([]string, n)
		for i := range out {
			key, dataset := t.key(p, at(i))
			if dataset != "" {
				key = dataset + "/" + key
			}
			out[i] = key
		}
		return out
	}
	d, equal, segs, err := s.Replay(ctx,
		func(p *task.Plan, l task.Lease) {
			line(leaseLine{Lease: p.LeaseName(l.ID), Generator: l.Gen, Step: l.Step, Prompts: keys(p, len(l.Prompts), func(i int) uint32 { return l.Prompts[i] })})
		},
		func(p *task.Plan, n uint64, c []task.Counted) {
			line(stepLine{Step: n, Prompts: keys(p, len(c), func(i int) uint32 { return c[i].Prompt })})
		})
	if err != nil {
		// The lines written so far stand; the last says the replay failed.
		line(api.Error{Error: err.Error(), Status: http.StatusServiceUnavailable})
		return
	}
	_, _, _, diverged := s.Log()
	line(api.TaskReplayEnd{Digest: fmt.Sprintf("%016x", d), Equal: equal, Segments: segs, Diverged: diverged})
}
