package bench

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTrainerNodeRun: the training node runs its script under taskset on
// its core and decodes the one JSON value it prints; a failing script's
// error names the script and carries its stderr.
func TestTrainerNodeRun(t *testing.T) {
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		missing(t, "no taskset (util-linux)")
	}
	interp, err := exec.LookPath("python3")
	if err != nil {
		missing(t, "no python3")
	}
	script := filepath.Join(t.TempDir(), "node.py")
	code := "import json, os, sys\nif sys.argv[1] == 'fail':\n    sys.exit('it failed')\nprint(json.dumps({'arg': sys.argv[1], 'cores': sorted(os.sched_getaffinity(0)), 'env': os.environ.get('NODE', '')}))\n"
	if err := os.WriteFile(script, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	n := trainerNode{cpus: "0", taskset: taskset, interp: interp, script: script, env: []string{"NODE=trainer"}}
	var out struct {
		Arg   string `json:"arg"`
		Cores []int  `json:"cores"`
		Env   string `json:"env"`
	}
	if err := n.run(context.Background(), &out, "hello"); err != nil {
		t.Fatal(err)
	}
	if out.Arg != "hello" || len(out.Cores) != 1 || out.Cores[0] != 0 || out.Env != "trainer" {
		t.Errorf("got %+v; want hello on core 0 alone with NODE=trainer", out)
	}
	err = n.run(context.Background(), &out, "fail")
	if err == nil || !strings.Contains(err.Error(), "node.py fail") || !strings.Contains(err.Error(), "it failed") {
		t.Errorf("a failing script: %v", err)
	}
	if v := n.versions(context.Background(), "print('v 1')"); v != "v 1" {
		t.Errorf("versions %q", v)
	}
}

// missing skips a test for want of a tool, or fails it in CI, where every
// tool is installed.
func missing(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why)
}
