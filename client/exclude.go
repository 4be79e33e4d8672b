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

// jobPath is the path of what is stored under the job's name (what:
// "exclude", "append").
func jobPath(name, what string) (string, error) {
	if name == "" {
		return "", ErrNoJobName
	}
	return "/jobs/" + url.PathEscape(name) + "/" + what, nil
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

// exclude posts e as c's job's exclusion list.
func exclude(ctx context.Context, c *Client, e api.ExclusionEdit) (api.StoredExclusion, error) {
	out, err := postEdit[api.StoredExclusion](ctx, c, "exclude", e)
	if err != nil {
		return out, fmt.Errorf("client: excluding %d keys of job %s from step %d: %w", len(e.Keys), c.opts.Job.Name, *e.FromStep, err)
	}
	return out, nil
}

// postEdit posts e to what is stored under c's job's name (what:
// "exclude", "append") and decodes the answer (a function, not a method:
// Client's methods are its API).
func postEdit[T any](ctx context.Context, c *Client, what string, e any) (T, error) {
	var out T
	path, err := jobPath(c.opts.Job.Name, what)
	if err != nil {
		return out, err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return out, err
	}
	err = c.t.post(ctx, path, c.pins.query(c.opts.Job), body{data, "application/json"}, func(resp *http.Response) error {
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSON)).Decode(&out); err != nil {
			return fmt.Errorf("%w: decoding JSON: %w", ErrBadResponse, err)
		}
		return nil
	})
	return out, err
}

// getEdit reads what is stored under c's job's name (what: "exclude",
// "append").
func getEdit[T any](ctx context.Context, c *Client, what string) (T, error) {
	var out T
	path, err := jobPath(c.opts.Job.Name, what)
	if err != nil {
		return out, err
	}
	v, err := getJSON[T](ctx, c.t, path, c.pins.query(c.opts.Job))
	if err != nil {
		return out, err
	}
	return *v, nil
}

// Exclusion returns the job's exclusion list, its keys included.
func (c *Client) Exclusion(ctx context.Context) (api.StoredExclusion, error) {
	x, err := getEdit[api.StoredExclusion](ctx, c, "exclude")
	if err != nil {
		return x, fmt.Errorf("client: job %s's exclusion list: %w", c.opts.Job.Name, err)
	}
	return x, nil
}
