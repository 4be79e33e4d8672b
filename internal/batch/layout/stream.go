package layout

import (
	"github.com/brandgw/brand/api"
	"github.com/brandgw/brand/internal/job/catalog"
	"github.com/brandgw/brand/internal/job/jobstream"
)

// Stream identifies a job's stream of epochs (jobstream.Stream): the type
// lives below the layout, where the use table reads it too.
type Stream = jobstream.Stream

// Importance is the part of a stream an importance snapshot fixes
// (jobstream.Importance).
type Importance = jobstream.Importance

// StreamOf is the stream a job reads on ds.
func StreamOf(ds *catalog.Dataset, job api.Job) Stream {
	s := Stream{DS: ds, Seed: job.Seed, Window: job.Window, Name: job.Name, Space: job.Space(), Edit: job.Edit}
	if i := job.Importance; i.On() {
		s.Imp.Job = i.Job
		if i.Version != "" {
			s.Imp.Version, s.Imp.Hot = i.Version, i.Hot
		}
	}
	return s
}
