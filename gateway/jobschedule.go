package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/bucket"
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/cluster/transport"
	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/internal/job/jobsched"
	"github.com/brandgw/brand/internal/job/query"
	"github.com/brandgw/brand/internal/job/resolve"
	"github.com/brandgw/brand/internal/quote"
	"github.com/brandgw/brand/internal/server/reqbody"
	"github.com/brandgw/brand/internal/server/scope"
)

// The stored schedules of named jobs (internal/job/jobsched): PUT or POST
// /jobs/{job}/schedule stores a job's first schedule or an edit of it,
// GET /jobs/{job}/schedule reads the current version, and a request with
// job=NAME&schedule=latest|VERSION is laid out under the version the
// book resolves for the steps it reads.

// maxScheduleBodyBytes bounds a schedule request's body: a schedule of
// the most phases and datasets, in JSON.
const maxScheduleBodyBytes = 4 << 20

// scheduleNodes is what an edit asks of the other nodes
// (transport.Nodes and its Asks): the members now — those of every
// membership version this node knows and of its source's list, as the
// membership has them probed — and the question of what each has served
// of a job.
type scheduleNodes interface {
	Peers() []int
	URL(k int) string
	Steps(ctx context.Context, k int, q transport.StepsQuestion) (transport.StepsReply, error)
}

// othersOf asks every other member at once (those q.To names, if not
// nil), each under the probe's bound, what it has served of a job before
// an edit (resolve.Others): every answer, or ErrUnasked naming one that
// did not answer (an edit is never made on a guess) with the answers of
// those that did.
func othersOf(nodes scheduleNodes) resolve.Others {
	return func(ctx context.Context, q resolve.Question) ([]resolve.Answer, error) {
		ks := nodes.Peers()
		if q.To != nil {
			ks = slices.DeleteFunc(ks, func(k int) bool { return !slices.Contains(q.To, nodes.URL(k)) })
		}
		replies, errs := make([]transport.StepsReply, len(ks)), make([]error, len(ks))
		tq := transport.StepsQuestion{Edit: q.Edit, Job: q.Job, From: q.Step, Dataset: q.Dataset, Epoch: q.Epoch, Pos: q.Pos, Release: q.Release}
		var wg sync.WaitGroup
		for i, k := range ks {
			wg.Go(func() { replies[i], errs[i] = nodes.Steps(ctx, k, tq) })
		}
		wg.Wait()
		answers := make([]resolve.Answer, 0, len(ks))
		var unasked error
		for i, k := range ks {
			if errs[i] != nil {
				if unasked == nil {
					// %v: a peer's classification is not this edit's status.
					unasked = fmt.Errorf("%w: member %s did not say what it has served of job %s (%v); the edit is not made: retry when every member is up", jobsched.ErrUnasked, nodes.URL(k), q.Job, errs[i])
				}
				continue
			}
			r := replies[i]
			answers = append(answers, resolve.Answer{Node: nodes.URL(k), Step: r.Latest, StepServed: r.Served, Epoch: r.Epoch, End: r.End, PosServed: r.PosServed})
		}
		return answers, unasked
	}
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
	if c, ok := errors.AsType[*jobsched.Conflict](err); ok && c.Subject == editproto.Schedule {
		w.Header().Set(api.HeaderScheduleVersion, c.Current)
	}
}

// scheduleAPI serves the schedule endpoints from the jobs stage's book: a
// part of its own, as the importance endpoints are (importanceAPI).
type scheduleAPI struct{ jobs *resolve.Editor }

func (sa scheduleAPI) handleScheduleGet(w http.ResponseWriter, r *http.Request) {
	job := chi.URLParam(r, "job")
	if err := checkJobName(job); err != nil {
		writeError(r.Context(), w, err)
		return
	}
	book := sa.jobs.Schedules()
	v, err := book.Current(r.Context(), job)
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	// A token of a narrowed scope reads a schedule over the datasets its
	// scope covers alone, as it reads their batches.
	if err := allow(r.Context(), scope.Read, scheduleDatasets(v.Schedule), job); err != nil {
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
	a := api.StoredSchedule{Job: v.Job, Version: v.Version, Previous: v.Previous, FromStep: v.FromStep, Schedule: v.Schedule, BucketStages: v.BucketStages}
	book := sa.jobs.Schedules()
	l, ok, err := book.Latest(ctx, v.Job)
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
	// A token of a narrowed scope stores a schedule over the datasets
	// its scope covers alone (every version reads its first's datasets).
	if err := allow(ctx, scope.Edit, scheduleDatasets(e.Schedule), job); err != nil {
		writeError(ctx, w, err)
		return
	}
	if e.Base != "" && !jobsched.ValidVersion(e.Base) {
		writeError(ctx, w, fmt.Errorf("%w: base %s is not a schedule version (16 hex digits)", query.ErrBadRequest, quote.Input(e.Base)))
		return
	}
	if err := sa.jobs.CheckScheduleEdit(ctx, job); err != nil {
		writeError(ctx, w, err)
		return
	}
	v, err := sa.jobs.EditSchedule(ctx, job, e.Schedule, e.BucketStages, e.FromStep.Step, e.FromStep.Next, e.Base)
	if errors.Is(err, api.ErrMix) || errors.Is(err, bucket.ErrSpec) {
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
