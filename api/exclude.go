package api

// ExclusionEdit is the body of POST /jobs/{job}/exclude: the keys of the
// samples the job leaves out of its future, from global step FromStep on
// (counted as the job's batches name them: epoch × batches per epoch +
// batch, under the batch_size, world and offset the request's query
// gives).
//
// Previous, on a job that has a list, names its current version: the
// edit extends it (a new version whose order is the current one's up to
// FromStep's position and leaves out both lists' samples from there).
// Without it, a job that has a list refuses the edit (409 naming the
// current version, Error.ExclusionVersion).
type ExclusionEdit struct {
	FromStep *uint64  `json:"from_step"`
	Keys     []string `json:"keys"`
	Previous string   `json:"previous,omitempty"`
}

// StoredExclusion is a job's exclusion list as the exclude endpoints
// answer it.
type StoredExclusion struct {
	Job     string `json:"job"`
	Version string `json:"version"`
	Dataset string `json:"dataset"`
	IndexID string `json:"index_id"`
	// FromStep is the step the list was made from, StepSamples the
	// samples a step held then (batch_size × world), and Epoch and
	// FromPosition where in the epochs' order it starts to apply: every
	// later step, at any world size, is cut from the order without the
	// list's samples.
	FromStep     uint64 `json:"from_step"`
	StepSamples  int    `json:"step_samples"`
	Epoch        uint64 `json:"epoch"`
	FromPosition int    `json:"from_position"`
	// PassStep is, for an edit of a bucket job, the step of Epoch's pass
	// it applies from (a bucket job's edit cuts its pass at a step: the
	// steps before are unchanged, the pass's images not yet served are
	// stepped afresh from it); FromPosition is then where that step's
	// batches start in the job's items at the world it was made at.
	PassStep *int `json:"pass_step,omitempty"`
	// Samples is how many distinct samples the list names, EmptyChunks
	// how many chunks it leaves with no sample (read by no later epoch).
	Samples     int      `json:"samples"`
	EmptyChunks int      `json:"empty_chunks"`
	Keys        []string `json:"keys,omitempty"`
	// Previous is the version this one extends, "" for a first list;
	// FromPosition is then a position in its order, and Samples,
	// EmptyChunks and Keys (GET's: every version's keys, first first)
	// count both.
	Previous string `json:"previous,omitempty"`
}

// StoredEdits is a named job's chain of edits as GET /jobs/{job}/edits
// answers it: every exclusion and append, first first, and the current
// one, which the next edit names as its previous.
type StoredEdits struct {
	Job     string       `json:"job"`
	Dataset string       `json:"dataset"`
	Current string       `json:"current"`
	Edits   []StoredEdit `json:"edits"`
}

// StoredEdit is one edit of a chain: its kind ("exclude" or "append"),
// version, the edit before it, the index version it was made over (and,
// for an append, the one it grows the job to), where it applies from, and
// for an exclusion the number of keys it adds.
type StoredEdit struct {
	Kind         string `json:"kind"`
	Version      string `json:"version"`
	Previous     string `json:"previous,omitempty"`
	IndexID      string `json:"index_id"`
	Index        string `json:"index,omitempty"`
	FromStep     uint64 `json:"from_step"`
	StepSamples  int    `json:"step_samples"`
	Epoch        uint64 `json:"epoch"`
	FromPosition int    `json:"from_position"`
	PassStep     *int   `json:"pass_step,omitempty"` // a bucket job's edit: StoredExclusion's
	Keys         int    `json:"keys,omitempty"`
}
