//go:build unix

package bench

import (
	"syscall"
	"time"
)

// processCPUTime is this process's CPU time, user and system, all its
// threads (getrusage(RUSAGE_SELF)): to the microsecond, where /proc's
// stat counts in ticks of 10 ms.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
