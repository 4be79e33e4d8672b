package client

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/brandgw/brand/api"
)

// maxJSON bounds a JSON response; the largest, a manifest of a very large
// batch, is a few megabytes.
const maxJSON = 64 << 20

// getJSON fetches path and decodes its JSON body into a fresh T per attempt,
// so that a retried attempt never sees a half-filled value.
func getJSON[T any](ctx context.Context, t *transport, path string, q url.Values) (*T, error) {
	r, err := t.routes(ctx)
	if err != nil {
		return nil, err
	}
	out, _, err := getJSONVia[T](ctx, t, r, path, q)
	return out, err
}

// getJSONVia is getJSON through the router r; it also returns the node
// that answered.
func getJSONVia[T any](ctx context.Context, t *transport, r *router, path string, q url.Values) (*T, string, error) {
	var out *T
	node, err := t.getVia(ctx, r, path, q, "application/json", func(resp *http.Response) error {
		cr := &countingReader{r: resp.Body}
		v := new(T)
		err := json.NewDecoder(io.LimitReader(cr, maxJSON)).Decode(v)
		if cr.err != nil {
			return retryable(shortBody(cr.n, resp.ContentLength, cr.err))
		}
		if err != nil {
			return fmt.Errorf("%w: decoding JSON: %w", ErrBadResponse, err)
		}
		out = v
		return nil
	})
	return out, node, err
}

// DatasetInfo describes a dataset the gateway serves.
type DatasetInfo = api.DatasetInfo

// Datasets lists the datasets the gateway serves.
func (c *Client) Datasets(ctx context.Context) ([]DatasetInfo, error) {
	r, err := getJSON[api.DatasetList](ctx, c.t, "/datasets", nil)
	if err != nil {
		return nil, fmt.Errorf("client: datasets: %w", err)
	}
	return r.Datasets, nil
}

// Sample fetches one sample by its WebDataset key from the client's
// dataset (Options.Job.Dataset, or the gateway's default).
func (c *Client) Sample(ctx context.Context, key string) (*Sample, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	q := url.Values{}
	if d := c.opts.Job.Dataset; d != "" {
		q.Set(api.ParamDataset, d)
	}
	var s *Sample
	_, err := c.t.get(ctx, "/samples/"+key, q, tarType, func(resp *http.Response) error {
		if err := checkContentType(resp, tarType); err != nil {
			return err
		}
		samples, _, err := readSamples(resp, nil)
		if err != nil {
			return err
		}
		if len(samples) != 1 || samples[0].Key != key {
			keys := make([]string, len(samples))
			for i := range samples {
				keys[i] = samples[i].Key
			}
			return fmt.Errorf("%w: asked for sample %q, got samples %q", ErrBadResponse, key, keys)
		}
		s = &samples[0]
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("client: sample %q: %w", key, err)
	}
	return s, nil
}

// checkKey rejects keys that cannot name a sample in a URL path: HTTP
// routers clean "." and ".." segments and empty ones away, so such a
// request would reach a different key or a redirect.
func checkKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty sample key", ErrInvalid)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return fmt.Errorf("%w: sample key %q has an empty, \".\" or \"..\" path segment", ErrInvalid, key)
		}
	}
	return nil
}
