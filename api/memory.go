package api

// MemoryStats are a node's memory budget (--memory-limit) and what its
// shares hold now (/stats "memory"; docs/architecture.md, "Memory"). The
// JSON keeps the names it was first published with ("parts", "part").
type MemoryStats struct {
	Limit  int64         `json:"limit_bytes"`
	Shares []MemoryShare `json:"parts"`
}

// MemoryShare is one share of the memory budget: its bytes, what it holds
// now (the cache: its chunk buffers' capacity; the base holds what the
// rest of the process does, which is not counted), and the reservations
// refused after waiting the bound.
type MemoryShare struct {
	Share   string `json:"part"`
	Bytes   int64  `json:"bytes"`
	Held    int64  `json:"held,omitempty"`
	Refused int64  `json:"refused,omitempty"`
}
