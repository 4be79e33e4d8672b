package client

import (
	"context"
	"fmt"

	"github.com/brandgw/brand/api"
)

// An append record stored under the job's name (Options.Job.Name; POST
// and GET /jobs/NAME/append, docs/http-api.md "Appends"): the job takes
// the samples of files appended to its dataset during the run — an index
// version extending the one it reads, which `brand index --append`
// printed — from a step on, each sample once, the steps before it
// unchanged.
//
//	rec, err := c.Append(ctx, 2600, "9c1f0a4e2b7d5c31", "")
//	// rec.Epoch, rec.FromPosition: where the new samples start to be read
//
// The record is made against the version the client reads (Index: the
// version its first answer named, or Options.Job.Index), which the job
// goes on naming and pinning. A record from a step the gateway has served
// of the job is refused with 409: an *APIError whose FirstEditableStep is
// the first step a record could start at.
//
// A job takes several appends in turn (files added every hour): each
// later record names the current one and a version extending its index,
// from its step or a later one (steps counted through the epochs the
// records grew):
//
//	next, err := c.Append(ctx, 3100, "5be0c2a9d4e61f07", rec.Version)

// Append stores the job's append record: from global step fromStep on
// (counted as the job's batches are, under Options.Job's batch size,
// world and offset, through the epochs earlier records grew), the job
// reads the samples of index, a version of its dataset extending the one
// the client reads, or for a later record the one previous (the version
// of the job's current record, which AppendRecord returns) reads; it
// returns the record as made. previous is "" for the job's first record.
// A version that does not extend it, or a step before the previous
// record's, is refused with 422; a stale previous, or none for a job
// that has a record, with 409 naming the current record.
func (c *Client) Append(ctx context.Context, fromStep uint64, index, previous string) (api.StoredAppend, error) {
	rec, err := postEdit[api.StoredAppend](ctx, c, "append", api.AppendEdit{FromStep: &fromStep, Index: index, Previous: previous})
	if err != nil {
		return rec, fmt.Errorf("client: appending index %s to job %s from step %d: %w", index, c.opts.Job.Name, fromStep, err)
	}
	return rec, nil
}

// AppendRecord returns the job's current append record (its Previous
// names the one it extends).
func (c *Client) AppendRecord(ctx context.Context) (api.StoredAppend, error) {
	rec, err := getEdit[api.StoredAppend](ctx, c, "append")
	if err != nil {
		return rec, fmt.Errorf("client: job %s's append record: %w", c.opts.Job.Name, err)
	}
	return rec, nil
}
