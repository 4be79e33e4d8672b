package feedback

import (
	"github.com/brandgw/brand/importance"
	"github.com/brandgw/brand/internal/errkind"
)

// Errors of the importance state; a gateway maps each to an HTTP status
// (gateway/errors.go, statusOf).
var (
	// ErrBadFeedback marks a feedback body that cannot be read or
	// applied (400): not JSON or whole binary records, trailing data, an
	// unknown key or ID, a loss that is not finite and >= 0, lengths that
	// differ, more than Limits.Records records or MaxBodyBytes bytes.
	ErrBadFeedback = importance.ErrBadFeedback

	// ErrBusy means the request was refused rather than take room from
	// others (503, retry later): every job slot is held by a job active
	// within the idle window, or as many feedback bodies are being decoded,
	// or epochs sealed, as the limits allow and none finished in time.
	ErrBusy = errkind.Named(errkind.Busy, "feedback_busy", "importance: busy")

	// ErrSealed means an epoch's feedback has been sealed, or collected by
	// a seal in progress: feedback for it would not be counted (409).
	ErrSealed = errkind.New(errkind.Conflict, "importance: epoch already sealed")

	// ErrNoFeedback means a seal found no feedback for the epoch on any
	// node it reached (409): sealing it would seal nothing.
	ErrNoFeedback = errkind.New(errkind.Conflict, "importance: no feedback to seal")

	// ErrStale means feedback or a seal names an epoch older than those
	// the job keeps: older than its open epochs (feedback) or than its last
	// sealed epochs, whose snapshots are all that is kept (a seal) (409).
	ErrStale = errkind.New(errkind.Conflict, "importance: epoch no longer open")
)
