package task

import (
	"errors"
	"fmt"
	"time"

	"github.com/brandgw/brand/internal/errkind"
)

// Errors, mapped to HTTP statuses by internal/server/httperr.
var (
	// ErrBadSpec: a spec out of its bounds (400).
	ErrBadSpec = errkind.New(errkind.Invalid, "bad task spec")
	// ErrBadRequest: a lease or feedback request out of its bounds (400).
	ErrBadRequest = errkind.New(errkind.Invalid, "bad task request")
	// ErrUnknownJob: no task job of the name (404).
	ErrUnknownJob = errkind.New(errkind.NotFound, "no such task job")
	// ErrExists: a job of the name with another spec (409).
	ErrExists = errkind.New(errkind.Conflict, "task job exists with another spec")
	// ErrLease: a lease that expired, or was never the job's (409).
	ErrLease = errkind.New(errkind.Conflict, "lease not held")
	// ErrBadAnswer: feedback naming prompts the lease does not hold, or
	// scores out of range (422).
	ErrBadAnswer = errkind.New(errkind.Unprocessable, "bad answer")
	// ErrWindow: nothing to lease now: the window ahead of the trainer
	// is full, or every prompt is leased (503, retry).
	ErrWindow = errkind.Named(errkind.Busy, "task_window", "nothing to lease now")
	// ErrNotFull: a step not yet full (503, retry).
	ErrNotFull = errkind.Named(errkind.Busy, "task_step", "step not full")
	// ErrDone: every prompt is retired (404).
	ErrDone = errkind.New(errkind.NotFound, "every prompt retired")
	// ErrForgotten: a step more than the job's keep= steps behind the
	// trainer, no longer held (404; the replay has it).
	ErrForgotten = errkind.New(errkind.NotFound, "step forgotten")
	// ErrStore: the store did not take or give the log (503).
	ErrStore = errkind.New(errkind.Unavailable, "task log unavailable")
	// ErrDamaged: a segment of the job's log fails its checksum in both
	// of its copies (502): the job is refused until one reads whole.
	ErrDamaged = errkind.New(errkind.Corrupt, "task log damaged")
	// ErrTooManyJobs: the node holds its most task jobs (503).
	ErrTooManyJobs = errkind.Named(errkind.Busy, "task_jobs", "too many task jobs on this node")
)

// DamagedSegmentError is a segment of a task job's log that neither of
// its copies holds whole. A plan without it would decide otherwise than
// the plan that served its steps (lease prompts already counted, count
// them again), so the job is refused, naming the segment, until a copy
// reads whole (restored from the store's versions or a backup).
type DamagedSegmentError struct {
	Job     string
	Segment uint64
	Cause   string
}

func (e *DamagedSegmentError) Error() string {
	return fmt.Sprintf("task job %s: segment %d of its log is damaged (%s): the job is refused until a copy of it reads whole", e.Job, e.Segment, e.Cause)
}

// Public is what a client is told: the job, the segment and the cause.
func (e *DamagedSegmentError) Public() string { return e.Error() }

func (e *DamagedSegmentError) Unwrap() error { return ErrDamaged }

// ExpiredError is a lease's expiry: feedback after its deadline.
type ExpiredError struct {
	Lease    string
	Deadline time.Time
}

func (e *ExpiredError) Error() string {
	return fmt.Sprintf("lease %s expired at %s: its unanswered prompts went back to the front of the plan", e.Lease, e.Deadline.UTC().Format(time.RFC3339Nano))
}

func (e *ExpiredError) Unwrap() error { return ErrLease }

// IsExpired reports whether err is a lease's expiry.
func IsExpired(err error) bool {
	_, ok := errors.AsType[*ExpiredError](err)
	return ok
}
