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
//	rec, err := c.Append(ctx, 2600, "9c1f0a4e2b7d5c31")
//	// rec.Epoch, rec.FromPosition: where the new samples start to be read
//
// The record is made against the version the client reads (Index: the
// version its first answer named, or Options.Job.Index), which the job
// goes on naming and pinning. A record from a step the gateway has served
// of the job is refused with 409: an *APIError whose FirstEditableStep is
// the first step a record could start at.

// Append stores the job's append record: from global step fromStep on
// (counted as the job's batches are, under Options.Job's batch size,
// world and offset), the job reads the samples of index, a version of
// its dataset extending the one the client reads, and returns the record
// as made. A version that does not extend it is refused with 422.
func (c *Client) Append(ctx context.Context, fromStep uint64, index string) (api.StoredAppend, error) {
	rec, err := postEdit[api.StoredAppend](ctx, c, "append", api.AppendEdit{FromStep: &fromStep, Index: index})
	if err != nil {
		return rec, fmt.Errorf("client: appending index %s to job %s from step %d: %w", index, c.opts.Job.Name, fromStep, err)
	}
	return rec, nil
}

// AppendRecord returns the job's append record.
func (c *Client) AppendRecord(ctx context.Context) (api.StoredAppend, error) {
	rec, err := getEdit[api.StoredAppend](ctx, c, "append")
	if err != nil {
		return rec, fmt.Errorf("client: job %s's append record: %w", c.opts.Job.Name, err)
	}
	return rec, nil
}
