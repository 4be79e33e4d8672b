//go:build !unix

package bench

import "time"

// processCPUTime is not measured without getrusage: 0.
func processCPUTime() time.Duration { return 0 }
