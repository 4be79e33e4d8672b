package bench

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// pinProcess sets the CPU affinity of every thread of process pid to cpu;
// threads it starts later inherit it.
func pinProcess(pid, cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	return pinProcessTo(pid, &set, fmt.Sprint("CPU ", cpu))
}

// pinElsewhere sets the affinity of every thread of process pid to the
// cores this process may run on but cpu.
func pinElsewhere(pid, cpu int) error {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return fmt.Errorf("bench: reading this process's cores: %w", err)
	}
	set.Clear(cpu)
	if set.Count() == 0 {
		return fmt.Errorf("bench: no core left for the clients beside CPU %d", cpu)
	}
	return pinProcessTo(pid, &set, fmt.Sprint("the cores but ", cpu))
}

// pinProcessTo sets the affinity of every thread of process pid to set.
func pinProcessTo(pid int, set *unix.CPUSet, what string) error {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return fmt.Errorf("bench: pinning process %d: %w", pid, err)
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil && !errors.Is(err, unix.ESRCH) {
			return fmt.Errorf("bench: pinning thread %d of process %d to %s: %w", tid, pid, what, err)
		}
	}
	return nil
}
