package importance

import "github.com/brandgw/brand/internal/errkind"

// Errors returned by this package, wrapped with detail (which sample, which
// field, what was expected); inspect them with errors.Is. A gateway maps
// ErrBadFeedback, ErrInvalid and ErrMismatch to 400 and ErrCorrupt to a
// server error: a snapshot in the store failing its checksum is not the
// client's fault.
var (
	// ErrBadFeedback reports a feedback batch that cannot be accepted: an
	// unknown sample ID, a loss that is NaN, infinite or negative, or ID
	// and loss lists of different lengths. Nothing of the batch is applied.
	ErrBadFeedback = errkind.New(errkind.Invalid, "importance: bad feedback")

	// ErrInvalid reports arguments outside their allowed range: a job name
	// that cannot be part of an object key, a negative count, a window
	// below 1, a snapshot whose length is not the dataset's.
	ErrInvalid = errkind.New(errkind.Internal, "importance: invalid arguments")

	// ErrMismatch reports a snapshot or accumulator that belongs to another
	// dataset index, job or sample count than the one it is used with.
	ErrMismatch = errkind.New(errkind.Invalid, "importance: snapshot does not match")

	// ErrCorrupt reports an encoded snapshot that is not one: bad magic,
	// unknown format version, wrong length, checksum mismatch, or a score
	// that is not a finite number >= 0.
	ErrCorrupt = errkind.New(errkind.Internal, "importance: corrupt snapshot")
)
