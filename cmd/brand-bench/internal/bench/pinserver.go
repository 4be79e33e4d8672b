package bench

import (
	"fmt"
	"os"
	"strconv"
)

// serverCPU is Processes.ServerCPU as a core's number, -1 when empty.
func (p Processes) serverCPU() (int, error) {
	if p.ServerCPU == "" {
		return -1, nil
	}
	cpu, err := strconv.Atoi(p.ServerCPU)
	if err != nil || cpu < 0 {
		return -1, fmt.Errorf("--server-cpu %q: want a core's number, such as 1", p.ServerCPU)
	}
	return cpu, nil
}

// pinServer pins the server process pid (a gateway or a limit server) to
// Processes.ServerCPU, and, the first time, this process — the clients
// that measure it — to the other cores. Without ServerCPU it does
// nothing.
func (r *runner) pinServer(pid int) error {
	cpu, err := r.cfg.Processes.serverCPU()
	if err != nil || cpu < 0 {
		return err
	}
	if !r.clientsPinned {
		if err := pinElsewhere(os.Getpid(), cpu); err != nil {
			return err
		}
		r.clientsPinned = true
		r.logf("the servers on CPU %d, the clients on the other cores", cpu)
	}
	return pinProcess(pid, cpu)
}
