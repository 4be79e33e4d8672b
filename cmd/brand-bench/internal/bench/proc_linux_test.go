package bench

import (
	"os/exec"
	"testing"
	"time"
)

// TestProcessCPU: another process's CPU is read to below /proc's 10 ms
// ticks, and agrees with them: a child spinning for a while, read ten
// times, gives ten readings that only grow, between its /proc/<pid>/stat
// read before and two ticks over the one read after, not all of them
// multiples of 10 ms. (/proc's figure is rounded down to a tick and
// leaves out the running thread's time since the scheduler's last
// update, up to a tick more: one run read 130.1 ms against 120.)
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
		before := statCPU(pid)
		d := processCPU(pid)
		after := statCPU(pid)
		if d < last || d < before || d > after+20*time.Millisecond {
			t.Fatalf("read %v after %v; /proc/%d/stat says %v before, %v after", d, last, pid, before, after)
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
