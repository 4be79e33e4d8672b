//go:build !linux

package transform

import "time"

// threadCPU has no per-thread clock here: Apply reports wall time.
func threadCPU() (time.Duration, bool) { return 0, false }
