package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/errkind"
)

// A schedule stored under the job's name (Options.Job.Name; PUT and POST
// /jobs/NAME/schedule, docs/http-api.md "Schedules"), read with
// Options.Job.ScheduleVersion "latest" and edited while the job trains:
//
//	v, err := c.EditSchedule(ctx, "next~+500:web:0.3,code:0.7", api.EditFrom{Next: true})
//	// v.FromStep: the step the edit took effect from
//
// An edit from a step the job has read is refused, and the steps a job
// has read run ahead of those it has trained on by its loaders' read-ahead:
// Epoch keeps Options.Ahead batches requested beyond the one its caller
// holds, so the first step not read is at most Ahead+1 batches on (more
// with queues of batches between the client and the trainer).
// An edit from the next step (api.EditFrom{Next: true}) lets the gateway
// take the first step no loader has read, as it makes the edit: it is
// never refused for a step read, and its answer names the step.

// ErrNoJobName reports a schedule call on a client whose job has no name
// (Options.Job.Name), under which a schedule is stored.
var ErrNoJobName = errkind.New(errkind.Invalid, "client: the job has no name (Options.Job.Name), under which its schedule is stored")

// schedulePath is the path of the schedule stored under the job's name.
func schedulePath(name string) (string, error) {
	if name == "" {
		return "", ErrNoJobName
	}
	return "/jobs/" + url.PathEscape(name) + "/schedule", nil
}

// Schedule returns the current version of the job's stored schedule and
// the latest step the answering node has served of the job.
func (c *Client) Schedule(ctx context.Context) (api.StoredSchedule, error) {
	path, err := schedulePath(c.opts.Job.Name)
	if err != nil {
		return api.StoredSchedule{}, err
	}
	v, err := getJSON[api.StoredSchedule](ctx, c.t, path, nil)
	if err != nil {
		return api.StoredSchedule{}, fmt.Errorf("client: job %s's schedule: %w", c.opts.Job.Name, err)
	}
	return *v, nil
}

// StoreSchedule stores the job's first schedule, text as mix_schedule=
// writes it (its first phase at step 0). A job that has one already is
// refused with 409 (an *APIError naming its current version).
//
// A bucketed mixture's staged buckets and budget are stored beside it
// with stages (at most one: api.BucketStages), which the job reads with
// buckets=stored and budget=stored.
func (c *Client) StoreSchedule(ctx context.Context, text string, stages ...api.BucketStages) (api.StoredSchedule, error) {
	e := api.ScheduleEdit{Schedule: text}
	if len(stages) > 0 {
		e.BucketStages = stages[0]
	}
	return sendSchedule(ctx, c.t, c.opts.Job.Name, e)
}

// EditSchedule edits the job's stored schedule from step from, based on
// the version current when it is called, and returns the version made:
// text holds the phases from that step on, the first at it (with
// from.Next, written at "next", and steps written +N counted from it:
// api.ResolveNext), and the version's FromStep is the step the edit took
// effect from. An edit from a step the job has read is refused with 409:
// an *APIError whose FirstEditableStep is the first step an edit could
// start at when refused; an edit made meanwhile by someone else, with
// 409 naming the current version (ScheduleVersion), which is not edited
// over. A retried edit that had been made answers the version it made.
//
// With stages (at most one), the stored bucket stages are edited from the
// same step on (their first stage at it, written "next" with from.Next
// as text's first phase is; a parameter given none keeps the version's).
func (c *Client) EditSchedule(ctx context.Context, text string, from api.EditFrom, stages ...api.BucketStages) (api.StoredSchedule, error) {
	cur, err := c.Schedule(ctx)
	if err != nil {
		return api.StoredSchedule{}, err
	}
	e := api.ScheduleEdit{Schedule: text, FromStep: from, Base: cur.Version}
	if len(stages) > 0 {
		e.BucketStages = stages[0]
	}
	return sendSchedule(ctx, c.t, c.opts.Job.Name, e)
}

// sendSchedule sends an edit of the schedule stored under the job's name
// and returns the version it made.
func sendSchedule(ctx context.Context, t *transport, name string, e api.ScheduleEdit) (api.StoredSchedule, error) {
	path, err := schedulePath(name)
	if err != nil {
		return api.StoredSchedule{}, err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return api.StoredSchedule{}, err
	}
	var out api.StoredSchedule
	err = t.post(ctx, path, nil, body{data, "application/json"}, func(resp *http.Response) error {
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSON)).Decode(&out); err != nil {
			return fmt.Errorf("%w: decoding JSON: %w", ErrBadResponse, err)
		}
		return nil
	})
	if err != nil {
		return api.StoredSchedule{}, fmt.Errorf("client: editing job %s's schedule from step %s: %w", name, e.FromStep, err)
	}
	return out, nil
}
