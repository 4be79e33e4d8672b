package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
)

// trainerNode is the training node of the benchmarks that split the
// machine into a training node and a data node (tensors, video, train): a
// python/bench script run as a process of its own under taskset on the
// trainer's cores, its answer one JSON value on stdout.
type trainerNode struct {
	cpus                    string // taskset's CPU list: "0", "0-13"
	taskset, interp, script string
	env                     []string
}

// newTrainerNode checks what two nodes on a core each need, two cores and
// taskset, and finds the script and its Python (findScript).
func newTrainerNode(ctx context.Context, bench string, trainerCPU, dataCPU int, script, interpreter, modules, packages string) (trainerNode, error) {
	if runtime.NumCPU() < 2 || trainerCPU == dataCPU {
		return trainerNode{}, fmt.Errorf("bench: %s needs two cores, one for the training node and one for the data node (have %d; cores %d and %d)", bench, runtime.NumCPU(), trainerCPU, dataCPU)
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		return trainerNode{}, fmt.Errorf("bench: %s pins its processes with taskset (util-linux): %w", bench, err)
	}
	interp, script, err := findScript(ctx, bench+".py", script, interpreter, modules, packages)
	if err != nil {
		return trainerNode{}, fmt.Errorf("bench: %w", err)
	}
	return trainerNode{cpus: strconv.Itoa(trainerCPU), taskset: taskset, interp: interp, script: script}, nil
}

// findScript returns a Python that imports modules (findInterpreter) and
// the script: the one given, else python/bench/name above the working
// directory.
func findScript(ctx context.Context, name, script, interpreter, modules, packages string) (interp, path string, err error) {
	path = script
	if path == "" {
		if path, err = findAbove(filepath.Join("python", "bench", name)); err != nil {
			return "", "", err
		}
	}
	interp, err = findInterpreter(ctx, interpreter, modules, packages)
	return interp, path, err
}

// run runs the script with args on the trainer's cores and decodes its
// JSON into out.
func (n trainerNode) run(ctx context.Context, out any, args ...string) error {
	full := append([]string{"-c", n.cpus, n.interp, "-W", "ignore", n.script}, args...)
	cmd := exec.CommandContext(ctx, n.taskset, full...)
	cmd.Env = n.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	setProcAttr(cmd)
	name := filepath.Base(n.script)
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("bench: %s %s: %w\n%s", name, strings.Join(args, " "), err, lastLines(stderr.String(), 20))
	}
	if err := json.Unmarshal(bytes.TrimSpace(stdout.Bytes()), out); err != nil {
		return fmt.Errorf("bench: %s %s: its output: %w", name, strings.Join(args, " "), err)
	}
	return nil
}

// versions is what the node's Python prints of code (its libraries'
// versions), "" if it fails.
func (n trainerNode) versions(ctx context.Context, code string) string {
	out, err := exec.CommandContext(ctx, n.interp, "-c", code).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
