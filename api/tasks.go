package api

// The wire types of task streams (docs/tasks.md): what PUT /tasks/{job},
// the leases, the feedback, the steps and the plan carry, shared by the
// gateway and the Go client.

// TaskLeaseRequest is POST /tasks/{job}/leases's body.
type TaskLeaseRequest struct {
	Generator string `json:"generator"`
	Prompts   int    `json:"prompts"`
	// Request, if given, is the generator's ID of this ask (up to 64
	// printable bytes, unique among its asks: the clients send 16 random
	// bytes in hex). Asked again with the same ID while the lease it made
	// is open, the gateway answers that lease, so a lease is safe to
	// retry when its answer is lost.
	Request string `json:"request,omitempty"`
}

// TaskPrompt is a prompt of a lease: its key and ID in the dataset's
// index, and the pass it is leased for.
type TaskPrompt struct {
	Key  string `json:"key"`
	ID   int    `json:"id"`
	Pass uint32 `json:"pass"`
	// Dataset is, for a job of domains, the prompt's domain: its key is
	// that dataset's, and its ID the job's own (its domains' prompts
	// numbered one after another, appended ones after them all).
	Dataset string `json:"dataset,omitempty"`
}

// TaskLease is a lease: its ID, the generator it is held by, the step its
// prompts are for, its deadline and its prompts (those not yet answered,
// for a generator's open leases).
type TaskLease struct {
	Lease     string       `json:"lease"`
	Generator string       `json:"generator"`
	Step      uint64       `json:"step"`
	Expires   string       `json:"expires"`
	Prompts   []TaskPrompt `json:"prompts"`
	// Request is the ID the lease was asked with (TaskLeaseRequest's),
	// if any: a generator whose ask got no answer finds the lease it
	// made among its open leases by it.
	Request string `json:"request,omitempty"`
}

// TaskLeases is GET /tasks/{job}/leases's answer.
type TaskLeases struct {
	Leases []TaskLease `json:"leases"`
}

// TaskResult is one prompt's answer: its group's scores, or its passes of
// n; the policy version that answered it; and, optionally, whether it
// counts (overriding the policy's verdict).
type TaskResult struct {
	Key string `json:"key"`
	// Dataset is, for a job of domains, the prompt's domain: needed only
	// where two prompts of one lease share the key.
	Dataset string    `json:"dataset,omitempty"`
	Scores  []float64 `json:"scores,omitempty"`
	Passes  *int      `json:"passes,omitempty"`
	N       int       `json:"n,omitempty"`
	Version uint32    `json:"version"`
	Counts  *bool     `json:"counts,omitempty"`
}

// TaskFeedback is POST /tasks/{job}/leases/{lease}/feedback's body.
type TaskFeedback struct {
	Results []TaskResult `json:"results"`
}

// TaskAnswered is what feedback did: results applied (not repeats), of
// them counted, drawn again, rested and retired; repeats; and the steps
// the counted ones fell in.
type TaskAnswered struct {
	Lease   string `json:"lease"`
	Applied int    `json:"applied"`
	Counted int    `json:"counted"`
	Redrawn int    `json:"redrawn"`
	Rested  int    `json:"rested"`
	Retired int    `json:"retired"`
	Repeats int    `json:"repeats"`
	// Excluded are the answers to prompts excluded after the lease was
	// made: taken, never counted.
	Excluded int      `json:"excluded"`
	Steps    []uint64 `json:"steps"`
}

// TaskCounted is a counted prompt of a step.
type TaskCounted struct {
	Key     string    `json:"key"`
	Dataset string    `json:"dataset,omitempty"` // a job of domains: the prompt's
	ID      int       `json:"id"`
	Lease   string    `json:"lease"`
	Pass    uint32    `json:"pass"`
	Version uint32    `json:"version"`
	Scores  []float32 `json:"scores,omitempty"`
	Passes  *int      `json:"passes,omitempty"`
	N       int       `json:"n,omitempty"`
}

// TaskStep is GET /tasks/{job}/steps/{step}'s answer.
type TaskStep struct {
	Step    uint64        `json:"step"`
	Prompts []TaskCounted `json:"prompts"`
}

// TaskTrainer is POST /tasks/{job}/trainer's body: the trainer consumed
// the steps below Step.
type TaskTrainer struct {
	Step uint64 `json:"step"`
}

// TaskPlan is GET /tasks/{job}'s answer: where the job's plan stands, as
// of the log's last segment this node holds.
type TaskPlan struct {
	Job     string `json:"job"`
	Dataset string `json:"dataset"`
	Index   string `json:"index"`
	Spec    any    `json:"spec"`
	Prompts int    `json:"prompts"`
	// Pass is the pass being drawn; PassesDone those every prompt was
	// served in.
	Pass       uint32 `json:"pass"`
	PassesDone uint32 `json:"passes_done"`
	// Prompts by where they are: not yet drawn in the pass, leased,
	// at the front of the plan (their lease expired), done with the pass,
	// retired; and those a curriculum weighs 1 now.
	Pending int `json:"pending"`
	Leased  int `json:"leased"`
	Front   int `json:"front"`
	Waiting int `json:"waiting"`
	Retired int `json:"retired"`
	InBand  int `json:"in_band"`
	// Excluded are the prompts an exclusion took out.
	Excluded int `json:"excluded"`
	// Domains are, for a job of domains, each one's prompts, pass and
	// answers counted, and the ratios' phases by step.
	Domains []TaskDomain `json:"domains,omitempty"`
	Ratios  []TaskRatios `json:"ratios,omitempty"`
	// Answers: counted, drawn again, rested for a pass; prompts whose
	// lease expired; feedback rows applied and repeated.
	Counted      int   `json:"counted"`
	Redrawn      int   `json:"redrawn"`
	Rested       int   `json:"rested"`
	Expired      int   `json:"expired"`
	FeedbackRows int64 `json:"feedback_rows"`
	Repeats      int64 `json:"repeats"`
	// LastPassCounted are the answers counted in the last pass that
	// ended (-1 before one ends); 0 says the job is starved: every prompt
	// left gives a flat group or is retired, and no step fills.
	LastPassCounted int `json:"last_pass_counted"`
	// Leases made, and open now; full steps; the trainer's step.
	Leases     uint64 `json:"leases"`
	OpenLeases int    `json:"open_leases"`
	// OverdueLeases are leases past their deadline that the plan has not
	// expired yet (it does at the job's next request); Overdue their
	// prompts not answered, which then go back to the plan's front. Neither
	// counts in OpenLeases or Leased: no one holds them.
	OverdueLeases int    `json:"overdue_leases"`
	Overdue       int    `json:"overdue"`
	StepsFull     uint64 `json:"steps_full"`
	Trainer       uint64 `json:"trainer"`
	// The log: segments, their bytes, those read from their second copy
	// for a first that failed its checksum; the digest of every decision.
	Segments        uint64 `json:"segments"`
	LogBytes        int64  `json:"log_bytes"`
	DamagedSegments int    `json:"damaged_segments"`
	Digest          string `json:"digest"`
}

// TaskReplayEnd ends GET /tasks/{job}/replay's lines.
type TaskReplayEnd struct {
	Digest   string `json:"digest"`
	Equal    bool   `json:"equal"`
	Segments uint64 `json:"segments"`
	Diverged uint64 `json:"diverged,omitempty"`
}

// TaskDomain is a domain of a task job in its plan: its dataset, the
// index version its prompts are keys of (an append moves it), its
// prompts, the pass it draws and its answers counted.
type TaskDomain struct {
	Dataset string `json:"dataset"`
	Index   string `json:"index"`
	Prompts int    `json:"prompts"`
	Pass    uint32 `json:"pass"`
	Counted uint64 `json:"counted"`
}

// TaskRatios is the domains' ratios from step From on: POST
// /tasks/{job}/ratios's body, and a phase of a plan's ratios. Each
// domain's ratio by its dataset's name; every domain is named.
type TaskRatios struct {
	From   uint64             `json:"from_step"`
	Ratios map[string]float64 `json:"ratios"`
}

// TaskExclusion is POST /tasks/{job}/exclude's body: prompts' keys, of
// Dataset for a job of domains (one of them; "" for a job of one).
type TaskExclusion struct {
	Dataset string   `json:"dataset,omitempty"`
	Keys    []string `json:"keys"`
}

// TaskAppend is POST /tasks/{job}/append's body: the index version
// (brand index --append) extending a domain's, whose new prompts join
// its next pass; Dataset names the domain of a job of domains.
type TaskAppend struct {
	Dataset string `json:"dataset,omitempty"`
	Index   string `json:"index"`
}

// TaskEdited is what an edit of a task job did: the prompts excluded (of
// those named; excluded before is none), appended, and the step ratios
// apply from; the job's prompts and excluded after it.
type TaskEdited struct {
	Job      string  `json:"job"`
	Excluded int     `json:"excluded,omitempty"`
	Appended int     `json:"appended,omitempty"`
	From     *uint64 `json:"from_step,omitempty"`
	Prompts  int     `json:"prompts"`
	Total    int     `json:"excluded_total"`
}
