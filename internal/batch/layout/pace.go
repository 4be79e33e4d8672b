package layout

import (
	"github.com/brandgw/brand/internal/job/jobstream"
	"github.com/brandgw/brand/shuffle"
)

// A Pace is how fast a schedule's component is read at each position of
// its stream (jobstream.Pace): the type lives below the layout, beside the
// Stream that holds it.
type Pace = jobstream.Pace

// NewPace returns component i's pace under schedule s, whose passes hold
// n samples each, from the phase holding step from on (jobstream.NewPace).
func NewPace(s *shuffle.Schedule, i, n int, from uint64) *Pace {
	return jobstream.NewPace(s, i, n, from)
}

// NewTokenPace returns a token component's pace in its stream's
// positions, documents (jobstream.NewTokenPace).
func NewTokenPace(s *shuffle.Schedule, i, n, docs int, from uint64) *Pace {
	return jobstream.NewTokenPace(s, i, n, docs, from)
}
