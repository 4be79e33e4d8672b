// Package pythontest finds the Python 3 that a test, a benchmark or the
// harness runs a reference, a fixture writer or a client with: the one
// way in Go, as scripts/lib/python.sh's find_python is the one way in
// the scripts, and looking in the same places in the same order.
//
// It is test support, as net/http's httptest is: the server links none
// of it.
package pythontest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// importTimeout bounds one candidate's import of the modules: importing
// torch on a loaded machine takes seconds, a hung interpreter never
// ends.
const importTimeout = 2 * time.Minute

// Candidates are where Find looks unless told: $PYTHON when set, then
// python3 on PATH, then /usr/bin/python3 (where Debian's python3-*
// packages, which the scripts install, land).
func Candidates() []string {
	return []string{os.Getenv("PYTHON"), "python3", "/usr/bin/python3"}
}

// Find returns the path of the first of candidates (Candidates if none
// is given; empty ones are passed over) that imports every module of
// modules; with no modules, the first Python that runs. The error names
// what each candidate lacked.
func Find(ctx context.Context, candidates []string, modules ...string) (string, error) {
	if len(candidates) == 0 {
		candidates = Candidates()
	}
	code := "pass"
	if len(modules) > 0 {
		code = "import " + strings.Join(modules, ", ")
	}
	var tried []string
	for _, p := range candidates {
		if p == "" {
			continue
		}
		path, err := exec.LookPath(p)
		if err != nil {
			tried = append(tried, p+": not found")
			continue
		}
		ictx, cancel := context.WithTimeout(ctx, importTimeout)
		out, err := exec.CommandContext(ictx, path, "-c", code).CombinedOutput()
		cancel()
		if err == nil {
			return path, nil
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		tried = append(tried, p+": "+lines[len(lines)-1])
	}
	what := "no Python 3"
	if len(modules) > 0 {
		what = "no Python 3 that imports " + strings.Join(modules, ", ")
	}
	return "", fmt.Errorf("%s (%s)", what, strings.Join(tried, "; "))
}

// Need returns the path of a Python 3 that imports every module of
// modules (Find over Candidates), or skips t saying so and naming hint,
// the script that installs them (e.g. "scripts/ensure-numpy.sh"). With
// CI=true it fails t instead: CI does not pass without the comparison
// the Python makes.
func Need(t testing.TB, hint string, modules ...string) string {
	t.Helper()
	path, err := Find(t.Context(), nil, modules...)
	if err == nil {
		return path
	}
	msg := err.Error()
	if hint != "" {
		msg += "; " + hint + " installs them"
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: failing)")
	}
	t.Skip(msg)
	return ""
}

// Reference runs script, a Python reference implementation of a
// document (docs/shuffle.md, docs/importance.md, …), on in and decodes
// the JSON it prints into out: the one way the module's golden tests
// hold Go to a second implementation. in is written to a file the script
// is given as its argument, as JSON, unless it is a string, which names
// a file already written (a golden file). The run is bounded by timeout;
// a missing Python fails the test with CI=true and skips it otherwise
// (Need).
func Reference(t testing.TB, script string, in, out any, timeout time.Duration) {
	t.Helper()
	python := Need(t, "")
	path, ok := in.(string)
	if !ok {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		path = filepath.Join(t.TempDir(), "inputs.json")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, script, path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", script, path, err, stderr.String())
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("decoding what %s printed: %v", script, err)
	}
}
