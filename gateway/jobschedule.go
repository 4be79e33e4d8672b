package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/edits"
	"github.com/brandgw/brand/internal/job/jobsched"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/server/reqbody"
)

// The stored schedules of named jobs (internal/job/jobsched): PUT or POST
// /jobs/{job}/schedule stores a job's first schedule or an edit of it,
// GET /jobs/{job}/schedule reads the current version, and a request with
// job=NAME&schedule=latest|VERSION is laid out under the version the
// book resolves for the steps it reads.

// maxScheduleBodyBytes bounds a schedule request's body: a schedule of
// the most phases and datasets, in JSON.
const maxScheduleBodyBytes = 4 << 20

// scheduleBook is the jobs stage's book of stored schedules, made on
// first use over the stores of the datasets the catalog serves, with
// this node's name (its URL in a cluster) and, in a cluster, how an edit
// asks the other members which steps they have served.
type scheduleBook struct {
	node   string
	others jobsched.Others // nil: a single gateway
	once   sync.Once
	book   *jobsched.Book
}

// scheduleNodes is what an edit asks of the other nodes (transport.Nodes and its Asks):
// the members now — those of every membership version this node knows
// and of its source's list, as the membership has them probed — and the
// question for the latest step of a job each has served.
type scheduleNodes interface {
	Peers() []int
	URL(k int) string
	Steps(ctx context.Context, k int, job string, from uint64) (transport.StepsReply, error)
}

// othersOf asks every other member at once, each under the probe's
// bound: the latest step any has served, or ErrUnasked naming one that
// did not answer (an edit is never made on a guess).
func othersOf(nodes scheduleNodes) jobsched.Others {
	return func(ctx context.Context, job string, from uint64) (uint64, bool, []string, error) {
		ks := nodes.Peers()
		replies, errs := make([]transport.StepsReply, len(ks)), make([]error, len(ks))
		var wg sync.WaitGroup
		for i, k := range ks {
			wg.Go(func() { replies[i], errs[i] = nodes.Steps(ctx, k, job, from) })
		}
		wg.Wait()
		var latest uint64
		served := false
		answered := make([]string, 0, len(ks))
		for i, k := range ks {
			if errs[i] != nil {
				// %v: a peer's classification is not this edit's status.
				return 0, false, nil, fmt.Errorf("%w: member %s did not say which steps of job %s it has served (%v); the edit is not made: retry when every member is up", jobsched.ErrUnasked, nodes.URL(k), job, errs[i])
			}
			if r := replies[i]; r.Served && (!served || r.Latest > latest) {
				latest, served = r.Latest, true
			}
			answered = append(answered, nodes.URL(k))
		}
		return latest, served, answered, nil
	}
}

// latestStep is this node's answer to a member's question for the latest
// step of job it has served (transport.StepsPath), before an edit from step
// from, which holds the steps from it while the edit is made
// (jobsched.Book.Answer).
func (j *jobs) latestStep(ctx context.Context, job string, from uint64) (uint64, bool, error) {
	return j.book().Answer(ctx, job, from)
}

func (j *jobs) book() *jobsched.Book {
	j.sched.once.Do(func() {
		j.sched.book = jobsched.New(func() ([]string, map[string]jobsched.Store) {
			names := j.catalog.Names()
			stores := make(map[string]jobsched.Store, len(names))
			for _, n := range names {
				if ds, err := j.catalog.Get(n); err == nil {
					stores[n] = ds.Store
				}
			}
			return names, stores
		}, j.sched.node)
	})
	return j.sched.book
}

// stored resolves job's stored schedule (job.ScheduleVersion) for the
// steps a request reads — epoch's first, or with batch >= 0 that batch's
// global batch — into job.Schedule, job.Mix and the version, and
// records a batch's steps as served.
func (j *jobs) stored(ctx context.Context, job *api.Job, epoch uint64, batch int64) error {
	book := j.book()
	cur, err := book.Current(ctx, job.Name)
	if err != nil {
		return err
	}
	// Every version reads the same datasets, so an epoch's length, and
	// so its steps, are the same under each. A token job's epoch is its
	// sources' packed sequences, which their windows (the job's split by
	// the first phase's weights) decide: the same under every version
	// that keeps the first phase, as an edit from a step after 0 does.
	samples := job.MixSamples
	if samples == 0 && job.Tokens() {
		tj := *job
		tj.Schedule, tj.Mix, tj.Dataset = cur.Parsed(), cur.Parsed()[0].Mix, ""
		src, err := j.data(ctx, tj)
		if err != nil {
			return err
		}
		samples = src.Mix.Order.NumSamples()
	}
	if samples == 0 {
		for _, name := range cur.Parsed().Datasets() {
			ds, err := j.version(api.Job{Dataset: name})
			if err != nil {
				return err
			}
			samples += ds.Index.NumSamples()
		}
	}
	k := uint64(max(job.Block(), 1))
	steps := max((uint64(samples)+k-1)/k, 1) // L/K
	first, last := epoch*steps, epoch*steps
	if batch >= 0 {
		g := uint64(job.BatchSize * max(job.World, 1))
		start := uint64(job.Offset) + uint64(batch)*g
		if end := min(steps*k, start+g); start < end {
			first, last = epoch*steps+start/k, epoch*steps+(end-1)/k
		}
	}
	// A batch's steps are recorded served as its version is resolved,
	// before it is laid out: an edit from them is refused from now on.
	v, err := book.For(ctx, job.Name, job.ScheduleVersion, first, last, batch >= 0)
	if err != nil {
		return err
	}
	job.Schedule, job.Mix, job.ScheduleVersion, job.Dataset = v.Parsed(), v.Parsed()[0].Mix, v.Version, ""
	return nil
}

func checkJobName(job string) error {
	if err := importance.ValidJobName(job); err != nil {
		return fmt.Errorf("%w: %w", query.ErrBadRequest, err)
	}
	return nil
}

// conflictHeader names, on a 409 for a request laid out under a schedule
// version an edit has since changed, the current version: a client
// re-pins to it (steps it has read are the same under both).
func conflictHeader(w http.ResponseWriter, err error) {
	// (Conflicts of every kind of edit are one type: the schedule's alone
	// name a schedule version.)
	if c, ok := errors.AsType[*jobsched.Conflict](err); ok && c.Kind == edits.Schedule {
		w.Header().Set(api.HeaderScheduleVersion, c.Current)
	}
}

// scheduleAPI serves the schedule endpoints from the jobs stage's book: a
// part of its own, as the importance endpoints are (importanceAPI).
type scheduleAPI struct{ jobs *jobs }

func (sa scheduleAPI) handleScheduleGet(w http.ResponseWriter, r *http.Request) {
	job := chi.URLParam(r, "job")
	if err := checkJobName(job); err != nil {
		writeError(r.Context(), w, err)
		return
	}
	v, err := sa.jobs.book().Current(r.Context(), job)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	a, err := sa.answer(r.Context(), v)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	writeJSON(w, http.StatusOK, a)
}

// answer is what the schedule endpoints answer of version v: it, and the
// latest step this node has served of the job (its reservation after a
// restart included).
func (sa scheduleAPI) answer(ctx context.Context, v *jobsched.Version) (api.StoredSchedule, error) {
	a := api.StoredSchedule{Job: v.Job, Version: v.Version, Previous: v.Previous, FromStep: v.FromStep, Schedule: v.Schedule}
	l, ok, err := sa.jobs.book().Latest(ctx, v.Job)
	if ok {
		a.LatestStep = &l
	}
	return a, err
}

func (sa scheduleAPI) handleScheduleEdit(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	job := chi.URLParam(r, "job")
	if err := checkJobName(job); err != nil {
		writeError(ctx, w, err)
		return
	}
	var e api.ScheduleEdit
	if err := reqbody.DecodeJSON(r.Body, &e); err != nil {
		writeError(ctx, w, fmt.Errorf("%w: the body is a JSON object {\"schedule\": \"0:web:0.7,code:0.3\", \"from_step\": 0, \"base\": \"\"} (from_step a step, or \"next\" with the schedule's first phase at next: the first step not yet read): %w", query.ErrBadRequest, err))
		return
	}
	if e.Base != "" && !jobsched.ValidVersion(e.Base) {
		writeError(ctx, w, fmt.Errorf("%w: base %q is not a schedule version (16 hex digits)", query.ErrBadRequest, e.Base))
		return
	}
	book := sa.jobs.book()
	// This node's latest step is the book's own (checked under the edit's
	// lock); every other member's is asked for (othersOf).
	check := func(s api.Schedule) error {
		// Every dataset served here: a schedule naming one that is not
		// would be refused by every request.
		for _, name := range s.Datasets() {
			if _, err := sa.jobs.version(api.Job{Dataset: name}); err != nil {
				return err
			}
		}
		return nil
	}
	var v *jobsched.Version
	var err error
	if e.FromStep.Next {
		v, err = book.EditNext(ctx, job, e.Schedule, e.Base, sa.jobs.sched.others, check)
	} else {
		v, err = book.Edit(ctx, job, e.Schedule, e.FromStep.Step, e.Base, sa.jobs.sched.others, check)
	}
	if errors.Is(err, api.ErrMix) {
		err = fmt.Errorf("%w: %w", query.ErrBadRequest, err)
	}
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	status := http.StatusOK
	if e.Base == "" {
		status = http.StatusCreated
	}
	a, err := sa.answer(ctx, v)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	writeJSON(w, status, a)
}
