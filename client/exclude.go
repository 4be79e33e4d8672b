package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/brandgw/brand/api"
)

// An exclusion list stored under the job's name (Options.Job.Name; POST
// and GET /jobs/NAME/exclude, docs/http-api.md "Exclusions"): samples the
// job leaves out from a step on, without a reshard.
//
//	x, err := c.Exclude(ctx, 2400, []string{"shard-7/000123", …})
//	// x.Epoch, x.FromPosition: where in the order it applies from
//
// A list from a step the gateway has served of the job is refused with
// 409: an *APIError whose FirstEditableStep is the first step a list
// could start at. A job's list grows by versions: ExtendExclusion adds
// keys from a later step to the current version, which a second Exclude's
// 409 names (APIError.ExclusionVersion).

// excludePath is the path of the exclusion list stored under the job's
// name.
func excludePath(name string) (string, error) {
	if name == "" {
		return "", ErrNoJobName
	}
	return "/jobs/" + url.PathEscape(name) + "/exclude", nil
}

// Exclude stores the job's exclusion list: keys left out of its order
// from global step fromStep on (counted as the job's batches are, under
// Options.Job's batch size, world and offset), and returns it as made.
func (c *Client) Exclude(ctx context.Context, fromStep uint64, keys []string) (api.StoredExclusion, error) {
	return exclude(ctx, c, api.ExclusionEdit{FromStep: &fromStep, Keys: keys})
}

// ExtendExclusion extends the job's exclusion list, whose current version
// is previous: keys left out too from global step fromStep on (at or
// after the list's own first step), and returns the new version as made.
// Its order is the current version's before fromStep's position and
// leaves out both's samples from there. An extension of a version that is
// not the current one is refused with 409 naming the current one
// (APIError.ExclusionVersion).
func (c *Client) ExtendExclusion(ctx context.Context, previous string, fromStep uint64, keys []string) (api.StoredExclusion, error) {
	return exclude(ctx, c, api.ExclusionEdit{FromStep: &fromStep, Keys: keys, Previous: previous})
}

// exclude posts e as c's job's exclusion list (a function, not a
// method: Client's methods are its API).
func exclude(ctx context.Context, c *Client, e api.ExclusionEdit) (api.StoredExclusion, error) {
	keys, fromStep := e.Keys, *e.FromStep
	path, err := excludePath(c.opts.Job.Name)
	if err != nil {
		return api.StoredExclusion{}, err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return api.StoredExclusion{}, err
	}
	var out api.StoredExclusion
	err = c.t.post(ctx, path, c.pins.query(c.opts.Job), body{data, "application/json"}, func(resp *http.Response) error {
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSON)).Decode(&out); err != nil {
			return fmt.Errorf("%w: decoding JSON: %w", ErrBadResponse, err)
		}
		return nil
	})
	if err != nil {
		return api.StoredExclusion{}, fmt.Errorf("client: excluding %d keys of job %s from step %d: %w", len(keys), c.opts.Job.Name, fromStep, err)
	}
	return out, nil
}

// Exclusion returns the job's exclusion list, its keys included.
func (c *Client) Exclusion(ctx context.Context) (api.StoredExclusion, error) {
	path, err := excludePath(c.opts.Job.Name)
	if err != nil {
		return api.StoredExclusion{}, err
	}
	v, err := getJSON[api.StoredExclusion](ctx, c.t, path, c.pins.query(c.opts.Job))
	if err != nil {
		return api.StoredExclusion{}, fmt.Errorf("client: job %s's exclusion list: %w", c.opts.Job.Name, err)
	}
	return *v, nil
}
