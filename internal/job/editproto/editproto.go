// Package editproto is the protocol every edit of a named job follows,
// whatever it changes. An edit changes a named job's future from a step
// on and never its past: a schedule's version (internal/job/jobsched), an
// exclusion or an append, links of one job's chain (internal/job/chain).
// Each is refused from a step the job has been served, and the ones kept
// in a dataset's store are versioned there the same way; this package is
// that rule and that protocol, once:
//
//   - ServedError and ConflictError, the two refusals every edit answers
//     (409), each carrying the Subject of the edit refused, so the
//     gateway maps one type of each to its answer's fields;
//   - Positions, the positions a node has served of each named job, and
//     the lock that keeps an edit from being made while a batch is laid
//     out under the edits there were before it: one for every subject of
//     edit a node keeps, so a batch served is recorded once;
//   - Versions, the versions of one subject of edit of a job stored in
//     its dataset's store (see Versions for the objects).
package editproto

import "fmt"

// A Subject is what an edit changes — a job's schedule, its exclusions,
// its appends — as its refusals name it.
type Subject string

// The subjects of edits.
const (
	Schedule  Subject = "schedule edit"
	Exclusion Subject = "exclusion"
	Append    Subject = "append"
	// Edit is an exclusion or an append, where the chain that holds
	// both is meant.
	Edit Subject = "edit"
)

// A refusal is what both refusals are: the subject of the edit refused, and the
// error, which wraps the refusing package's ErrConflict.
type refusal struct {
	Subject Subject
	err     error
}

func (r refusal) Error() string { return r.err.Error() }
func (r refusal) Unwrap() error { return r.err }

// A ServedError is the conflict of an edit from a step the job has been
// served: Next is the first step an edit could start at when it was
// refused.
type ServedError struct {
	refusal
	Next uint64
}

// NewServedError is err, the refusal of an edit of kind from a step
// served, naming next.
func NewServedError(kind Subject, next uint64, err error) *ServedError {
	return &ServedError{refusal{kind, err}, next}
}

// A ConflictError is the conflict of an edit based on a version that is
// not the job's current one, or of a request laid out under a version an
// edit has since changed: Current is the version to read, or to base the
// edit on.
type ConflictError struct {
	refusal
	Current string
}

// NewConflictError is err, the refusal of an edit of kind, naming the
// current version.
func NewConflictError(kind Subject, current string, err error) *ConflictError {
	return &ConflictError{refusal{kind, err}, current}
}

// conflictf is a ConflictError whose error wraps sentinel.
func conflictf(kind Subject, current string, sentinel error, format string, args ...any) *ConflictError {
	return NewConflictError(kind, current, fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...))
}
