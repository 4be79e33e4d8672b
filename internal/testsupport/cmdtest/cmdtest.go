// Package cmdtest builds the module's commands for tests that run them as
// processes of their own: a gateway whose RSS and CPU are its own, or a
// cluster of gateways, each a real process with its own memory. Under the
// race detector the binaries are built with it too, so that a race in a
// child process fails the test through its exit status; the packages are
// then already compiled for the test, and the build mostly links.
//
// It is test support, as net/http's httptest is: no command links it.
package cmdtest

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Build builds github.com/brandgw/brand/cmd/<name> into a temporary
// directory of t and returns the binary's path, with the test's build tags
// (brand_libav: a test built to decode video runs a brand that does).
func Build(t testing.TB, name string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), name)
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	if len(buildTags) > 0 {
		args = append(args, "-tags", strings.Join(buildTags, ","))
	}
	Go(t, append(args, "github.com/brandgw/brand/cmd/"+name)...)
	return bin
}

// Go runs the go command (the toolchain's that built the test, else the
// one on PATH) with args and returns its standard output. A failure fails
// t with the command's standard error.
func Go(t testing.TB, args ...string) string {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := exec.LookPath(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			t.Fatalf("the go command is needed for go %s: %v", strings.Join(args, " "), err)
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(goTool, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("go %s: %v\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.String()
}
