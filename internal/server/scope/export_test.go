package scope

// The reasons a re-read is kept out of force, for the tests to tell apart.
var (
	ErrUnsettled = errUnsettled
	ErrRescoped  = errRescoped
)
