package integration

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// lookTool finds a program the test runs (util-linux's taskset: on every
// Debian machine); without it the test fails with CI=true, else skips.
func lookTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is needed for this test (CI=true: failing): Debian's util-linux has it", name)
		}
		t.Skipf("%s not found: Debian's util-linux has it", name)
	}
	return p
}

// pinned returns a clusterProc command that runs its process on CPU cpu
// alone (taskset), as a node whose machine's other cores are a training
// job's.
func pinned(t *testing.T, cpu int) func(bin string, args ...string) *exec.Cmd {
	t.Helper()
	taskset := lookTool(t, "taskset")
	return func(bin string, args ...string) *exec.Cmd {
		return exec.Command(taskset, append([]string{"-c", strconv.Itoa(cpu), bin}, args...)...)
	}
}

// busyLoop starts a process that spins on CPU cpu until the test ends: a
// training job's process beside the data node's.
func busyLoop(t *testing.T, cpu int) {
	t.Helper()
	cmd := exec.Command(lookTool(t, "taskset"), "-c", strconv.Itoa(cpu), "sh", "-c", "while :; do :; done")
	if err := cmd.Start(); err != nil {
		t.Fatalf("the busy loop: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
}
