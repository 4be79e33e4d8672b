package api

// AppendEdit is the body of POST /jobs/{job}/append: the index version
// that extends the one the job reads (`brand index --append` printed
// it), and the global step FromStep the job takes its new samples from
// (counted as the job's batches name them: epoch × batches per epoch +
// batch, under the batch_size, world and offset the request's query
// gives; an epoch has the batches of the order in force for it, so an
// epoch a record applies in and every later one have more). A job's
// later record names its current one (Previous), and an index extending
// that record's.
type AppendEdit struct {
	FromStep *uint64 `json:"from_step"`
	Index    string  `json:"index"`
	Previous string  `json:"previous,omitempty"`
}

// StoredAppend is a job's append record as the append endpoints answer
// it.
type StoredAppend struct {
	Job     string `json:"job"`
	Version string `json:"version"`
	Dataset string `json:"dataset"`
	// IndexID is the version the record extends: the one the job read
	// (which it still names and pins), or for a later record its
	// previous record's Index; Index the version extending it, whose new
	// samples it takes.
	IndexID string `json:"index_id"`
	Index   string `json:"index"`
	// FromStep is the step the record was made from, StepSamples the
	// samples a step held then, and Epoch and FromPosition where in the
	// epochs' order the new samples start to be read.
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
	// NewSamples is how many samples the record adds, Samples how many
	// the record's epoch and every later one hold.
	NewSamples int `json:"new_samples"`
	Samples    int `json:"samples"`
	// Previous is the record this one extends ("" for a job's first).
	Previous string `json:"previous,omitempty"`
}
