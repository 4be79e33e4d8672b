//go:build unix

package parquet

import "syscall"

// cpuTime is the CPU time the process has used (user and system, every
// thread: the garbage collector's too), in nanoseconds: on a shared
// machine a figure that other processes' load does not inflate as it
// does wall time.
func cpuTime() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
