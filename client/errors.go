package client

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/errkind"
)

var (
	// ErrInvalid marks an argument or option the client rejects before
	// sending anything.
	ErrInvalid = errkind.New(errkind.Invalid, "client: invalid argument")
	// ErrShortBody marks a response whose body ended before its
	// Content-Length. The gateway never serves partial batches, so this is
	// always a broken connection and the request is retried (except by
	// BatchRaw once bytes have reached the writer).
	ErrShortBody = errkind.New(errkind.Upstream, "client: response body shorter than its Content-Length")
	// ErrBadResponse marks a complete response that does not follow the
	// Brand API: a malformed tar or JSON body, missing headers, or a
	// gateway whose answers contradict each other. It is not retried.
	ErrBadResponse = errkind.New(errkind.Upstream, "client: bad response from gateway")
	// ErrIndexChanged marks a call no gateway could answer from the
	// dataset's index version the client reads (Client.Index; for a
	// mixture, its components' versions, one of which changed): the dataset
	// was re-packed since the job began, and the nodes that held the old
	// version no longer do (or, on a cluster, a node serves another
	// version than its peers). Resuming means starting the epoch again on
	// the new version: a new client, or Options.Job.Index set to it.
	ErrIndexChanged = errkind.New(errkind.Conflict, "client: the dataset's index changed")
	// ErrMembersUnknown marks a call about an epoch laid out under a
	// cluster membership version (Client.Members) that no gateway knows
	// any more: every node has restarted since the epoch was pinned and
	// the datasets' stores keep no list of it (the gateways cannot write
	// there). No rank can finish the epoch under that version, and one
	// that moved to another on its own would split a step between two
	// layouts — some samples twice, some never. Start the epoch again on
	// every rank: its first answer pins the version the cluster uses.
	ErrMembersUnknown = errkind.New(errkind.Conflict, "client: no gateway knows the membership version this epoch is laid out under any more")
)

// APIError is a non-2xx answer from the gateway. Calls return it wrapped;
// use errors.As to inspect it.
type APIError struct {
	// StatusCode is the HTTP status: 400 for a bad parameter, 404 for an
	// unknown dataset or an epoch, batch or rank out of range, 503 when the
	// gateway or its storage is unavailable.
	StatusCode int
	// Message is the gateway's explanation, written for the user (for a
	// range error it states the valid range).
	Message string
	// RetryAfter is the wait the gateway asked for, 0 if it did not.
	RetryAfter time.Duration
	// ScheduleVersion is, on a 409 for a stored schedule's version that an
	// edit has since changed where the request reads, the current version
	// (Brand-Schedule-Version); on a 409 refusing an edit based on a
	// version that is not the current one, the current one.
	ScheduleVersion string
	// Members is, on a 409 for a membership version no node knows any
	// more, the version the cluster agrees on now (Brand-Members).
	Members string
	// FirstEditableStep is, on a 409 refusing a schedule edit from a step
	// the job has read, the first step an edit could start at when it
	// was refused (Client.EditSchedule).
	FirstEditableStep *uint64
	// EditVersion is, on a 409 refusing an edit of a job's chain of
	// exclusions and appends that does not name the job's current edit
	// (of either kind) as its previous, that edit: the one to name
	// (Client.ExtendExclusion, Client.Append). ExclusionVersion is the
	// same on an exclusion's refusal.
	EditVersion      string
	ExclusionVersion string
}

func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("gateway: ")
	b.WriteString(strconv.Itoa(e.StatusCode))
	if t := http.StatusText(e.StatusCode); t != "" {
		b.WriteString(" ")
		b.WriteString(t)
	}
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.RetryAfter > 0 {
		fmt.Fprintf(&b, " (retry after %v)", e.RetryAfter)
	}
	return b.String()
}

// maxErrorBody bounds how much of an error body is read: the gateway's are
// a line of JSON, and a proxy's HTML error page need not be read whole.
const maxErrorBody = 64 << 10

// readAPIError builds an APIError from a non-2xx response. Bodies that are
// not the gateway's JSON (say, a load balancer's page) become the message,
// trimmed, so the user still sees what answered.
func readAPIError(resp *http.Response, now time.Time) *APIError {
	e := &APIError{
		StatusCode: resp.StatusCode,
		RetryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), now),
		Members:    resp.Header.Get(api.HeaderMembers),
	}
	if resp.StatusCode == http.StatusConflict {
		e.ScheduleVersion = resp.Header.Get(api.HeaderScheduleVersion)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var wire api.Error
	if json.Unmarshal(body, &wire) == nil && wire.Error != "" {
		e.Message = wire.Error
		if resp.StatusCode == http.StatusConflict {
			if e.ScheduleVersion == "" {
				e.ScheduleVersion = wire.ScheduleVersion // an edit's 409: no header
			}
			e.FirstEditableStep = wire.FirstEditableStep
			e.EditVersion, e.ExclusionVersion = wire.EditVersion, wire.ExclusionVersion
		}
		return e
	}
	msg := strings.TrimSpace(string(body))
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	e.Message = msg
	return e
}

// parseRetryAfter reads a Retry-After value: delay-seconds or an HTTP date.
// An absent, past or unreadable value is 0, which means "use the backoff".
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		// Clamp before converting so a huge value cannot overflow into a
		// negative duration; MaxBackoff caps it later anyway.
		const maxSeconds = int64(365 * 24 * time.Hour / time.Second)
		return time.Duration(min(max(s, 0), maxSeconds)) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// retryableStatus reports whether a status means "try again": 503 is the
// gateway's own not-ready / backend-down answer; 502 and 504 come from a
// load balancer while a gateway replica restarts. No 4xx is ever retried:
// the same request would get the same answer.
func retryableStatus(code int) bool {
	switch code {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// retryableError marks an error found while reading a 2xx body that a new
// attempt can cure (a broken connection). It is transparent to errors.Is
// and errors.As.
type retryableError struct{ err error }

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

func retryable(err error) error { return &retryableError{err} }
