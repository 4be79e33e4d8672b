package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/brandgw/brand/internal/job/catalog"

	"github.com/go-chi/chi/v5/middleware"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/cluster/membership"
	"github.com/brandgw/brand/internal/job/editproto"
	"github.com/brandgw/brand/internal/server/httperr"
	"github.com/brandgw/brand/internal/task"
)

// Errors of the gateway's own, beside those of the parts it wires (each
// part's package names its own). Everything that reaches a client is
// translated to an HTTP status in one place, internal/server/httperr, which the
// S3 face shares.
var (
	// ErrStalled means requests wait for cache room, or for room to
	// assemble or copy a batch, and none is let through: the gateway
	// cannot make progress for now.
	ErrStalled = httperr.ErrStalled
	// ErrNotImplemented marks a feature this gateway was built without.
	ErrNotImplemented = httperr.ErrNotImplemented
)

var errStalled = fmt.Errorf("%w: requests are waiting for cache room or for room to assemble a batch, and none has been let through for %s", ErrStalled, stallNotReady)

// errLeaving is /readyz's answer on a node leaving its cluster: the
// platform sends no new work to it, while it hands its chunks over.
var errLeaving = fmt.Errorf("%w: this node is leaving its cluster and hands its chunks over to their next owners; send new work to another node", catalog.ErrNotReady)

// retryAfter is what 503 responses advise; clients back off at least this.
const retryAfter = httperr.RetryAfter

// statusOf maps an error to the HTTP status a client should see
// (httperr.Status).
func statusOf(err error) int { return httperr.Status(err) }

// writeError sends err as a JSON error with the status statusOf gives.
//
// A client learns what it did wrong (4xx) in full. Of a failure on the
// gateway's side (5xx) it learns the kind and the request ID: the error
// itself names the store's endpoint, bucket, prefix or local paths, which
// are the operator's business, so it goes to the access log line of that
// request ID instead (see logRequests). The gateway's own 5xx answers —
// not ready, stalled, busy, not implemented — say nothing internal and are
// sent as they are.
func writeError(ctx context.Context, w http.ResponseWriter, err error) {
	status := statusOf(err)
	switch status {
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", strconv.Itoa(int(retryAfter/time.Second)))
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer realm="brand"`)
	}
	if u, ok := errors.AsType[*membership.UnknownMembersError](err); ok {
		// The clients name the current version in their error without
		// parsing the message.
		w.Header().Set(api.HeaderMembers, u.Current)
	}
	httperr.NoteReason(ctx, httperr.Reason(status, err))
	msg := httperr.Message(err.Error())
	if public := publicMessage(status, err); public != "" {
		noteError(ctx, err)
		msg = fmt.Sprintf("%s (request %s; the gateway's log has the details)", public, middleware.GetReqID(ctx))
	}
	body := api.Error{Error: msg, Status: status}
	// An edit's 409 says what to do instead in fields, so that a client
	// acts on it without parsing the message.
	if c, ok := errors.AsType[*editproto.ConflictError](err); ok {
		switch c.Subject {
		case editproto.Schedule:
			body.ScheduleVersion = c.Current
		case editproto.Exclusion:
			body.EditVersion, body.ExclusionVersion = c.Current, c.Current
		default:
			body.EditVersion = c.Current
		}
	}
	if s, ok := errors.AsType[*editproto.ServedError](err); ok {
		body.FirstEditableStep = &s.Next
	}
	if s, ok := errors.AsType[*task.StepFullError](err); ok {
		body.FirstEditableStep = &s.First
	}
	writeJSON(w, status, body)
}

// publicMessage is what a client is told of a failure on the gateway's
// side, or "" when err's own message may be sent (httperr.Public).
func publicMessage(status int, err error) string { return httperr.Public(status, err) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, fmt.Sprintf("encoding response: %v", err), http.StatusInternalServerError)
		return
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
