package bench

import (
	"os/exec"
	"testing"
	"time"
)

// TestProcessCPU: another process's CPU is read to below /proc's 10 ms
// ticks, and agrees with them: a child spinning for a while, read ten
// times, gives ten readings that only grow, within a tick of its
// /proc/<pid>/stat, not all of them multiples of 10 ms.
func TestProcessCPU(t *testing.T) {
	cmd := exec.Command("sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	var last time.Duration
	ticks := 0
	for range 10 {
		time.Sleep(30 * time.Millisecond)
		d, stat := processCPU(pid), statCPU(pid)
		if d < last || d+10*time.Millisecond < stat || d > statCPU(pid)+10*time.Millisecond {
			t.Fatalf("read %v after %v; /proc/%d/stat says %v", d, last, pid, stat)
		}
		if d%(10*time.Millisecond) == 0 {
			ticks++
		}
		last = d
	}
	if last == 0 || ticks == 10 {
		t.Errorf("the child's CPU read as %v, %d of 10 readings whole ticks", last, ticks)
	}
	if self := processCPU(0); self <= 0 {
		t.Errorf("this process's CPU read as %v", self)
	}
}
