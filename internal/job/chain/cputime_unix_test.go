//go:build unix

package chain

import (
	"syscall"
	"time"
)

// cpuTime returns the process's CPU time (user and system), so that a
// benchmark on a shared machine can report work per CPU second rather
// than per second of a clock other processes also take.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
