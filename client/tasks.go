package client

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/brandgw/brand/api"
)

// Tasks is a task job of a gateway (docs/tasks.md): the prompts a
// post-training run's generators lease, answer and score, and the steps
// its trainer consumes. It is a small face of its own, apart from Client
// (whose job is a batch job's epochs): every call is one request, and a
// refusal is an *APIError with the gateway's message (503s carry their
// Retry-After).
//
//	t := client.NewTasks("http://brand:8080", "grpo-7", client.TasksOptions{Dataset: "prompts"})
//	l, err := t.Lease(ctx, "gen-3", 64)          // a generator
//	…
//	_, err = t.Answer(ctx, l.Lease, results)
//	s, err := t.Step(ctx, 12)                    // the trainer
//	err = t.Trained(ctx, 13)
type Tasks struct {
	base, job string
	opts      TasksOptions
}

// TasksOptions are a Tasks' dataset (when the gateway serves several),
// token and HTTP client (http.DefaultClient if nil).
type TasksOptions struct {
	Dataset string
	Token   string
	HTTP    *http.Client
}

// NewTasks is task job job of the gateway at base.
func NewTasks(base, job string, opts TasksOptions) *Tasks {
	if opts.HTTP == nil {
		opts.HTTP = http.DefaultClient
	}
	return &Tasks{base: strings.TrimRight(base, "/"), job: job, opts: opts}
}

// Make makes the job with spec (its JSON fields as docs/tasks.md names
// them: step, policy, ahead, ttl, …) and reports whether it was made now
// (false: made before with the same spec).
func (t *Tasks) Make(ctx context.Context, spec map[string]any) (api.TaskPlan, bool, error) {
	var out api.TaskPlan
	status, err := t.call(ctx, http.MethodPut, "", spec, &out)
	return out, status == http.StatusCreated, err
}

// Plan is where the job's plan stands.
func (t *Tasks) Plan(ctx context.Context) (api.TaskPlan, error) {
	var out api.TaskPlan
	_, err := t.call(ctx, http.MethodGet, "", nil, &out)
	return out, err
}

// Lease leases up to k prompts to generator gen. The ask carries an ID
// of its own (api.TaskLeaseRequest.Request) and is sent again, up to
// leaseTries times, when no answer comes back (a connection the
// gateway's restart closed, a reset): the gateway answers a repeat with
// the lease the first made, so a lost answer never leaves a second lease
// held. A refusal (an *APIError: the window full, 503) is returned as
// it comes.
//
// When no try is answered, Lease looks the ask up among gen's open
// leases (GET …/leases, each naming the request ID it was asked with)
// and returns the lease it made, if it made one. If that cannot be
// asked either, the error is a *LeaseUnansweredError naming the ask's
// request ID, Held: a lease it made would be held until its deadline
// (the job's ttl), its prompts leased to no one else. Ask again with
// LeaseAgain and that ID once the gateway answers: the answer is that
// lease if it was made and is open, or a new one — never two.
func (t *Tasks) Lease(ctx context.Context, gen string, k int) (api.TaskLease, error) {
	var id [16]byte
	_, _ = rand.Read(id[:])
	return t.LeaseAgain(ctx, gen, k, hex.EncodeToString(id[:]))
}

// LeaseAgain is Lease with the ask's request ID given: asked before
// with request (a *LeaseUnansweredError's), it is answered with the
// lease that ask made if that lease is open, else a new lease is made.
func (t *Tasks) LeaseAgain(ctx context.Context, gen string, k int, request string) (api.TaskLease, error) {
	ask := api.TaskLeaseRequest{Generator: gen, Prompts: k, Request: request}
	pause := leasePause
	for try := 1; ; try++ {
		var out api.TaskLease
		_, err := t.call(ctx, http.MethodPost, "/leases", ask, &out)
		var refused *APIError
		if err == nil || errors.As(err, &refused) {
			return out, err
		}
		if try == leaseTries || ctx.Err() != nil {
			return t.lost(ctx, ask, try, err)
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return t.lost(ctx, ask, try, err)
		}
		pause *= 2
	}
}

// lost is an ask no try of which was answered: the open lease it made,
// if the gateway answers its generator's open leases and one of them was
// made by it; else a *LeaseUnansweredError.
func (t *Tasks) lost(ctx context.Context, ask api.TaskLeaseRequest, tries int, err error) (api.TaskLease, error) {
	if ctx.Err() == nil {
		if open, oerr := t.OpenLeases(ctx, ask.Generator); oerr == nil {
			for _, l := range open {
				if l.Request == ask.Request {
					return l, nil
				}
			}
			// Answered, and no open lease is the ask's: it made none (or
			// the one it made has ended). Nothing is held.
			return api.TaskLease{}, &LeaseUnansweredError{Request: ask.Request, Tries: tries, Err: err}
		}
	}
	return api.TaskLease{}, &LeaseUnansweredError{Request: ask.Request, Tries: tries, Held: true, Err: err}
}

// LeaseUnansweredError is a lease ask none of whose tries was answered.
// Held: its generator's open leases could not be asked either, so the
// ask may have made a lease that is held (its prompts leased to no one
// else until its deadline): ask again with LeaseAgain(…, Request) once
// the gateway answers, and that lease is answered, never a second. Not
// Held: the gateway answered that no open lease is the ask's; nothing is
// held, and a new ask is as good.
type LeaseUnansweredError struct {
	Request string
	Tries   int
	Held    bool
	Err     error
}

func (e *LeaseUnansweredError) Error() string {
	if e.Held {
		return fmt.Sprintf("client: lease ask %s: no answer to %d tries, nor to its generator's open leases: a lease it made is held until its deadline; ask again with LeaseAgain and request %s: %v",
			e.Request, e.Tries, e.Request, e.Err)
	}
	return fmt.Sprintf("client: lease ask %s: no answer to %d tries, and no open lease of the generator's is the ask's (none is held): %v", e.Request, e.Tries, e.Err)
}

func (e *LeaseUnansweredError) Unwrap() error { return e.Err }

// A lease without an answer is sent again leaseTries times in all, after
// leasePause, doubling: 1.5 s for a gateway restarting.
const (
	leaseTries = 5
	leasePause = 100 * time.Millisecond
)

// OpenLeases are generator gen's open leases: what a restarted generator
// takes up.
func (t *Tasks) OpenLeases(ctx context.Context, gen string) ([]api.TaskLease, error) {
	var out api.TaskLeases
	_, err := t.call(ctx, http.MethodGet, "/leases?generator="+url.QueryEscape(gen), nil, &out)
	return out.Leases, err
}

// Samples writes a lease's prompts' members, a tar, to w.
func (t *Tasks) Samples(ctx context.Context, lease string, w io.Writer) error {
	resp, err := t.send(ctx, http.MethodGet, "/leases/"+url.PathEscape(lease)+"/samples", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(w, resp.Body)
	return err
}

// Answer sends a lease's answers.
func (t *Tasks) Answer(ctx context.Context, lease string, results []api.TaskResult) (api.TaskAnswered, error) {
	var out api.TaskAnswered
	_, err := t.call(ctx, http.MethodPost, "/leases/"+url.PathEscape(lease)+"/feedback", api.TaskFeedback{Results: results}, &out)
	return out, err
}

// Step is full step n; an *APIError of status 503 while it fills.
func (t *Tasks) Step(ctx context.Context, n uint64) (api.TaskStep, error) {
	var out api.TaskStep
	_, err := t.call(ctx, http.MethodGet, fmt.Sprintf("/steps/%d", n), nil, &out)
	return out, err
}

// WaitStep is Step, asked again every poll while the step fills, until
// ctx ends.
func (t *Tasks) WaitStep(ctx context.Context, n uint64, poll time.Duration) (api.TaskStep, error) {
	for {
		s, err := t.Step(ctx, n)
		if ae, ok := errors.AsType[*APIError](err); !ok || ae.StatusCode != http.StatusServiceUnavailable {
			return s, err
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("client: waiting for step %d of task job %s: %w (last: %w)", n, t.job, ctx.Err(), err)
		case <-time.After(poll):
		}
	}
}

// Trained says the trainer consumed the steps below step.
func (t *Tasks) Trained(ctx context.Context, step uint64) error {
	_, err := t.call(ctx, http.MethodPost, "/trainer", api.TaskTrainer{Step: step}, nil)
	return err
}

// Exclude takes prompts out of the job at once (docs/tasks.md, "Edits"):
// keys of domain dataset ("" for a job of one dataset), never leased
// after it. A lease holding one when it is excluded answers it uncounted
// (api.TaskAnswered.Excluded).
func (t *Tasks) Exclude(ctx context.Context, dataset string, keys []string) (api.TaskEdited, error) {
	var out api.TaskEdited
	_, err := t.call(ctx, http.MethodPost, "/exclude", api.TaskExclusion{Dataset: dataset, Keys: keys}, &out)
	return out, err
}

// Append adds the prompts of index, an index version extending domain
// dataset's (brand index --append; "" for a job of one dataset), to the
// domain's next pass.
func (t *Tasks) Append(ctx context.Context, dataset, index string) (api.TaskEdited, error) {
	var out api.TaskEdited
	_, err := t.call(ctx, http.MethodPost, "/append", api.TaskAppend{Dataset: dataset, Index: index}, &out)
	return out, err
}

// EditRatios sets a job of domains' ratios (every domain's, by dataset)
// from step from on. A step already full is refused: an *APIError of 409
// whose FirstEditableStep is the first step an edit may start from.
func (t *Tasks) EditRatios(ctx context.Context, from uint64, ratios map[string]float64) (api.TaskEdited, error) {
	var out api.TaskEdited
	_, err := t.call(ctx, http.MethodPost, "/ratios", api.TaskRatios{From: from, Ratios: ratios}, &out)
	return out, err
}

// Replay is the job's log replayed by the gateway, as its JSON lines.
func (t *Tasks) Replay(ctx context.Context) ([]json.RawMessage, error) {
	resp, err := t.send(ctx, http.MethodGet, "/replay", nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out []json.RawMessage
	dec := json.NewDecoder(resp.Body)
	for {
		var m json.RawMessage
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return out, fmt.Errorf("%w: task job %s's replay: %w", ErrBadResponse, t.job, err)
		}
		out = append(out, m)
	}
}

// call sends a request with body as JSON (none if nil) and decodes the
// answer into out (if not nil).
func (t *Tasks) call(ctx context.Context, method, path string, body, out any) (int, error) {
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	resp, err := t.send(ctx, method, path, raw)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if out != nil {
		if err := json.NewDecoder(io.LimitReader(resp.Body, maxJSON)).Decode(out); err != nil {
			return resp.StatusCode, fmt.Errorf("%w: decoding JSON: %w", ErrBadResponse, err)
		}
	}
	return resp.StatusCode, nil
}

// send sends a request and answers its response when it is a 2xx, or
// the gateway's refusal as an *APIError.
func (t *Tasks) send(ctx context.Context, method, path string, body []byte) (*http.Response, error) {
	u := t.base + "/tasks/" + url.PathEscape(t.job) + path
	if t.opts.Dataset != "" {
		sep := "?"
		if strings.Contains(u, "?") {
			sep = "&"
		}
		u += sep + "dataset=" + url.QueryEscape(t.opts.Dataset)
	}
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, r)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if t.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+t.opts.Token)
	}
	resp, err := t.opts.HTTP.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		defer resp.Body.Close()
		return nil, readAPIError(resp, time.Now())
	}
	return resp, nil
}
