package api

// PrewarmProgress is a line of POST /prewarm's answer (docs/http-api.md
// "POST /prewarm"): the steps read so
// far of those asked, the batches and bytes; the last line says Warm (or
// carries Error), with the seconds taken.
type PrewarmProgress struct {
	Steps   int     `json:"steps"`
	Of      int     `json:"of"`
	Batches int     `json:"batches"`
	Bytes   int64   `json:"bytes"`
	Warm    bool    `json:"warm,omitempty"`
	Seconds float64 `json:"seconds,omitempty"`
	Error   string  `json:"error,omitempty"`
	Status  int     `json:"status,omitempty"`
}
