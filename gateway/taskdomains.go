package gateway

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/internal/server/reqbody"
	"github.com/brandgw/brand/internal/task"
)

// A task job's domains and edits on the wire (docs/tasks.md, "Domains",
// "Edits"): the datasets its prompts are keys of, a job of domains made,
// and its exclusions, appends and ratio edits, each an entry of its log
// (package task).

// taskSets are the dataset versions a task job's prompts are keys of:
// one a domain, at the index version its prompts are keys of now (an
// append moves it); names are the domains' datasets ("" for a job of one,
// whose prompts name none).
type taskSets struct {
	sets  []*catalog.Dataset
	names []string
}

// sets are s's domains' dataset versions.
func (a taskAPI) sets(s *task.Stream) (taskSets, error) {
	sp := s.Spec()
	var ids []string
	s.View(func(p *task.Plan) {
		for d := range p.Domains() {
			ids = append(ids, p.DomainIndex(d))
		}
	})
	out := taskSets{names: make([]string, len(ids))}
	for d, id := range ids {
		name := sp.Dataset
		if len(sp.Domains) > 0 {
			name = sp.Domains[d].Dataset
			out.names[d] = name
		}
		ds, err := a.catalog.Version(name, id)
		if err != nil {
			return taskSets{}, fmt.Errorf("the task job's prompts of dataset %s are keys of its index %s: %w", name, id, err)
		}
		out.sets = append(out.sets, ds)
	}
	return out, nil
}

// key is prompt q's key, and its domain's dataset ("" for a job of one).
func (t taskSets) key(p *task.Plan, q uint32) (key, dataset string) {
	d, local := p.PromptOf(q)
	return t.sets[d].Index.SampleKey(local), t.names[d]
}

// domain is the domain of a job's dataset named name ("" for a job of
// one: its only one).
func (t taskSets) domain(name string) (int, error) {
	if len(t.names) == 1 && (name == "" || name == t.names[0] || t.names[0] == "") {
		return 0, nil
	}
	if d := slices.Index(t.names, name); d >= 0 {
		return d, nil
	}
	return 0, fmt.Errorf("%w: dataset=%s: the job's domains are %v", query.ErrBadRequest, quote.Input(name), t.names)
}

// makeDomains sets spec's domains' index versions and prompts, each
// dataset as the gateway serves it now, and answers their prompts.
func (a taskAPI) makeDomains(spec *task.Spec) (int, error) {
	n := 0
	for i := range spec.Domains {
		d := &spec.Domains[i]
		if err := api.CheckDatasetName(d.Dataset); err != nil {
			return 0, fmt.Errorf("%w: task job's domain %d: %w", task.ErrBadSpec, i, err)
		}
		ds, err := a.catalog.Get(d.Dataset)
		if err != nil {
			return 0, fmt.Errorf("task job's domain %d: %w", i, err)
		}
		d.Index, d.Prompts = ds.ID(), ds.Index.NumSamples()
		n += d.Prompts
	}
	return n, nil
}

// handleExclude serves POST /tasks/{job}/exclude: prompts taken out of
// the job at once.
func (a taskAPI) handleExclude(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, _, err := a.fresh(r)
	var body api.TaskExclusion
	if err == nil {
		if err = reqbody.DecodeJSON(r.Body, &body); err != nil {
			err = fmt.Errorf("%w: the body is {\"keys\": [...], \"dataset\": D} (dataset: a job of domains' domain): %w", query.ErrBadRequest, err)
		}
	}
	var t taskSets
	if err == nil {
		t, err = a.sets(s)
	}
	var ids []uint32
	if err == nil && (len(body.Keys) == 0 || len(body.Keys) > task.MaxExclude) {
		err = fmt.Errorf("%w: %d keys: an exclusion names 1 to %d", query.ErrBadRequest, len(body.Keys), task.MaxExclude)
	}
	if err == nil {
		ids, err = t.prompts(r, s, body.Dataset, body.Keys)
	}
	var e task.Edited
	if err == nil {
		e, err = s.Exclude(ctx, ids)
	}
	a.edited(w, r, s, e, err)
}

// prompts are keys of domain dataset as the job's prompts: every key must
// be one of its prompts (refused naming the first that is not).
func (t taskSets) prompts(r *http.Request, s *task.Stream, dataset string, keys []string) ([]uint32, error) {
	d, err := t.domain(dataset)
	if err != nil {
		return nil, err
	}
	locals, found, err := t.sets[d].Index.LookupMany(r.Context(), keys)
	if err != nil {
		return nil, err
	}
	out := make([]uint32, len(keys))
	s.View(func(p *task.Plan) {
		for i, k := range keys {
			q, ok := p.Prompt(d, locals[i])
			if !found[i] || !ok {
				err = fmt.Errorf("%w: no prompt with key %s in the job's dataset %s", task.ErrBadAnswer, quote.Input(k), t.sets[d].Name)
				return
			}
			out[i] = q
		}
	})
	return out, err
}

// handleAppend serves POST /tasks/{job}/append: a domain's prompts of an
// index version extending its own, to its next pass.
func (a taskAPI) handleAppend(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, _, err := a.fresh(r)
	var body api.TaskAppend
	if err == nil {
		if err = reqbody.DecodeJSON(r.Body, &body); err != nil {
			err = fmt.Errorf("%w: the body is {\"index\": V, \"dataset\": D} (V: the version brand index --append stored): %w", query.ErrBadRequest, err)
		}
	}
	var t taskSets
	if err == nil {
		t, err = a.sets(s)
	}
	d := 0
	if err == nil {
		d, err = t.domain(body.Dataset)
	}
	var ext *catalog.Dataset
	if err == nil {
		ext, err = a.catalog.Version(t.sets[d].Name, body.Index)
	}
	if err == nil {
		err = extendsIndex(ext, t.sets[d])
	}
	var e task.Edited
	if err == nil {
		e, err = s.Append(ctx, d, ext.ID(), ext.Index.NumSamples()-t.sets[d].Index.NumSamples())
	}
	a.edited(w, r, s, e, err)
}

// extendsIndex refuses ext unless it extends cur with new samples: the
// first chunks of an index brand index --append stored are cur's.
func extendsIndex(ext, cur *catalog.Dataset) error {
	if ext.Index.NumSamples() > cur.Index.NumSamples() {
		for _, a := range ext.Index.Lineage().Ancestors() {
			if a.ID == cur.ID() && a.Chunks == cur.Index.NumChunks() {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: index %s of dataset %s does not extend index %s, which the job's prompts are keys of: append files with brand index --append, and name the index it stores",
		task.ErrBadAnswer, ext.ID(), ext.Name, cur.ID())
}

// handleRatios serves POST /tasks/{job}/ratios: the domains' ratios from
// a step not yet full.
func (a taskAPI) handleRatios(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	s, _, err := a.fresh(r)
	var body api.TaskRatios
	if err == nil {
		if err = reqbody.DecodeJSON(r.Body, &body); err != nil {
			err = fmt.Errorf("%w: the body is {\"from_step\": S, \"ratios\": {\"math\": 0.5, ...}} (every domain named): %w", query.ErrBadRequest, err)
		}
	}
	var weights []uint64
	if err == nil {
		weights, err = ratioWeights(s.Spec(), body.Ratios)
	}
	var e task.Edited
	if err == nil {
		e, err = s.EditRatios(ctx, body.From, weights)
	}
	a.edited(w, r, s, e, err)
}

// ratioWeights are ratios as the domains' weights, in their order.
func ratioWeights(sp task.Spec, ratios map[string]float64) ([]uint64, error) {
	if len(sp.Domains) == 0 {
		return nil, fmt.Errorf("%w: a task job of one dataset has no ratios to edit (make it with domains)", query.ErrBadRequest)
	}
	doms := make([]task.Domain, len(sp.Domains))
	for i, d := range sp.Domains {
		r, ok := ratios[d.Dataset]
		if !ok {
			return nil, fmt.Errorf("%w: ratios name no ratio of domain %s: name every domain's (0 for none)", query.ErrBadRequest, d.Dataset)
		}
		if !(r >= 0 && r <= 1e6) {
			return nil, fmt.Errorf("%w: domain %s: ratio %v: 0 to 10^6", query.ErrBadRequest, d.Dataset, r)
		}
		doms[i] = task.Domain{Dataset: d.Dataset, Ratio: r}
	}
	if len(ratios) != len(doms) {
		return nil, fmt.Errorf("%w: %d ratios for the job's %d domains", query.ErrBadRequest, len(ratios), len(doms))
	}
	return task.DomainWeights(doms), nil
}

// edited answers an edit of a task job: what it did, or its refusal (a
// ratio edit from a full step: 409 naming the first editable one).
func (a taskAPI) edited(w http.ResponseWriter, r *http.Request, s *task.Stream, e task.Edited, err error) {
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	out := api.TaskEdited{Job: chi.URLParam(r, "job"), Excluded: e.Excluded, Appended: e.Appended}
	if e.Excluded == 0 && e.Appended == 0 {
		from := e.From
		out.From = &from
	}
	s.View(func(p *task.Plan) {
		c := p.Count()
		out.Prompts, out.Total = p.Prompts(), c.Excluded
	})
	writeJSON(w, http.StatusOK, out)
}

// taskDomains are a job of domains' domains and ratios in its plan.
func taskDomains(sp task.Spec, p *task.Plan) ([]api.TaskDomain, []api.TaskRatios) {
	if len(sp.Domains) == 0 {
		return nil, nil
	}
	doms := make([]api.TaskDomain, len(sp.Domains))
	for d, x := range sp.Domains {
		pass, counted, prompts := p.DomainState(d)
		doms[d] = api.TaskDomain{Dataset: x.Dataset, Index: p.DomainIndex(d), Prompts: prompts, Pass: pass, Counted: counted}
	}
	var ratios []api.TaskRatios
	for _, ph := range p.Ratios() {
		var sum uint64
		for _, w := range ph.Weights {
			sum += w
		}
		tr := api.TaskRatios{From: ph.Step, Ratios: map[string]float64{}}
		for d, w := range ph.Weights {
			tr.Ratios[sp.Domains[d].Dataset] = float64(w) / float64(sum)
		}
		ratios = append(ratios, tr)
	}
	return doms, ratios
}

// inLease are results' prompts among lease id's (a job of domains): by
// key, or by dataset and key where two of its prompts share the key. It
// reports whether the lease is open on this node.
func (t taskSets) inLease(s *task.Stream, id uint64, results []api.TaskResult, out []uint32) (open bool, err error) {
	type named struct{ dataset, key string }
	s.View(func(p *task.Plan) {
		var l task.Lease
		if l, open = p.Leases().Open(id); !open {
			return
		}
		byKey, byName := map[string][]uint32{}, map[named]uint32{}
		for _, q := range l.Prompts {
			key, dataset := t.key(p, q)
			byKey[key] = append(byKey[key], q)
			byName[named{dataset, key}] = q
		}
		for i, x := range results {
			if x.Dataset != "" {
				q, ok := byName[named{x.Dataset, x.Key}]
				if !ok {
					err = fmt.Errorf("%w: no prompt %s of dataset %s in lease %s", task.ErrBadAnswer, quote.Input(x.Key), quote.Input(x.Dataset), p.LeaseName(id))
					return
				}
				out[i] = q
				continue
			}
			switch qs := byKey[x.Key]; len(qs) {
			case 0:
				err = fmt.Errorf("%w: no prompt with key %s in lease %s", task.ErrBadAnswer, quote.Input(x.Key), p.LeaseName(id))
				return
			case 1:
				out[i] = qs[0]
			default:
				err = fmt.Errorf("%w: key %s is of %d prompts of lease %s, of several domains: name its dataset", task.ErrBadAnswer, quote.Input(x.Key), len(qs), p.LeaseName(id))
				return
			}
		}
	})
	return open, err
}
