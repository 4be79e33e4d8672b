// Package jobstream is what a job reads, as the layers below the layout
// follow it: its stream of epochs (Stream, the key the layout lays out
// and the use table, prefetch and statistics follow), one epoch's order
// as the use table asks for it (EpochOrder), and how fast a schedule's
// component is read (Pace).
//
// It holds types and pure functions only. The layout
// (internal/batch/layout) computes streams and their orders; the use
// table (internal/cache/usetable) reads them without importing the
// layout, since the data path reads downward: the cache knows the
// streams it serves, not how a batch is laid out.
package jobstream

import "github.com/brandgw/brand/internal/job/catalog"

// Stream identifies a job's stream of epochs: the order it reads (the
// dataset version, seed and window, and for importance sampling the job
// and snapshot) and the job's name, if it gave one. Every rank, batch
// size, world size and offset of one job — and any other unnamed job with
// the same order — read the same sequence of epochs, so the use table,
// prefetch and statistics follow streams, not requests; named jobs that
// read one order are streams of their own, since each moves through it
// at its own pace. Streams are comparable and serve as map keys.
type Stream struct {
	DS     *catalog.Dataset
	Seed   uint64
	Window int
	// Name is the job's name (job=); "" for an unnamed job. It is not
	// part of the order: Order strips it.
	Name string
	// Imp names the importance job a stream belongs to and the snapshot
	// its epochs are drawn from; zero for the uniform shuffle. An
	// importance job's first epoch names no snapshot and reads the uniform
	// order, but is still the job's: its next epoch is not that order's.
	Imp Importance
	// Mix is the key of the mixture (layout.Mixed.Key) the stream is a
	// component of, "" for a job over one dataset: a mixture's components
	// are one job, whose batches need all of them at once, so what
	// sequences jobs (turns, loads in turn) treats them as one. It is not
	// part of the order: Order strips it.
	Mix string
	// Space is the key of the items the stream's order is of when they
	// are not the dataset's samples (api.Job.Space: a clip job's clip
	// parameters), "" otherwise: part of the order, which is of those
	// items (layout.Spaced).
	Space string
	// Edit is the version of the newest edit of the job's chain the
	// stream is laid out under (layout.Edit), "" for none: from each
	// edit's step on the order leaves samples out or takes appended ones
	// too, so it is part of the order.
	Edit string
	// Pace is, for a component of a schedule, how fast each position of
	// its stream is read (nil otherwise): the cache's schedule keys its
	// future uses by it. It is not part of the order: Order strips it.
	Pace *Pace
}

// Importance is the part of a stream an importance snapshot fixes.
type Importance struct {
	Job, Version string
	Hot          int
}

// Sampled reports whether the stream draws by importance.
func (s Stream) Sampled() bool { return s.Imp.Version != "" }

// ImportanceJob reports whether the stream is an epoch of an importance
// job: its next epoch is drawn from a snapshot not sealed yet, so the
// schedule does not project it, and the job's later epochs supersede it.
func (s Stream) ImportanceJob() bool { return s.Imp.Job != "" }

// Order is the stream with its job name cleared: the key of the order it
// reads, which named jobs of one order share.
func (s Stream) Order() Stream {
	s.Name, s.Mix, s.Pace = "", "", nil
	return s
}
