// Package cmdtest builds the module's commands for tests that run them as
// processes of their own: a gateway whose RSS and CPU are its own, or a
// cluster of gateways, each a real process with its own memory. Under the
// race detector the binaries are built with it too, so that a race in a
// child process fails the test through its exit status; the packages are
// then already compiled for the test, and the build mostly links.
//
// Each command is built once per test process (Main): linking brand takes
// about 6 CPU-seconds, and the integration tests, which start it in
// nearly every test, linked it some 30 times a run when each test built
// its own.
//
// It is test support, as net/http's httptest is: no command links it.
package cmdtest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// built is the test process's commands: the directory Main made, and
// each command's build, made at its first Build. It is the process's
// because the binaries are: every test of a package runs with the same
// build tags and race setting, so one build of each serves them all (as
// the standard library's testenv keeps its go command's path).
var built struct {
	mu   sync.Mutex
	dir  string
	cmds map[string]func() (string, error)
}

// Main runs the package's tests with a directory for the commands Build
// builds, removed after them, and returns m.Run's code; a package whose
// tests call Build calls it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(cmdtest.Main(m)) }
func Main(m *testing.M) int {
	dir, err := os.MkdirTemp("", "brand-cmdtest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cmdtest:", err)
		return 1
	}
	built.mu.Lock()
	built.dir, built.cmds = dir, map[string]func() (string, error){}
	built.mu.Unlock()
	code := m.Run()
	if err := os.RemoveAll(dir); err != nil {
		fmt.Fprintln(os.Stderr, "cmdtest:", err)
	}
	return code
}

// errNoMain is Build's error in a package whose TestMain does not call
// Main: there is no directory to build into that outlives a test.
var errNoMain = errors.New("cmdtest: Build needs the package's TestMain to run cmdtest.Main (func TestMain(m *testing.M) { os.Exit(cmdtest.Main(m)) })")

// Build returns the path of github.com/brandgw/brand/cmd/<name> built
// with the test's build tags (brand_libav: a test built to decode video
// runs a brand that does) and race setting, once per test process: the
// first call builds it (a failure fails this test and every later one
// that asks), the others wait for it. Tests must not change the file.
func Build(t testing.TB, name string) string {
	t.Helper()
	built.mu.Lock()
	if built.cmds == nil {
		built.mu.Unlock()
		t.Fatal(errNoMain)
	}
	build, ok := built.cmds[name]
	if !ok {
		bin := filepath.Join(built.dir, name)
		build = sync.OnceValues(func() (string, error) {
			args := []string{"build", "-o", bin}
			if raceEnabled {
				args = append(args, "-race")
			}
			if len(buildTags) > 0 {
				args = append(args, "-tags", strings.Join(buildTags, ","))
			}
			_, err := goCommand(append(args, "github.com/brandgw/brand/cmd/"+name)...)
			return bin, err
		})
		built.cmds[name] = build
	}
	built.mu.Unlock()
	bin, err := build()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// Go runs the go command (the toolchain's that built the test, else the
// one on PATH) with args and returns its standard output. A failure fails
// t with the command's standard error.
func Go(t testing.TB, args ...string) string {
	t.Helper()
	out, err := goCommand(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// goCommand is Go's command, its failure an error.
func goCommand(args ...string) (string, error) {
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			return "", fmt.Errorf("the go command is needed for go %s: %w", strings.Join(args, " "), err)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(goTool, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go %s: %w\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.String(), nil
}
