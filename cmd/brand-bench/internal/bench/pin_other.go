//go:build !linux

package bench

import "fmt"

// pinProcess pins a process's threads to a core, which the tensors
// benchmark needs to model a training node beside a data node; only
// Linux has it here (sched_setaffinity).
func pinProcess(pid, cpu int) error {
	return fmt.Errorf("bench: pinning process %d to CPU %d needs Linux (sched_setaffinity); the tensors benchmark runs there only", pid, cpu)
}

// pinElsewhere is pinProcess's other half: Linux only.
func pinElsewhere(pid, cpu int) error {
	return fmt.Errorf("bench: pinning process %d off CPU %d needs Linux (sched_setaffinity)", pid, cpu)
}
