package client

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/errkind"
)

// Importance sampling (docs/importance.md): a job reports each sample's
// loss after training on it, its rank 0 seals each epoch, and every rank
// reads the next epoch with the version sealed (Options.Job.Importance).
//
//	for epoch := 0; ; epoch++ {
//		for b, err := range c.Epoch(ctx, epoch) {
//			... train; c.Feedback(ctx, epoch, keys, losses)
//		}
//		if rank == 0 { v, _ = c.Seal(ctx, epoch, v) } else { v, _ = c.WaitSealed(ctx, epoch) }
//		c.SetImportance(v) // the next epoch is drawn from it
//	}

// ErrNoImportanceJob reports an importance call on a client whose job has
// no importance job name (Options.Job.Importance.Job).
var ErrNoImportanceJob = errkind.New(errkind.Invalid, "client: the job has no importance job name (Options.Job.Importance.Job)")

// Sealed is the answer to a seal.
type Sealed struct {
	Version  string `json:"version"`
	Epoch    int    `json:"epoch"`
	Reported int    `json:"reported"` // samples with feedback, over every node reached
	Object   string `json:"object"`   // the snapshot's key under the dataset's root
	Parts    int    `json:"parts"`    // nodes whose feedback was merged
}

// importancePath is job's importance endpoint path, checked.
func importancePath(job api.Job, suffix string) (string, url.Values, error) {
	name := job.Importance.Job
	if name == "" {
		return "", nil, ErrNoImportanceJob
	}
	q := url.Values{}
	if job.Dataset != "" {
		q.Set(api.ParamDataset, job.Dataset)
	}
	return "/importance/" + url.PathEscape(name) + suffix, q, nil
}

// Feedback reports the losses of samples of an epoch by key, as a batch's
// Samples name them. A sample reported twice keeps its largest loss, so a
// retried call changes nothing. Once the epoch is sealed the gateway
// refuses feedback for it with 409 (an *APIError): it would not be
// counted, and a trainer may ignore the refusal.
func (c *Client) Feedback(ctx context.Context, epoch int, keys []string, losses []float32) error {
	if len(keys) != len(losses) {
		return fmt.Errorf("%w: %d keys and %d losses", ErrInvalid, len(keys), len(losses))
	}
	l := make([]float64, len(losses))
	for i, v := range losses {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%w: the loss of %q is %v", ErrInvalid, keys[i], v)
		}
		l[i] = float64(v)
	}
	data, err := json.Marshal(map[string]any{"keys": keys, "losses": l})
	if err != nil {
		return err
	}
	return sendFeedback(ctx, c.t, c.opts.Job, epoch, body{data, "application/json"})
}

// FeedbackIDs reports losses by the index's sample IDs, in the compact
// binary form (8 bytes a sample).
func (c *Client) FeedbackIDs(ctx context.Context, epoch int, ids []int, losses []float32) error {
	if len(ids) != len(losses) {
		return fmt.Errorf("%w: %d IDs and %d losses", ErrInvalid, len(ids), len(losses))
	}
	data := make([]byte, 0, 8*len(ids))
	for i, id := range ids {
		if id < 0 || id > math.MaxUint32 {
			return fmt.Errorf("%w: sample ID %d", ErrInvalid, id)
		}
		data = binary.LittleEndian.AppendUint32(data, uint32(id))
		data = binary.LittleEndian.AppendUint32(data, math.Float32bits(losses[i]))
	}
	return sendFeedback(ctx, c.t, c.opts.Job, epoch, body{data, "application/octet-stream"})
}

// sendFeedback posts an epoch's feedback, b, for job.
func sendFeedback(ctx context.Context, t *transport, job api.Job, epoch int, b body) error {
	path, q, err := importancePath(job, "/feedback")
	if err != nil {
		return err
	}
	q.Set("epoch", strconv.Itoa(epoch))
	if err := t.post(ctx, path, q, b, discardBody); err != nil {
		return fmt.Errorf("client: feedback for epoch %d: %w", epoch, err)
	}
	return nil
}

// Seal seals an epoch's feedback onto the snapshot prev ("" for the
// first) and returns the new snapshot; its Version names the next epoch's
// importance. An epoch is sealed once: sealing it again, or at the same
// time from another rank or node, returns the version first sealed. A
// seal of an epoch for which no node has feedback fails with 409. One
// rank (rank 0) seals; the others wait for it (WaitSealed).
func (c *Client) Seal(ctx context.Context, epoch int, prev string) (*Sealed, error) {
	path, q, err := importancePath(c.opts.Job, "/seal")
	if err != nil {
		return nil, err
	}
	q.Set("epoch", strconv.Itoa(epoch))
	if prev != "" {
		q.Set("prev", prev)
	}
	var out Sealed
	err = c.t.post(ctx, path, q, body{nil, "application/octet-stream"}, func(resp *http.Response) error {
		return json.NewDecoder(io.LimitReader(resp.Body, maxJSON)).Decode(&out)
	})
	if err != nil {
		return nil, fmt.Errorf("client: sealing epoch %d: %w", epoch, err)
	}
	return &out, nil
}

// WaitSealed returns the version sealed for an epoch, polling every
// interval (at most a second) until it is or ctx ends.
func (c *Client) WaitSealed(ctx context.Context, epoch int) (string, error) {
	path, q, err := importancePath(c.opts.Job, "/epochs/"+strconv.Itoa(epoch))
	if err != nil {
		return "", err
	}
	wait := 50 * time.Millisecond
	for {
		v, err := getJSON[struct {
			Version string `json:"version"`
		}](ctx, c.t, path, q)
		var apiErr *APIError
		switch {
		case err == nil:
			return v.Version, nil
		case !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound:
			return "", fmt.Errorf("client: the version sealed for epoch %d: %w", epoch, err)
		}
		if err := sleepContext(ctx, wait); err != nil {
			return "", fmt.Errorf("client: epoch %d not sealed: %w", epoch, err)
		}
		wait = min(2*wait, time.Second)
	}
}

// SetImportance makes the client's later epochs draw from snapshot
// version (Options.Job.Importance.Version). It must not be called while
// an epoch is being read.
func (c *Client) SetImportance(version string) { c.opts.Job.Importance.Version = version }

func discardBody(resp *http.Response) error {
	_, err := io.Copy(io.Discard, resp.Body)
	return err
}
